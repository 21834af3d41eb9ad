"""The fast path: the ASGI app the server runs, and the lean lane of chat completions.

All the per-request ASGI work of the common request is here, in one module:

* :class:`FastPath`, in front of the FastAPI app. ``POST /v1/chat/completions`` (and the paths
  served as it: :data:`CHAT_PATHS`, Azure-shaped chat paths) goes straight to the chat
  handler, skipping the FastAPI/Starlette middleware and routing layers: the handler catches
  every exception itself and writes its own log line. Everything else goes to the FastAPI app,
  path-mapped first where needed (Azure's ``/openai/...`` paths, :mod:`proxy.wire.azure`; bare
  ``/models`` etc., :data:`BARE_PREFIXES`), and gets its one log line and
  ``veracity_requests_total`` count here from the :class:`~proxy.routes._respond.RequestRecord`
  its handler fills in (probes and scrapes, :data:`proxy.routes.health.UNLOGGED_PATHS`, get
  neither).
* :class:`LeanLane`: when the caller's policy verifies nothing
  (:func:`proxy.pipeline.sequence.forwards_only`), the whole pipeline reduces to one upstream
  call plus the ``skipped`` report, done straight from ASGI with authentication, routing and
  the policy's verdict cached. It answers through the same helpers as the normal path
  (:mod:`proxy.routes._respond`: header list, error mapping, log line), so a client cannot
  tell the lanes apart (tests/test_gateway_lean.py, tests/test_gateway_lanes.py); every other
  request goes to the normal path (:func:`proxy.routes.chat.chat_asgi`) with the body already
  read handed over.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from proxy._asgi.body import MAX_JSON_DEPTH, replay, scope_headers
from proxy._asgi.disconnect import DisconnectWatch
from proxy._asgi.request_ids import RID_RE, request_id, request_ids
from proxy.auth import Principal, client_authorization_bytes
from proxy.observability import metrics
from proxy.pipeline import sequence as pipeline
from proxy.routes._access import route_model
from proxy.routes._respond import RECORD_KEY, Reply, RequestRecord, answer_headers, failure_reply, finish
from proxy.routes.chat import CHAT_ROUTE, chat_asgi
from proxy.routes.health import UNLOGGED_PATHS
from proxy.routes.passthrough import UpstreamBodyError
from proxy.stores import reports
from proxy.upstreams import HttpUpstream, Timing, is_http_upstream
from proxy.wire.json import dumps, loads_strict
from proxy.wire import azure
from proxy.wire.errors import GatewayError

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["FastPath", "LeanLane", "CHAT_PATHS", "BARE_PREFIXES"]

#: the lean lane's cached verdict on a policy: (policy, forwards only?, its ``skipped`` report dict,
#: that report's ``x-veracity-summary`` (Latin-1 bytes), the same report as a :class:`~proxy.stores.reports.FixedReport`)
PolicyHit = tuple[Any, bool, dict[str, Any], bytes, reports.FixedReport]

#: paths served as chat completions: clients configured with the bare host as ``base_url``
#: post to ``/chat/completions`` (a 404 before; as LiteLLM, serve both), some add a slash
CHAT_PATHS = frozenset({CHAT_ROUTE, CHAT_ROUTE + "/", "/chat/completions", "/chat/completions/"})
#: OpenAI API paths also served without the ``/v1`` prefix, for clients whose ``base_url`` is the
#: bare host (LiteLLM's proxy serves both forms): chat completions and the model list, with
#: their sub-paths (``/models/{model}``, stored completions). ``POST /chat/completions`` is
#: in :data:`CHAT_PATHS`; the rest is served as the ``/v1`` path.
BARE_PREFIXES = ("/chat/completions", "/models")


class FastPath:
    """ASGI wrapper: ``POST /v1/chat/completions`` goes straight to the handler, skipping the
    FastAPI/Starlette middleware and routing layers (the handler catches every exception
    itself); everything else goes to the FastAPI app. Azure-shaped paths (``/openai/...``,
    :mod:`proxy.wire.azure`) are served as the ``/v1`` path they map to: chat by the same handler
    (and lean lane), the rest by the FastAPI app with the path rewritten. Attribute access falls through to the
    FastAPI app (``.state``, ``.router``, ...)."""

    def __init__(self, app: FastAPI, state: Gateway) -> None:
        self.app = app
        self.state = state
        self.sweeper = state.sweeper
        self.lean = LeanLane(state)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one ASGI connection scope: chat straight to the handler, the rest (path-mapped
        where needed) to the FastAPI app, logged unless a probe or scrape."""
        if scope["type"] == "http" and scope["path"] in CHAT_PATHS and scope["method"] == "POST":
            await self._chat(scope, receive, send, None)
            return
        if scope["type"] == "http" and scope["path"].startswith(azure.PREFIX):
            mapped = azure.parse(scope.get("raw_path") or scope["path"].encode("utf-8"))
            if mapped is not None:
                if mapped.is_chat and scope["method"] == "POST":
                    await self._chat(scope, receive, send, mapped.deployment)
                    return
                # any other Azure-shaped request: the /v1 route it maps to
                scope = {**scope, "path": mapped.path, "raw_path": mapped.raw_path,
                         "query_string": azure.without_api_version(scope.get("query_string", b"")),
                         azure.SCOPE_KEY: mapped.deployment}
        elif scope["type"] == "http" and scope["path"].startswith(BARE_PREFIXES):
            path = scope["path"]
            if any(path == p or path.startswith(p + "/") for p in BARE_PREFIXES):  # served as /v1 + path
                scope = {**scope, "path": "/v1" + path,
                         "raw_path": b"/v1" + (scope.get("raw_path") or path.encode("utf-8"))}
        if scope["type"] != "http" or scope["path"] in UNLOGGED_PATHS:
            await self._app(scope, receive, send)
            return
        await self._logged(scope, receive, send)

    async def _chat(self, scope: dict[str, Any], receive: Any, send: Any, deployment: str | None) -> None:
        """A chat completion: the lean lane when enabled (it hands what it does not take to
        the normal path), else the normal path; ``deployment``: see :func:`proxy.routes.chat.chat_asgi`."""
        if self.lean.enabled:
            await self.lean(scope, receive, send, deployment)
        else:
            await chat_asgi(self.state, scope, receive, send, None, deployment)

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The FastAPI app; a pass-through body that failed after its status line
        (:class:`~proxy.routes.passthrough.UpstreamBodyError`) ends the response incomplete."""
        try:
            await self.app(scope, receive, send)
        except UpstreamBodyError:
            # a pass-through body failed after its status line: returning with the response
            # incomplete makes the server close the client connection
            return

    async def _logged(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve a request through the FastAPI app, then count it and write its one log line
        from the :class:`~proxy.routes._respond.RequestRecord` its handler filled in; the status
        is the one sent (499: the client left before any, 500: nothing was sent)."""
        rec = RequestRecord(request_id(scope_headers(scope)))
        scope = {**scope, RECORD_KEY: rec}
        status = 0

        async def send_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        metrics.request_started()
        try:
            await self._app(scope, receive, send_status)
        except asyncio.CancelledError:
            rec.fields["client_disconnected"] = True
            raise
        finally:
            if not status:
                status = 499 if rec.fields.get("client_disconnected") else 500
            finish(self.state, route=rec.route, model=rec.model, status=status, timing=rec.timing, rid=rec.rid,
                   principal=rec.principal, upstream=rec.upstream, stream=rec.stream,
                   veracity_status=rec.veracity_status, fields=rec.fields, model_label=rec.model_label)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


