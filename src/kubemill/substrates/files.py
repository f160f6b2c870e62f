"""The content of delivered files that a pure framework cannot write itself.

A framework declares a file's content as data; where the content is a program shipped
with kubemill (:class:`~kubemill.frameworks.PackagedProgram`, e.g. MPI's exec agent) or a
secret generated per job (:class:`~kubemill.frameworks.SshKeyPart`,
:class:`~kubemill.frameworks.RandomToken`), the substrate fills
it in here, when it writes the set: a ConfigMap or Secret on Kubernetes, a directory
locally. Both substrates use :func:`resolved_contents`, so a file reads the same on both.
"""

from __future__ import annotations

import importlib.util
import re
import secrets
from collections.abc import Iterable
from pathlib import Path

from kubemill.core import RenderedFile
from kubemill.frameworks import PackagedProgram, RandomToken, SshKeyPart

AGENT_MODULE = re.compile(r"kubemill\.engines\.[a-z0-9_]+\.agent")
"""Only an engine's agent module may be delivered (``kubemill.engines.<engine>.agent``):
agents import nothing from kubemill (import-linter checks it)."""


class FileSourceError(RuntimeError):
    """A file's content could not be supplied (a missing program, no key library)."""


def packaged_program(module: str) -> str:
    """The source text of ``module``, an engine's agent (:data:`AGENT_MODULE`)."""
    if not AGENT_MODULE.fullmatch(module):
        raise FileSourceError(
            f"{module} is not an engine's agent (kubemill.engines.<engine>.agent)"
        )
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise FileSourceError(f"the program {module} is not installed with kubemill")
    return Path(spec.origin).read_text(encoding="utf-8")


def ssh_key_pair(comment: str) -> tuple[str, str]:
    """A new key pair: the private key (OpenSSH PEM) and its ``authorized_keys`` line.

    ECDSA P-521, as mpi-operator generates: small, fast to make, and accepted by every
    OpenSSH in use.
    """
    # Imported here: only MPI's ssh mode needs it, and it costs ~20 ms to import.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode("ascii")
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, f"{public.decode('ascii')} {comment}\n"


def resolved_contents(files: Iterable[RenderedFile], *, owner: str) -> dict[str, str]:
    """Each file's content by key, with packaged programs read, SSH keys and tokens
    generated.

    The parts of one key pair within ``files`` come from one new pair; ``owner`` (the
    job's ``namespace/name``) is the key's comment, so a key found later says whose it is.
    """
    files = list(files)
    pair: tuple[str, str] | None = None
    out: dict[str, str] = {}
    for file in files:
        source = file.source
        if isinstance(source, PackagedProgram):
            out[file.name] = packaged_program(source.module)
        elif isinstance(source, SshKeyPart):
            if pair is None:
                pair = ssh_key_pair(f"kubemill:{owner}")
            out[file.name] = pair[0] if source.part == "private" else pair[1]
        elif isinstance(source, RandomToken):
            out[file.name] = secrets.token_hex(32)
        else:
            out[file.name] = file.content
    return out


__all__ = [
    "AGENT_MODULE",
    "FileSourceError",
    "packaged_program",
    "resolved_contents",
    "ssh_key_pair",
]
