"""The reviewer's page: a small server-rendered HTML view of the review queue (no front-end
build step, no JavaScript).

Routes (added by :func:`proxy.app.create_app`):

* ``GET /veracity/review[?status=open|resolved|all&after=ID]``: the reviews (oldest first, 50 a
  page) with their question, drafts, answer, checks and evidence, and a resolve form on
  each open one; without a session, the sign-in form (HTTP 401).
* ``GET /veracity/review/{id}``: one review.
* ``POST /veracity/review/login`` (form ``key``): checks that the key is a virtual key with
  ``admin: true``, then sets the session cookie and redirects (303) to the queue.
* ``POST /veracity/review/{id}`` (form ``verdict``, ``note``, ``csrf_token``): resolves, 303 back.
* ``POST /veracity/review/logout`` (form ``csrf_token``): clears the cookie.

Browser auth: the admin key itself, in a cookie ``veracity_review`` that is ``HttpOnly`` (no
script reads it), ``SameSite=Strict`` (never sent on a request another site starts),
``Path=/veracity/review``, ``Secure`` when the page is served over HTTPS
(``x-forwarded-proto`` honoured), 8 hours. It is checked like an ``Authorization`` header on
every request, so revoking the key in the config ends the session, and sessions work across
workers and replicas without server-side state. Every POST but sign-in also needs
``csrf_token`` = HMAC-SHA256(key, "veracity-review-csrf") (a token only a holder of the key can
compute: the double-submit pattern of the OWASP CSRF cheat sheet, with SameSite as the
first layer). All text is rendered by Jinja2 with autoescaping on (answers are hostile
content) and the page is served with a Content-Security-Policy that allows no script at all.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from proxy import review
from proxy.auth import Principal
from proxy.errors import GatewayError

__all__ = ["COOKIE", "csrf_token", "page", "detail", "login", "logout", "resolve"]

COOKIE = "veracity_review"
COOKIE_PATH = "/veracity/review"
SESSION_S = 8 * 3600
#: largest form body accepted (bytes): a key, a verdict and a note of :data:`review.MAX_NOTE` chars
MAX_FORM_BYTES = 64 * 1024
PAGE_SIZE = 50
_HEADERS = {
    # no script may run on this page, whatever an answer contains; forms post only here
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _pretty(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=True)


def _datetime(value: Any) -> str:
    try:
        return _dt.datetime.fromtimestamp(int(value), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                          autoescape=True, undefined=jinja2.ChainableUndefined)
_ENV.filters["pretty"] = _pretty
_ENV.filters["datetime"] = _datetime


def csrf_token(key: str) -> str:
    """The form token of a session holding ``key``: hex HMAC-SHA256(key, "veracity-review-csrf")."""
    return hmac.new(key.encode("utf-8", "surrogateescape"), b"veracity-review-csrf", hashlib.sha256).hexdigest()


def _render(http_status: int, /, **ctx: Any) -> HTMLResponse:
    html = _ENV.get_template("review.html").render(verdicts=review.VERDICTS, max_note=review.MAX_NOTE, **ctx)
    return HTMLResponse(html, http_status, headers=dict(_HEADERS))


def _session(state: Any, request: Request, rec: Any) -> tuple[Principal, str] | None:
    """The admin principal and key of the request's cookie, or None (no cookie, a key that is
    no longer configured, or not an admin key)."""
    key = request.cookies.get(COOKIE)
    if not key:
        return None
    try:
        principal = state.auth.authenticate("Bearer " + key)
    except GatewayError:
        return None
    if not principal.admin:
        return None
    rec.principal = principal
    return principal, key


async def _form(request: Request) -> dict[str, str]:
    """The ``application/x-www-form-urlencoded`` body as ``{name: first value}`` (stdlib
    ``parse_qs``, the WHATWG urlencoded format); 413 past :data:`MAX_FORM_BYTES`."""
    size, parts = 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise GatewayError(413, "Form body too large.", code="request_too_large")
        parts.append(chunk)
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith("application/x-www-form-urlencoded"):
        raise GatewayError(415, "Send the form as application/x-www-form-urlencoded.", code="invalid_request")
    parsed = parse_qs(b"".join(parts).decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


def _secure(request: Request) -> bool:
    proto = request.headers.get("x-forwarded-proto", request.url.scheme)
    return proto.split(",")[0].strip().lower() == "https"


def _status_arg(request: Request) -> str:
    s = request.query_params.get("status", "open")
    return s if s in ("open", "resolved", "all") else "open"


async def page(state: Any, request: Request, rec: Any) -> Response:
    """``GET /veracity/review``: the queue, or the sign-in form (401) without a session."""
    session = _session(state, request, rec)
    if session is None:
        return _render(401, login=True)
    principal, key = session
    status = _status_arg(request)
    after = request.query_params.get("after") or None
    store = review.store_for(state.cfg)
    try:
        reviews, has_more = await store.list(None if status == "all" else status, PAGE_SIZE, after)
    except review.ReviewNotFound:
        reviews, has_more = await store.list(None if status == "all" else status, PAGE_SIZE, None)
    done = request.query_params.get("resolved")
    message = f"Resolved {done}." if done and done.startswith("rev_") else None
    return _render(200, reviews=reviews, has_more=has_more, status=status, csrf=csrf_token(key),
                   reviewer=principal.key_name, message=message)


async def detail(state: Any, request: Request, rec: Any, review_id: str) -> Response:
    """``GET /veracity/review/{id}``: one review (404 page when unknown)."""
    session = _session(state, request, rec)
    if session is None:
        return _render(401, login=True)
    principal, key = session
    try:
        found = await review.store_for(state.cfg).get(review_id)
    except review.ReviewNotFound:
        return _render(404, reviews=[], status="all", csrf=csrf_token(key), reviewer=principal.key_name,
                       message=f"No review {review_id}.", error=True)
    return _render(200, reviews=[found], status="all", csrf=csrf_token(key), reviewer=principal.key_name)


async def login(state: Any, request: Request, rec: Any) -> Response:
    """``POST /veracity/review/login``: set the session cookie for an admin key."""
    try:
        key = (await _form(request)).get("key", "").strip()
    except GatewayError as exc:
        return _render(exc.status, login=True, message=exc.message)
    try:
        principal = state.auth.authenticate("Bearer " + key) if key else None
    except GatewayError:
        principal = None
    if principal is None or principal.key_name is None:  # a wrong key, or pass-through auth (no keys)
        return _render(401, login=True, message="Unknown key.")
    rec.principal = principal
    if not principal.admin:
        return _render(403, login=True, message="This key is not an admin key (keys[].admin: true).")
    resp = RedirectResponse("/veracity/review", 303, headers=dict(_HEADERS))
    resp.set_cookie(COOKIE, key, max_age=SESSION_S, path=COOKIE_PATH, secure=_secure(request),
                    httponly=True, samesite="strict")
    return resp


async def _checked_form(state: Any, request: Request, rec: Any) -> tuple[Principal, dict[str, str]] | Response:
    """The session and its form for a POST, or the page to answer with (sign-in, 403 on a
    missing or wrong CSRF token)."""
    session = _session(state, request, rec)
    if session is None:
        return _render(401, login=True)
    principal, key = session
    try:
        form = await _form(request)
    except GatewayError as exc:
        return _render(exc.status, reviews=[], status="open", csrf=csrf_token(key), message=exc.message, error=True)
    if not hmac.compare_digest(form.get("csrf_token", ""), csrf_token(key)):
        return _render(403, reviews=[], status="open", csrf=csrf_token(key), reviewer=principal.key_name,
                       message="The form token is missing or wrong: reload the page and try again.", error=True)
    return principal, form


async def logout(state: Any, request: Request, rec: Any) -> Response:
    """``POST /veracity/review/logout``: clear the cookie."""
    checked = await _checked_form(state, request, rec)
    if isinstance(checked, Response):
        return checked
    resp = RedirectResponse("/veracity/review", 303, headers=dict(_HEADERS))
    resp.delete_cookie(COOKIE, path=COOKIE_PATH, secure=_secure(request), httponly=True, samesite="strict")
    return resp


async def resolve(state: Any, request: Request, rec: Any, review_id: str) -> Response:
    """``POST /veracity/review/{id}``: resolve with the form's verdict and note, then 303 to the queue."""
    checked = await _checked_form(state, request, rec)
    if isinstance(checked, Response):
        return checked
    principal, form = checked
    key = request.cookies.get(COOKIE, "")
    try:
        await review.store_for(state.cfg).resolve(review_id, form.get("verdict", ""), form.get("note"),
                                                   principal.key_name)
    except review.ReviewNotFound:
        msg, status = f"No review {review_id}.", 404
    except review.ReviewConflict:
        msg, status = f"Review {review_id} was already resolved.", 409
    except ValueError as exc:
        msg, status = str(exc), 400
    else:
        return RedirectResponse(f"/veracity/review?resolved={review_id}", 303, headers=dict(_HEADERS))
    return _render(status, reviews=[], status="open", csrf=csrf_token(key), reviewer=principal.key_name,
                   message=msg, error=True)
