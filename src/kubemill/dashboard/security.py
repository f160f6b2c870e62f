"""Who may talk to the dashboard, and which requests may change a job.

Three rules, each against a different attack:

- **Where it listens.** Loopback by default. Any other address serves the whole network,
  so it needs a token (given, or generated and printed): :func:`check_bind` refuses
  to start otherwise.
- **Who is asking.** With a token, every request must carry it: the ``Authorization:
  Bearer`` header, or the cookie set when the printed URL (``/?token=...``) is opened.
  Without one (loopback only), the ``Host`` header must name a loopback address, so a web
  page whose host name was made to resolve to 127.0.0.1 (DNS rebinding) is not served.
- **Cross-site requests.** A page on another site can make the browser send a form or a
  request here with the user's cookie. So a request that changes something must carry
  the per-server CSRF token in the ``X-Kubemill-CSRF`` header (only the dashboard's own
  pages know it, and a cross-origin form cannot set a header), and its ``Origin`` and
  ``Sec-Fetch-Site``, when the browser sends them, must say it came from this origin.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

TOKEN_COOKIE = "kubemill_dashboard_token"  # noqa: S105 - the cookie's name, not a secret
CSRF_HEADER = "X-Kubemill-CSRF"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class BindRefused(ValueError):
    """The dashboard was asked to listen where it would be unsafe; the message says why."""


def new_token() -> str:
    """A fresh random token (URL-safe, 192 bits)."""
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name, maybe in brackets) stays on this machine."""
    bare = host.strip().strip("[]").lower()
    if bare in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a bind to a non-loopback address without a token."""
    if token is not None and not token.strip():
        raise BindRefused("--token: the token is empty; give one, or --generate-token")
    if token is None and not is_loopback(host):
        raise BindRefused(
            f"refusing to serve the dashboard on {host} without a token: anyone who can"
            " reach that address could stop or delete your jobs. Pass --token TOKEN, or"
            " --generate-token to have one made and printed (or bind to 127.0.0.1)"
        )


def _host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8080`` -> ``::1``)."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


@dataclass
class Guard:
    """The security settings of one dashboard server, and the middleware applying them."""

    token: str | None = None
    csrf_token: str = field(default_factory=new_token)

    def token_matches(self, offered: str | None) -> bool:
        return (
            self.token is not None
            and offered is not None
            and hmac.compare_digest(offered.encode(), self.token.encode())
        )

    def authenticated(self, request: web.Request) -> bool:
        """Whether the request may be served at all."""
        if self.token is None:
            # Loopback only (check_bind): refuse a foreign Host (DNS rebinding).
            return is_loopback(_host_name(request.host))
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer ") and self.token_matches(header[len("Bearer ") :]):
            return True
        return self.token_matches(request.cookies.get(TOKEN_COOKIE))

    def cross_site_problem(self, request: web.Request) -> str | None:
        """Why a state-changing request is refused as possibly cross-site, or None."""
        site = request.headers.get("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            return f"a {site} request may not change jobs"
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            return f"a request from {origin} may not change jobs"
        offered = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(offered.encode(), self.csrf_token.encode()):
            return f"the {CSRF_HEADER} header is missing or wrong (reload the page)"
        return None

    @web.middleware
    async def middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        offered = request.query.get("token")
        if offered is not None and self.token_matches(offered):
            # The printed URL: keep the token in a cookie and drop it from the address bar
            # (and so from the history and from Referer headers).
            rest = {k: v for k, v in request.query.items() if k != "token"}
            found = web.Response(
                status=303, headers={"Location": str(request.rel_url.with_query(rest))}
            )
            found.set_cookie(TOKEN_COOKIE, offered, httponly=True, samesite="Strict")
            return found
        if not self.authenticated(request):
            raise web.HTTPUnauthorized(
                text="kubemill dashboard: open the URL with the token that was printed"
                " when it started (or send Authorization: Bearer TOKEN)\n"
            )
        if request.method not in SAFE_METHODS:
            problem = self.cross_site_problem(request)
            if problem is not None:
                raise web.HTTPForbidden(text=f"kubemill dashboard: {problem}\n")
        response = await handler(request)
        # The pages are never framed (clickjacking) nor sniffed into another type; scripts
        # and styles come from this server only (nothing from a CDN).
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none';"
            " form-action 'self'; base-uri 'none'",
        )
        return response


__all__ = [
    "CSRF_HEADER",
    "TOKEN_COOKIE",
    "BindRefused",
    "Guard",
    "check_bind",
    "is_loopback",
    "new_token",
]
