"""The reviewer's page: a small server-rendered HTML view of the review queue (no front-end
build step, no JavaScript).

Routes (added by :func:`proxy.app.create_app`):

* ``GET /veracity/review[?status=open|resolved|all&after=ID]``: the reviews (oldest first, 50 a
  page; the title and the header give the true number, e.g. "141 open", and "reviews 51-100")
  with their question, drafts, answer (or "Blocked (422)" when the client got an error instead
  of it), how many answers had the same failure (one review per group, see
  :func:`proxy.stores.review.fingerprint`), checks and evidence, and a resolve form on each open one
  whose verdict the reviewer must choose (none is preselected); without a session, the sign-in
  form (HTTP 401).
* ``GET /veracity/review/{id}``: one review.
* ``POST /veracity/review/login`` (form ``key``): checks that the key is a virtual key with
  ``admin: true``, then opens a session and redirects (303) to the queue.
* ``POST /veracity/review/{id}`` (form ``verdict``, ``note``, ``csrf_token``): resolves, 303 back.
* ``POST /veracity/review/logout`` (form ``csrf_token``): ends the session.

Browser auth: a server-side session. Sign-in stores ``{key digest, key name, csrf token}``
under the SHA-256 of a random 256-bit session id (``secrets.token_urlsafe(32)``) in the review
store (SQLite or Redis, :meth:`proxy.stores.review.ReviewStore.session_put`) for 8 hours; the browser
gets only the session id, in a cookie ``veracity_review`` that is ``HttpOnly`` (no script reads
it), ``SameSite=Strict`` (never sent on a request another site starts),
``Path=/veracity/review``, ``Secure`` when the page is served over HTTPS
(``x-forwarded-proto`` honoured) -- never the admin key (OWASP Session Management cheat sheet).
Every request re-checks that the session's key is still a configured admin key
(:meth:`proxy.auth.Authenticator.by_digest`), so revoking the key ends its sessions; sessions
are shared by workers and replicas through the store; sign-out deletes the session. Every POST
but sign-in also needs the session's random ``csrf_token`` (the synchronizer token pattern of
the OWASP CSRF cheat sheet, with SameSite as the first layer).

Scripts and tools may skip the cookie: every route also accepts ``Authorization: Bearer
<admin key>`` (as the ``/v1/veracity/reviews`` API does); such a request needs no CSRF token,
since a cross-site form cannot set that header. All text is rendered by Jinja2 with
autoescaping on (answers are hostile content) and the page is served with a
Content-Security-Policy that allows no script at all.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from proxy.stores import review
from proxy.auth import Principal, client_authorization
from proxy.wire.errors import GatewayError

__all__ = ["COOKIE", "Session", "page", "detail", "login", "logout", "resolve"]

COOKIE = "veracity_review"
COOKIE_PATH = "/veracity/review"
SESSION_S = review.SESSION_TTL_S
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


_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).resolve().parents[1] / "templates"),
                          autoescape=True, undefined=jinja2.ChainableUndefined)
_ENV.filters["pretty"] = _pretty
_ENV.filters["datetime"] = _datetime


@dataclass(frozen=True)
class Session:
    """Who is using the page: the admin ``principal``; ``csrf``: the session's form token
    (None for a request authenticated by its ``Authorization`` header, which needs none);
    ``sid_hash``: SHA-256 hex of the session id (None for a header)."""

    principal: Principal
    csrf: str | None
    sid_hash: str | None


def _sid_hash(sid: str) -> str:
    return hashlib.sha256(sid.encode("utf-8", "surrogateescape")).hexdigest()


def _render(http_status: int, /, **ctx: Any) -> HTMLResponse:
    html = _ENV.get_template("review.html").render(verdicts=review.VERDICTS, max_note=review.MAX_NOTE, **ctx)
    return HTMLResponse(html, http_status, headers=dict(_HEADERS))


def _who(session: Session) -> dict[str, Any]:
    """Template fields of the signed-in reviewer."""
    return {"csrf": session.csrf or "", "reviewer": session.principal.key_name,
            "cookie_session": session.sid_hash is not None}


async def _session(state: Any, request: Request, rec: Any) -> Session | None:
    """The request's admin session, or None: an ``Authorization`` (or ``api-key``) header
    with an admin key, else the cookie's server-side session whose key is still a configured
    admin key. None for no credential, an unknown or expired session, a key that is no
    longer configured, or a key without ``admin: true``."""
    header = client_authorization(request.headers.get("authorization"), request.headers.get("api-key"))
    if header:
        try:
            principal = state.auth.authenticate(header)
        except GatewayError:
            return None
        if not principal.admin:
            return None
        rec.principal = principal
        return Session(principal, None, None)
    sid = request.cookies.get(COOKIE)
    if not sid or len(sid) > 200:
        return None
    sid_hash = _sid_hash(sid)
    data = await state.review.session_get(sid_hash)
    if not data:
        return None
    try:
        principal = state.auth.by_digest(bytes.fromhex(str(data.get("key_sha256", ""))))
    except ValueError:
        principal = None
    if principal is None or not principal.admin:
        return None
    rec.principal = principal
    return Session(principal, str(data.get("csrf", "")), sid_hash)


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


def _store_down(exc: Exception) -> HTMLResponse:
    """The page when the review store (SQLite file, Redis) failed."""
    review.log.error("review_store_error", error=type(exc).__name__, message=str(exc)[:300])
    return _render(503, login=False, reviews=[], status="open", error=True,
                   message="The review store is unavailable; see the gateway's logs.")


def _guarded(handler: Any) -> Any:
    """``handler`` answering a 503 page when the store raises (not a crash)."""
    async def run(state: Any, request: Request, rec: Any, *args: Any) -> Response:
        try:
            return await handler(state, request, rec, *args)
        except Exception as exc:  # noqa: BLE001 - SQLite or Redis failed
            return _store_down(exc)
    run.__doc__, run.__name__ = handler.__doc__, handler.__name__
    return run


@_guarded
async def page(state: Any, request: Request, rec: Any) -> Response:
    """``GET /veracity/review``: the queue, or the sign-in form (401) without a session. The
    title and header give the true count of the status shown (not the page's length); pages
    follow ``after`` (the last id of the previous page), ``start`` (1-based position of the
    page's first review, for the "reviews 51-100 of 141" line)."""
    session = await _session(state, request, rec)
    if session is None:
        return _render(401, login=True)
    status = _status_arg(request)
    after = request.query_params.get("after") or None
    try:
        start = max(1, int(request.query_params.get("start", "1")))
    except ValueError:
        start = 1
    store = state.review
    wanted = None if status == "all" else status
    try:
        reviews, has_more = await store.list(wanted, PAGE_SIZE, after)
    except review.ReviewNotFound:
        (reviews, has_more), after, start = await store.list(wanted, PAGE_SIZE, None), None, 1
    if after is None:
        start = 1
    total = await store.count(wanted)
    done = request.query_params.get("resolved")
    message = f"Resolved {done}." if done and done.startswith("rev_") else None
    return _render(200, reviews=reviews, has_more=has_more, status=status, total=total, start=start,
                   paged=after is not None, message=message, **_who(session))


@_guarded
async def detail(state: Any, request: Request, rec: Any, review_id: str) -> Response:
    """``GET /veracity/review/{id}``: one review (404 page when unknown)."""
    session = await _session(state, request, rec)
    if session is None:
        return _render(401, login=True)
    try:
        found = await state.review.get(review_id)
    except review.ReviewNotFound:
        return _render(404, reviews=[], status="all", message=f"No review {review_id}.", error=True, **_who(session))
    return _render(200, reviews=[found], status="all", single=True, **_who(session))


@_guarded
async def login(state: Any, request: Request, rec: Any) -> Response:
    """``POST /veracity/review/login``: open a server-side session for an admin key (see the
    module doc) and set its random id as the cookie."""
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
    sid = secrets.token_urlsafe(32)
    await state.review.session_put(_sid_hash(sid), {
        "key_sha256": hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest(),
        "key_name": principal.key_name, "csrf": secrets.token_hex(32), "created": int(time.time())}, SESSION_S)
    resp = RedirectResponse("/veracity/review", 303, headers=dict(_HEADERS))
    resp.set_cookie(COOKIE, sid, max_age=SESSION_S, path=COOKIE_PATH, secure=_secure(request),
                    httponly=True, samesite="strict")
    return resp


async def _checked_form(state: Any, request: Request, rec: Any) -> tuple[Session, dict[str, str]] | Response:
    """The session and its form for a POST, or the page to answer with (sign-in, 403 on a
    missing or wrong CSRF token; a request signed by its ``Authorization`` header needs none)."""
    session = await _session(state, request, rec)
    if session is None:
        return _render(401, login=True)
    try:
        form = await _form(request)
    except GatewayError as exc:
        return _render(exc.status, reviews=[], status="open", message=exc.message, error=True, **_who(session))
    if session.csrf is not None and not (session.csrf and hmac.compare_digest(form.get("csrf_token", ""),
                                                                             session.csrf)):
        return _render(403, reviews=[], status="open", error=True, **_who(session),
                       message="The form token is missing or wrong: reload the page and try again.")
    return session, form


@_guarded
async def logout(state: Any, request: Request, rec: Any) -> Response:
    """``POST /veracity/review/logout``: delete the session and clear the cookie."""
    checked = await _checked_form(state, request, rec)
    if isinstance(checked, Response):
        return checked
    session, _ = checked
    if session.sid_hash is not None:
        await state.review.session_delete(session.sid_hash)
    resp = RedirectResponse("/veracity/review", 303, headers=dict(_HEADERS))
    resp.delete_cookie(COOKIE, path=COOKIE_PATH, secure=_secure(request), httponly=True, samesite="strict")
    return resp


@_guarded
async def resolve(state: Any, request: Request, rec: Any, review_id: str) -> Response:
    """``POST /veracity/review/{id}``: resolve with the form's verdict and note, then 303 to the queue."""
    checked = await _checked_form(state, request, rec)
    if isinstance(checked, Response):
        return checked
    session, form = checked
    try:
        await state.review.resolve(review_id, form.get("verdict", ""), form.get("note"),
                                                   session.principal.key_name)
    except review.ReviewNotFound:
        msg, status = f"No review {review_id}.", 404
    except review.ReviewConflict:
        msg, status = f"Review {review_id} was already resolved.", 409
    except ValueError as exc:
        msg, status = str(exc), 400
    else:
        return RedirectResponse(f"/veracity/review?resolved={review_id}", 303, headers=dict(_HEADERS))
    return _render(status, reviews=[], status="open", message=msg, error=True, **_who(session))
