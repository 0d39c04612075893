"""Who may talk to the workbench, and what the browser may do with its pages.

- Bound to a loopback address by default; any other --host needs --token, and then every request carries it
  (?token=T once, which sets an HttpOnly cookie and redirects to the same page without it).
- Without a token, the Host header must name a loopback address, so a web page that rebinds its DNS name to
  127.0.0.1 cannot read the workbench or post to it.
- Every form carries a per-process CSRF token; a POST without it, or from another origin, is refused.
- Every response forbids scripts, frames and plugins (Content-Security-Policy), so even a templating mistake could
  not run agent text as code; templates escape agent text in the first place.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from urllib.parse import urlencode, urlsplit

from flask import Flask, Response, abort, redirect, request

COOKIE = "benchmark_view_token"
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
PAGE_CSP = ("default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; form-action 'self'; "
            "frame-ancestors 'none'; base-uri 'none'")
FILE_CSP = "default-src 'none'; sandbox"


def is_loopback(host: str) -> bool:
    h = host.strip("[]")
    if h in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _same(a: str | None, b: str) -> bool:
    return bool(a) and hmac.compare_digest(a.encode(), b.encode())


def install(app: Flask, token: str | None, bind_host: str) -> str:
    """Install the request checks and response headers; returns the CSRF token the forms carry."""
    csrf = secrets.token_urlsafe(32)
    # cookies ignore ports: one name per token, so two workbenches on one host do not overwrite each other's cookie
    cookie = f"{COOKIE}_{hashlib.sha256(token.encode()).hexdigest()[:12]}" if token else COOKIE

    @app.before_request
    def _gate():
        host = urlsplit(f"//{request.host}").hostname or ""
        if token is None and not (is_loopback(host) or host == bind_host.strip("[]")):
            abort(Response(f"refused: Host '{request.host}' is not this workbench's address; open it at "
                           "http://127.0.0.1:PORT/ (a non-local --host needs --token)", 421, mimetype="text/plain"))
        if token is not None:
            given = request.args.get("token")
            if _same(given, token):
                if request.method == "GET":  # keep the token out of history and Referer: cookie, then a clean URL
                    qs = urlencode([(k, v) for k, v in request.args.items(multi=True) if k != "token"])
                    resp = redirect(request.path + (f"?{qs}" if qs else ""), code=303)
                    resp.set_cookie(cookie, token, httponly=True, samesite="Strict")
                    return resp
            elif not _same(request.cookies.get(cookie), token):
                abort(Response("refused: this workbench needs its access token; open the URL that `python -m benchmark "
                               "view` printed (it ends in ?token=...)", 403, mimetype="text/plain"))
        if request.method == "POST":
            origin = request.headers.get("Origin")
            if origin and origin != "null" and urlsplit(origin).netloc != request.host:
                abort(Response(f"refused: a form posted from another site ({origin})", 403, mimetype="text/plain"))
            if not _same(request.form.get("csrf"), csrf):
                abort(Response("refused: the form has no valid CSRF token (the workbench was restarted since the page "
                               "was loaded); reload the page and submit again", 403, mimetype="text/plain"))

    @app.after_request
    def _headers(resp: Response) -> Response:
        resp.headers.setdefault("Content-Security-Policy", PAGE_CSP)
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers.setdefault("Cache-Control", "no-store")
        return resp

    return csrf
