"""The lean lane of ``POST /v1/chat/completions``: a checks-off request with the least Python work.

When the caller's policy verifies nothing (:func:`proxy.pipeline.sequence.forwards_only`), the
whole pipeline reduces to one upstream call plus the ``skipped`` report; :class:`LeanLane` does
exactly that straight from ASGI, with authentication, routing and the policy's verdict cached.
It answers through the same helpers as the normal path (:mod:`proxy.routes._respond`: header
list, error mapping, log line), so a client cannot tell the lanes apart
(tests/test_gateway_lean.py, tests/test_gateway_lanes.py). Everything else goes to the normal
path (:func:`proxy.routes.chat.chat_asgi`) with the body already read handed over.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from proxy import runtime
from proxy._asgi.body import MAX_JSON_DEPTH, replay
from proxy._asgi.disconnect import DisconnectWatch
from proxy._asgi.request_ids import RID_RE, request_ids
from proxy.auth import Principal, client_authorization_bytes
from proxy.observability import metrics
from proxy.pipeline import sequence as pipeline
from proxy.routes._access import route_model
from proxy.routes._respond import Reply, answer_headers, failure_reply, finish
from proxy.routes.chat import CHAT_ROUTE, chat_asgi
from proxy.stores import reports
from proxy.upstreams.clients import OpenAIUpstream, Timing, dumps, loads_strict
from proxy.wire.errors import GatewayError

if TYPE_CHECKING:
    from proxy.app import GatewayState

__all__ = ["LeanLane"]


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

    def __init__(self, state: GatewayState) -> None:
        self.state = state
        self.enabled = not state.log_content
        #: (credential bytes or None, model) -> (principal, upstream)
        self._routes: dict[tuple[bytes | None, str], tuple[Principal, OpenAIUpstream]] = {}
        #: id(policy) -> (policy, forwards only?, its report dict)
        self._policies: dict[int, tuple[Any, bool, dict[str, Any]]] = {}

    def _route(self, auth: bytes | None, model: str) -> tuple[Principal, OpenAIUpstream] | None:
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
        if not isinstance(up, OpenAIUpstream):
            return None
        hit = (principal, up)
        if len(self._routes) < self.MAX_CACHED:
            self._routes[key] = hit
        return hit

    def _policy(self, principal: Principal) -> tuple[Any, bool, dict[str, Any]] | None:
        """The key's policy (looked up per request: files reload on change) with its cached
        lane verdict; None when it cannot be resolved (the normal path reports why)."""
        try:
            policy = runtime.get(self.state.cfg).policies.get(principal.policy)
        except Exception:  # noqa: BLE001 - misconfiguration / missing policy: the normal path's error
            return None
        hit = self._policies.get(id(policy))
        if hit is None or hit[0] is not policy:
            lean = pipeline.forwards_only(policy)
            hit = (policy, lean, pipeline.checks_off_report(policy).to_dict() if lean else {})
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
        principal, up = routed
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
            await self._forward(watch, send, timing, body, model, principal, up, pol, rid)

    async def _forward(self, watch: DisconnectWatch, send: Any, timing: Timing, body: dict[str, Any],
                       model: str, principal: Principal, up: OpenAIUpstream, pol: tuple[Any, bool, dict[str, Any]],
                       rid: str) -> None:
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
            await reports.publish(state.cfg, principal, rid, model, int(time.time() - timing.elapsed()), pol[2])
            headers = answer_headers(relayed, rid, "skipped", f"{timing.overhead() * 1000:.3f}",
                                     reports.report_headers(rid, pol[2], state.reports_on), payload)
        except asyncio.CancelledError:  # the client went away (see DisconnectWatch)
            status = 499
            fields["client_disconnected"] = True
            raise
        except Exception as exc:  # noqa: BLE001 - as the normal path: an OpenAI-shaped error
            reply = failure_reply(exc, rid, timing, fields)
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