class LeanLane:
    """The lean lane of ``POST /v1/chat/completions``: the common request whose answer nobody
    needs to look at, served with the least Python work, and the same client-visible result as
    the normal path (:func:`proxy.routes.chat.chat_asgi`: same body bytes, headers in the same
    order, ``veracity`` report, metrics and log line, upstream errors included).

    Taken when all of these hold (else the request goes to the normal path, with the body
    already read handed over): no repeated request header, no ``content-encoding`` or
    ``x-veracity-policy`` header, a ``content-length`` within ``limits.max_body_bytes`` and
    the whole body in one ASGI message; the body a JSON object (shallower than
    :data:`~proxy._asgi.body.MAX_JSON_DEPTH`) with a non-empty string ``model``, ``stream``
    absent/null/false and no ``veracity`` object; no ``openai-organization`` or
    ``openai-project`` header; the caller authenticated and the model routed to an
    OpenAI-compatible upstream (cached per ``(credential, model)``: the ``Authorization``
    header, else the ``api-key`` one, :func:`proxy.auth.client_authorization`); the key's
    policy :func:`proxy.pipeline.sequence.forwards_only` (decided once per policy object;
    policies are still looked up per request, so an edited policy file takes effect as
    before); and ``logging.log_content`` off. Then: one upstream call
    (:meth:`OpenAIUpstream.complete`), the ``skipped`` report added, the reply sent as two
    ASGI messages; an upstream error is answered as the normal path answers it. Streams,
    litellm upstreams, verification: all on the normal path. An Azure deployment chat path is
    taken on the same terms, its deployment replacing the body's ``model`` before the checks
    above (as the normal path does).
    """

    #: most cached ``(Authorization, model)`` routes and policies (a bound, not a working-set size)
    MAX_CACHED = 4096

    def __init__(self, state: Gateway) -> None:
        self.state = state
        self.enabled = not state.log_content
        #: (credential bytes or None, model) -> (principal, upstream, the principal's report owner)
        self._routes: dict[tuple[bytes | None, str], tuple[Principal, HttpUpstream, str]] = {}
        #: id(policy) -> its PolicyHit
        self._policies: dict[int, PolicyHit] = {}

    def _route(self, auth: bytes | None, model: str) -> tuple[Principal, HttpUpstream, str] | None:
        """Authenticate + route once per ``(auth, model)``; None: not for this lane (an error
        the normal path reports, or a non-OpenAI upstream). Only successes are cached."""
        key = (auth, model)
        hit = self._routes.get(key)
        if hit is not None:
            return hit
        state = self.state
        if state.upstreams is None:
            return None
        try:
            principal = state.auth.authenticate(auth.decode("latin-1") if auth is not None else None)
            up = route_model(state, principal, model)
        except GatewayError:
            return None
        if not is_http_upstream(up):
            return None
        hit = (principal, up, reports.owner_of(principal))
        if len(self._routes) < self.MAX_CACHED:
            self._routes[key] = hit
        return hit

    def _policy(self, principal: Principal) -> PolicyHit | None:
        """The key's policy (looked up per request: files reload on change) with its cached
        lane verdict; None when it cannot be resolved (the normal path reports why)."""
        try:
            policy = self.state.runtime.policies.get(principal.policy)
        except Exception:  # noqa: BLE001 - misconfiguration / missing policy: the normal path's error
            return None
        hit = self._policies.get(id(policy))
        if hit is None or hit[0] is not policy:
            lean = pipeline.forwards_only(policy)
            report = pipeline.checks_off_report(policy).to_dict() if lean else {}
            hit = (policy, lean, report, reports.summary_header(report).encode("latin-1") if lean else b"",
                   reports.FixedReport(report))
            if len(self._policies) >= self.MAX_CACHED:
                self._policies.clear()
            self._policies[id(policy)] = hit
        return hit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any, deployment: str | None = None) -> None:
        """Serve one request (``deployment``: an Azure-shaped path's deployment, which
        replaces the body's ``model`` as on the normal path)."""
        timing = Timing()
        state = self.state
        raw_headers = scope["headers"]
        h = dict(raw_headers)
        cl = h.get(b"content-length")
        names = b"".join(h)
        if (len(h) != len(raw_headers) or cl is None or b"content-encoding" in h
                or b"x-veracity-policy" in h or names != names.lower()):
            return await self._normal(scope, receive, send, None, deployment)
        try:
            n = int(cl)
        except ValueError:
            n = -1
        if not 0 <= n <= state.max_body:
            return await self._normal(scope, receive, send, None, deployment)
        msg = await receive()
        raw = msg.get("body", b"")
        if msg["type"] != "http.request" or msg.get("more_body", False) or len(raw) > state.max_body:
            return await self._normal(scope, replay(msg, receive), send, None, deployment)
        try:
            body = loads_strict(raw)
        except ValueError:
            return await self._normal(scope, receive, send, raw, deployment)
        if type(body) is not dict or "veracity" in body:
            return await self._normal(scope, receive, send, raw, deployment)
        if deployment is not None:
            body["model"] = deployment
        model = body.get("model")
        stream = body.get("stream")
        if (type(model) is not str or not model or (stream is not None and stream is not False)
                or raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH):
            return await self._normal(scope, receive, send, raw, deployment)
        if b"openai-organization" in h or b"openai-project" in h:  # tenant headers: the normal path sends them
            return await self._normal(scope, receive, send, raw, deployment)
        routed = self._route(client_authorization_bytes(h.get(b"authorization"), h.get(b"api-key")), model)
        if routed is None:
            return await self._normal(scope, receive, send, raw, deployment)
        principal, up, owner = routed
        pol = self._policy(principal)
        if pol is None or not pol[1]:
            return await self._normal(scope, receive, send, raw, deployment)
        rid_b = h.get(b"x-request-id")
        rid = rid_b.decode("latin-1") if rid_b else ""
        if not (rid and RID_RE.match(rid)):
            rid = request_ids.next()
        watch = DisconnectWatch(receive, None, state.sweeper)  # type: ignore[arg-type]
        watch.arm()
        with watch:
            await self._forward(watch, send, timing, body, model, principal, up, pol, rid, owner)

    async def _forward(self, watch: DisconnectWatch, send: Any, timing: Timing, body: dict[str, Any],
                       model: str, principal: Principal, up: HttpUpstream, pol: PolicyHit,
                       rid: str, owner: str) -> None:
        """The lane's work once taken: what the normal path + :func:`proxy.pipeline.sequence.chat_completion`
        do for a checks-off policy, answered and logged through the shared helpers
        (:func:`~proxy.routes._respond.answer_headers`, :func:`~proxy.routes._respond.failure_reply`,
        :func:`~proxy.routes._respond.finish`), then the two ASGI messages."""
        state = self.state
        metrics.request_started()
        fields: dict[str, Any] = {"policy": pol[0].name}
        status = 500
        vstatus: str | None = None
        reply: Reply | None = None
        try:
            out, relayed = await up.complete(body, auth=principal.upstream_auth, timing=timing)
            fields["veracity_checks"] = 0
            out["veracity"] = pol[2]  # the report dict: serialised at once, never mutated
            payload = dumps(out)
            status, vstatus = 200, "skipped"
            store = state.reports
            if store is not None:  # as reports.publish, without its coroutine when nothing is awaited
                created = int(time.time() - timing.elapsed())
                if not store.shared:
                    store.put_fixed(owner, rid, model, created, pol[4])
                else:
                    staged = reports.store_local(store, principal, rid, model, created, pol[4], False)
                    if staged is not None:
                        await reports.store_shared(*staged, rid)
            headers = answer_headers(relayed, rid, "skipped", f"{timing.overhead() * 1000:.3f}",
                                     reports.report_header_pairs(rid, pol[3], state.reports_on), payload)
        except asyncio.CancelledError:  # the client went away (see DisconnectWatch)
            status = 499
            fields["client_disconnected"] = True
            raise
        except Exception as exc:  # noqa: BLE001 - as the normal path: an OpenAI-shaped error
            reply = failure_reply(exc, rid, timing, fields, model=model, team=principal.team)
            status = reply.status
        finally:
            finish(state, route=CHAT_ROUTE, model=model, status=status, timing=timing, rid=rid,
                   principal=principal, upstream=up.name, stream=False, veracity_status=vstatus, fields=fields)
        watch.stop()  # as in chat_asgi: the client's disconnect no longer cancels the send
        if reply is not None:
            await reply.send(send)
            return
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _normal(self, scope: dict[str, Any], receive: Any, send: Any, raw: bytes | None,
                      deployment: str | None) -> None:
        """The normal path for a request this lane does not take; ``raw``: the body when it
        was already read (its size already checked against the limit)."""
        await chat_asgi(self.state, scope, receive, send, raw, deployment)
