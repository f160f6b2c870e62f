"""``kubemill dashboard``: a web UI over the SDK's :class:`~kubemill.sdk.JobClient`.

Server-rendered pages (jobs, one job, logs, submit) kept live by Server-Sent Events, with
every asset shipped in this package (``static/``). It sits above the SDK and below the
CLI: the CLI only parses the options and calls :func:`serve`.

Security (see :mod:`.security`): loopback by default; any other address needs a token;
every state-changing request must come from the dashboard's own pages.
"""

from __future__ import annotations

import asyncio
import webbrowser
from collections.abc import Callable

from kubemill.sdk import JobClient

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8790


def url_for(host: str, port: int) -> str:
    """The address a browser opens (an IPv6 host in brackets; a wildcard as loopback)."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # noqa: S104 - display only
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


async def _serve(
    client: JobClient,
    *,
    host: str,
    port: int,
    token: str | None,
    open_browser: bool,
    announce: Callable[[str], None],
    ready: asyncio.Event | None = None,
) -> None:
    from aiohttp import web

    from kubemill.dashboard.security import Guard
    from kubemill.dashboard.server import build_app

    app = build_app(client, guard=Guard(token=token))
    # Open streams are cancelled on shutdown (Dashboard.shutdown); the timeout only bounds
    # a request still being answered.
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1] if runner.addresses else port
        url = url_for(host, bound)
        link = f"{url}?token={token}" if token else url
        announce(f"kubemill dashboard ({client.substrate} substrate) at {link}")
        if open_browser:
            webbrowser.open(link)
        if ready is not None:
            ready.set()
        await asyncio.Event().wait()  # until cancelled (Ctrl-C)
    finally:
        await runner.cleanup()


def serve(
    client: JobClient,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    open_browser: bool = False,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the dashboard until interrupted. Raises :class:`~.security.BindRefused` for a
    non-loopback ``host`` without a ``token`` before anything listens."""
    from kubemill.dashboard.security import check_bind

    check_bind(host, token)
    try:
        asyncio.run(
            _serve(
                client,
                host=host,
                port=port,
                token=token,
                open_browser=open_browser,
                announce=announce,
            )
        )
    except KeyboardInterrupt:
        announce("kubemill dashboard stopped")


__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "serve", "url_for"]
