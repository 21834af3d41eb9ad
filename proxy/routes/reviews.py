"""Human review: ``/v1/veracity/reviews`` (the JSON API) and the reviewer's page
``/veracity/review`` (:mod:`proxy.routes.review_page`, beside this module).

Answers the gateway could not verify go to the review queue (:mod:`proxy.stores.review`); a
reviewer lists them, reads one and resolves it with a verdict. Every route needs an admin key
(``admin: true`` in the gateway config): 401 ``invalid_api_key`` without a key, 403
``admin_required`` for another key. A store that cannot be reached is 503
``review_store_unavailable``. The page's handlers take ``(state, request, record[, review_id])``
and are bound to the route table by :func:`page_endpoint`.

* ``GET /v1/veracity/reviews?status=open|resolved|all&limit=1..100&after=ID`` (:func:`list_reviews`)
* ``GET /v1/veracity/reviews/{id}`` (:func:`get_review`)
* ``POST /v1/veracity/reviews/{id}`` with ``{"verdict", "note"}`` (:func:`resolve_review`)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from proxy._asgi.body import parse_json_object, receive_body
from proxy.auth import Principal
from proxy.routes._access import credential
from proxy.routes._respond import JSON, RequestRecord, error_response, log, record
from proxy.stores import review
from proxy.wire.json import dumps
from proxy.wire.errors import GatewayError

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["REVIEWS_ROUTE", "REVIEW_ROUTE", "REVIEW_PAGE_ROUTE", "list_reviews", "get_review", "resolve_review",
           "page_endpoint"]

REVIEWS_ROUTE = "/v1/veracity/reviews"
REVIEW_ROUTE = "/v1/veracity/reviews/{review_id}"
REVIEW_PAGE_ROUTE = "/veracity/review"


def _admin(state: Gateway, headers: Any) -> Principal:
    """The caller of a review route: 401 ``invalid_api_key`` without a (valid) key, 403
    ``admin_required`` for a key without ``admin: true`` (and in pass-through auth, where no
    key is an admin)."""
    cred = credential(headers)
    if not cred:
        raise GatewayError(401, "Missing API key: the review routes need an admin key "
                           "('Authorization: Bearer <key>' of a key with `admin: true`).", code="invalid_api_key")
    principal = state.auth.authenticate(cred)
    if not principal.admin:
        raise GatewayError(403, "This key may not use the review routes: they need a virtual key with "
                           "`admin: true` in the gateway config.", type="permission_error", code="admin_required")
    return principal


def _review_not_found(review_id: str, param: str | None = None) -> GatewayError:
    return GatewayError(404, f"No review with id {review_id[:100]!r}.", code="review_not_found", param=param)


async def _review_call(rec: RequestRecord, work: Any) -> Response:
    """Run a review route's ``work()`` (-> JSON-ready dict), mapping failures to OpenAI-shaped
    errors: the store unreachable is 503 ``review_store_unavailable``."""
    try:
        return Response(dumps(await work()), 200, headers={"x-request-id": rec.rid}, media_type=JSON)
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return error_response(exc, rec.rid)
    except Exception as exc:  # noqa: BLE001 - the store (SQLite file, Redis) failed
        rec.fields["error_code"] = "review_store_unavailable"
        log.error("review_store_error", request_id=rec.rid, error=type(exc).__name__, message=str(exc)[:300])
        return error_response(GatewayError(503, "The review store is unavailable; see the gateway's logs.",
                                           type="server_error", code="review_store_unavailable"), rec.rid)


async def list_reviews(request: Request) -> Response:
    """``GET /v1/veracity/reviews?status=open|resolved|all&limit=1..100&after=ID``: reviews
    oldest first, as OpenAI lists (``{"object": "list", "data", "first_id", "last_id",
    "has_more"}``; the next page: ``after=last_id``) plus ``total`` (how many reviews have that
    status, all pages). Admin key only."""
    state: Gateway = request.app.state.gw
    rec = record(request, REVIEWS_ROUTE)

    async def work() -> dict[str, Any]:
        rec.principal = _admin(state, request.headers)
        q = request.query_params
        status = q.get("status", "open")
        if status not in ("open", "resolved", "all"):
            raise GatewayError(400, "status must be one of open, resolved, all.", code="invalid_request", param="status")
        try:
            limit = int(q.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            raise GatewayError(400, "limit must be an integer from 1 to 100.", code="invalid_request", param="limit")
        after = q.get("after") or None
        try:
            data, more = await state.review.list(None if status == "all" else status, limit, after)
        except review.ReviewNotFound:
            raise _review_not_found(after or "", "after") from None
        total = await state.review.count(None if status == "all" else status)
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": more, "total": total}

    return await _review_call(rec, work)


async def get_review(request: Request) -> Response:
    """``GET /v1/veracity/reviews/{id}``: one review (404 ``review_not_found``). Admin key only."""
    state: Gateway = request.app.state.gw
    rec = record(request, REVIEW_ROUTE)
    review_id = request.path_params["review_id"]

    async def work() -> dict[str, Any]:
        rec.principal = _admin(state, request.headers)
        try:
            return await state.review.get(review_id)
        except review.ReviewNotFound:
            raise _review_not_found(review_id) from None

    return await _review_call(rec, work)


async def resolve_review(request: Request) -> Response:
    """``POST /v1/veracity/reviews/{id}`` with ``{"verdict": correct|incorrect|partially_correct|
    cannot_tell, "note": "..."}``: resolve (the reviewer is the admin key's name); 400
    ``invalid_value`` (param ``verdict``/``note``), 404 ``review_not_found``, 409
    ``review_already_resolved``. Admin key only."""
    state: Gateway = request.app.state.gw
    rec = record(request, REVIEW_ROUTE)
    review_id = request.path_params["review_id"]

    async def work() -> dict[str, Any]:
        principal = rec.principal = _admin(state, request.headers)
        body = parse_json_object(await receive_body(request.receive, request.headers, state.max_body),
                                 request.headers.get("content-encoding"))
        verdict, note = body.get("verdict"), body.get("note")
        if verdict not in review.VERDICTS:
            raise GatewayError(400, f"verdict must be one of {', '.join(review.VERDICTS)}.", code="invalid_request",
                               param="verdict")
        if note is not None and (not isinstance(note, str) or len(note) > review.MAX_NOTE):
            raise GatewayError(400, f"note must be a string of at most {review.MAX_NOTE} characters.",
                               code="invalid_request", param="note")
        try:
            return await state.review.resolve(review_id, verdict, note, principal.key_name)
        except review.ReviewNotFound:
            raise _review_not_found(review_id) from None
        except review.ReviewConflict:
            raise GatewayError(409, f"Review {review_id!r} is already resolved.",
                               code="review_already_resolved") from None

    return await _review_call(rec, work)


def page_endpoint(handler: Any) -> Any:
    """A :mod:`proxy.routes.review_page` handler as a Starlette endpoint (route label
    :data:`REVIEW_PAGE_ROUTE`; the path's ``review_id``, when there is one, as its last argument)."""
    async def endpoint(request: Request) -> Response:
        rec = record(request, REVIEW_PAGE_ROUTE)
        args = [request.path_params["review_id"]] if "review_id" in request.path_params else []
        return await handler(request.app.state.gw, request, rec, *args)
    return endpoint
