"""Where the dashboard may listen and who it serves: a non-loopback bind needs a token, and
with a token every request must carry it (header or the cookie the printed URL sets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from typer.testing import CliRunner

from kubemill.cli.app import app as cli
from kubemill.dashboard.security import TOKEN_COOKIE, BindRefused, Guard, check_bind, is_loopback
from kubemill.dashboard.server import build_app
from kubemill.sdk import JobClient


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_addresses_need_no_token(host: str) -> None:
    assert is_loopback(host)
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.7", "example.org"])
def test_a_non_loopback_bind_without_a_token_is_refused(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(BindRefused, match="without a token") as refused:
        check_bind(host, None)
    assert "--token" in str(refused.value) and "--generate-token" in str(refused.value)
    check_bind(host, "a-token")  # with a token it may
    with pytest.raises(BindRefused, match="empty"):
        check_bind(host, "  ")


def test_the_command_refuses_a_non_loopback_bind_before_listening(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["--state-dir", str(tmp_path / "state"), "dashboard", "--host", "0.0.0.0", "--port", "0"],
        env={"KUBEMILL_CONFIG": str(tmp_path / "none.yaml")},
    )
    assert result.exit_code == 1
    assert "refusing to serve the dashboard on 0.0.0.0 without a token" in result.output
    assert "kubemill dashboard (" not in result.output  # it never announced a URL


@pytest.mark.asyncio
async def test_with_a_token_every_request_must_carry_it(tmp_path: Path) -> None:
    jobs = JobClient("local", state_dir=tmp_path / "state")
    guard = Guard(token="s3cret-token")
    server = TestServer(build_app(jobs, guard=guard), host="127.0.0.1")
    client: TestClient[Any, Any]
    async with TestClient(server) as client:
        assert (await client.get("/")).status == 401
        assert (await client.get("/api/jobs")).status == 401
        assert (await client.get("/?token=wrong")).status == 401
        bearer = await client.get("/api/jobs", headers={"Authorization": "Bearer s3cret-token"})
        assert bearer.status == 200
        # The printed URL: the token moves into an HttpOnly cookie, out of the address bar.
        opened = await client.get("/?token=s3cret-token&kind=TFJob", allow_redirects=False)
        assert opened.status == 303
        assert opened.headers["Location"] == "/?kind=TFJob"
        cookie = opened.cookies[TOKEN_COOKIE]
        assert cookie.value == "s3cret-token" and cookie["httponly"]
        assert (await client.get("/")).status == 200  # the cookie now carries it
        # Security headers on every page.
        page = await client.get("/")
        assert page.headers["X-Frame-Options"] == "DENY"
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
