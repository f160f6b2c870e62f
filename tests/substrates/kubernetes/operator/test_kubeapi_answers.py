"""The operator's API client against the test API server: which answers it parses."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubemill.substrates.kubernetes.operator.kubeapi import (
    ApiError,
    KubeApi,
    ObjectRef,
    load_client_configuration,
)
from support.kmock_cluster import ClusterThread, write_kubeconfig


def test_an_answer_not_wanted_is_read_but_not_parsed_and_the_connection_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A created pod comes back whole (managed fields and all): the reconcile drops it
    unparsed. The next request on the same kept connection still gets its own answer, and
    an error answer is still the API's own."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with ClusterThread() as cluster:
        cluster.create_namespaces("ns")
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kc", cluster.url)))
        api = KubeApi(load_client_configuration(context=None), concurrency=1)
        try:

            def config_map(name: str) -> tuple[ObjectRef, dict[str, object]]:
                body = {"metadata": {"name": name}, "data": {"k": "v" * 10_000}}
                return ObjectRef("v1", "configmaps", "ns", name), body

            async def calls() -> tuple[object, ...]:
                dropped = await api.create(*config_map("a"), answer=False)
                kept = await api.create(*config_map("b"))
                try:
                    await api.create(*config_map("a"), answer=False)
                except ApiError as exc:
                    refused: object = (exc.status, exc.reason)
                await api.delete(config_map("a")[0])
                return dropped, kept["metadata"]["name"], refused

            dropped, kept, refused = asyncio.run(calls())
        finally:
            api.close()
        assert (dropped, kept, refused) == ({}, "b", (409, "AlreadyExists"))
        assert cluster.get("/api/v1/namespaces/ns/configmaps/b")["data"]["k"] == "v" * 10_000
        made = [c for c in cluster.calls() if not c.from_tests and c.plural == "configmaps"]
        assert [(c.method, c.name or "", c.status) for c in made] == [
            ("POST", "", 201),
            ("POST", "", 201),
            ("POST", "", 409),
            ("DELETE", "a", 200),
        ]
