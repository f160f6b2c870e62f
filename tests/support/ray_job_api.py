"""Ray's job API on loopback, reduced to what the operator asks of a RayJob's head (the kmock
tests of RayJobs, where the kubelet stand-in reports the head pod at 127.0.0.1):
``GET /api/jobs/<id>`` answers :data:`RayJobApi.jobs` ``[id]`` (else :data:`RayJobApi.answer`,
else 404, Ray's "no such job"), ``POST /api/jobs/`` (HTTPMode) stores a job that has
SUCCEEDED. With :data:`RayJobApi.token` set, a request without ``Authorization: Bearer
<token>`` is refused (401, as Ray); every request's method and credential are kept in
:data:`RayJobApi.seen`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from support.run_service import JsonHandler, serving

JOBS_PATH = "/api/jobs/"


class RayJobApi(JsonHandler):
    """The fake head's job API (see the module); its state is the class's, reset by
    :func:`serving_ray_job_api`."""

    jobs: ClassVar[dict[str, dict[str, Any]]] = {}
    answer: ClassVar[dict[str, Any] | None] = None
    """What ``GET`` answers for a job not in :attr:`jobs` (None: 404)."""
    token: ClassVar[str | None] = None
    seen: ClassVar[list[tuple[str, str | None]]] = []
    """(method, ``Authorization`` header) of every request, in order."""
    asked: ClassVar[int] = 0
    """``GET`` requests answered."""

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization")
        self.seen.append((self.command, given))
        if self.token is None or given == f"Bearer {self.token}":
            return True
        self._answer(401, {"error": "Unauthenticated"})
        return False

    def do_GET(self) -> None:
        if not self._authorized():
            return
        type(self).asked += 1
        job = None
        if self.path.startswith(JOBS_PATH):
            job = self.jobs.get(self.path.removeprefix(JOBS_PATH), self.answer)
        self._answer(200 if job else 404, job or {"error": "not found"})

    def do_POST(self) -> None:
        if not self._authorized():
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.jobs[body["submission_id"]] = {"status": "SUCCEEDED", "message": "done"}
        self._answer(200, {"submission_id": body["submission_id"]})


@contextmanager
def serving_ray_job_api(*, token: str | None = None) -> Iterator[int]:
    """The port of a fresh :class:`RayJobApi` on 127.0.0.1 (refusing all but ``token``
    when given), served until the block ends."""
    RayJobApi.jobs, RayJobApi.answer, RayJobApi.token = {}, None, token
    RayJobApi.seen, RayJobApi.asked = [], 0
    with serving(RayJobApi) as port:
        yield port
