"""HTTP/1.1 on the wire, for :mod:`kubemill.http_client`: an answer's status line and
headers, its body as it comes (sized, chunked, or ending with the connection), and a tunnel
through an ``http://`` proxy (``CONNECT``). Standard library only, as the client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import socket


class Proxy:
    """An ``http://[user:password@]host:port`` proxy."""

    def __init__(self, address: tuple[str, int], authorization: str | None) -> None:
        self.address = address
        self.authorization = authorization

    @classmethod
    def of(cls, url: str) -> Proxy:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"proxy {url!r}: only http:// proxies are supported")
        authorization = None
        if parts.username is not None:
            import base64
            from urllib.parse import unquote

            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        return cls((parts.hostname, parts.port or 80), authorization)

    def tunnel(self, sock: socket.socket, target: str) -> None:
        """Ask the proxy for a tunnel to ``target`` (``host:port``) over ``sock``."""
        if ":" not in target.rsplit("]", 1)[-1]:
            target += ":443"
        head = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if self.authorization:
            head.append(f"Proxy-Authorization: {self.authorization}")
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        reader = sock.makefile("rb")
        try:
            line = reader.readline(MAX_LINE)
            while reader.readline(MAX_LINE) not in (b"\r\n", b"\n", b""):
                pass
        finally:
            reader.close()
        code = line.split(b" ", 2)[1:2]
        if code != [b"200"]:
            answer = line.decode("latin-1").strip() or "no answer"
            raise ConnectionRefusedError(f"the proxy refused a tunnel to {target}: {answer}")


def read_head(reader: Any, method: str) -> tuple[int, str, int | None, bool]:
    """(status, reason, body size, whether the connection stays open) of the next answer;
    the size is :data:`CHUNKED` for a chunked body, ``None`` for one that ends with the
    connection."""
    while True:
        line = reader.readline(MAX_LINE)
        if not line:
            raise Stale("the server closed the connection without answering")
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or not code.isdigit():
            raise ValueError(f"not an HTTP answer: {line[:80]!r}")
        headers: dict[str, str] = {}
        while True:
            field = reader.readline(MAX_LINE)
            if field in (b"\r\n", b"\n", b""):
                break
            name, _, value = field.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        status = int(code)
        if not 100 <= status <= 199:
            break  # (an informational answer precedes the real one)
    connection = headers.get("connection", "").lower()
    keep = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
    if method == "HEAD" or status in (204, 304):
        return status, reason, 0, keep
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return status, reason, CHUNKED, keep
    if "content-length" in headers:
        return status, reason, int(headers["content-length"]), keep
    return status, reason, None, False  # the body ends with the connection


def read_pieces(reader: Any, size: int | None, amount: int | None) -> Iterator[bytes]:
    """A body's bytes as they come (see :func:`read_head` for ``size``), in pieces of at most
    ``amount`` bytes, or with ``None`` each chunk (the whole body unless chunked) at once."""
    if size == CHUNKED:
        while True:
            line = reader.readline(MAX_LINE)
            if not line:
                raise ConnectionResetError("the answer ended before its last chunk")
            left = int(line.split(b";")[0].strip() or b"0", 16)
            if left == 0:
                while reader.readline(MAX_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield from exact_pieces(reader, left, amount)
            reader.readline(MAX_LINE)
    elif size is None:
        if amount is None:
            yield reader.read()
            return
        while piece := reader.read1(amount):
            yield piece
    else:
        yield from exact_pieces(reader, size, amount)


def exact_pieces(reader: Any, size: int, amount: int | None) -> Iterator[bytes]:
    if amount is None:
        yield read_exactly(reader, size)
        return
    left = size
    while left:
        piece = reader.read1(min(amount, left))  # what has come, without waiting for more
        if not piece:
            raise ConnectionResetError(f"the answer ended {left} bytes short")
        left -= len(piece)
        yield piece


EXPECTING_BODY = ("POST", "PUT", "PATCH")
"""Methods sent with ``Content-Length: 0`` when they carry no body (as http.client does)."""
MAX_LINE = 65537
CHUNKED = -1


class Stale(Exception):
    """The connection ended before an answer began."""


def read_exactly(reader: Any, size: int) -> bytes:
    data = reader.read(size)
    if len(data) != size:
        raise ConnectionResetError(f"the answer ended after {len(data)} of {size} bytes")
    return bytes(data)


__all__ = [
    "CHUNKED",
    "EXPECTING_BODY",
    "MAX_LINE",
    "Proxy",
    "Stale",
    "exact_pieces",
    "read_exactly",
    "read_head",
    "read_pieces",
]
