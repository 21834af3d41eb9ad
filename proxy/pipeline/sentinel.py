"""The sentinel: a ``verify_result`` tool the model must call before its final answer.

The pattern ("sentinel tool"): offer the model a self-check tool with must-wording, intercept
its calls in the gateway, and either let the model give its final answer (``is_ready`` with
nothing missing or wrong) or send it back with the missing items and errors it listed. The
client never sees ``verify_result``.

Choices and their sources (a published measurement of tool-call wording): the description says
"must be called before the final answer" (the call rate fell from 87% to 34% when "must"
became "may"); the tool is inserted at a position other than last among the client's tools
(71% call rate when last, 87-91% elsewhere); the system rule has at most three lines (eight
rules dropped the rate to 52%) and says "check only what the user explicitly asked for".

Entry points: :func:`should_inject`, :func:`inject`, :func:`settle`, :func:`overhead_tokens`;
for streams, :func:`offers_tool` (is this turn still offered the tool? then it is held, not
relayed) and :class:`DeltaFilter` (drops ``verify_result`` tool-call deltas from relayed SSE).
Modes (policy ``sentinel.mode``): ``offered`` — tool + rule injected, calls intercepted;
``forced`` — as offered, and when the model answered without calling the tool, one extra call
forces ``verify_result`` on the draft; if ready, the draft is returned as is (no third call).

Exhaustion (docs/design.md "Asymmetric trust"; docs/sentinel.md: the step limit and its message
"[验证未通过但已耗尽步数]"). The rule that no tool is called more than twice in a row
is stated in :data:`RULE` and enforced for the gateway's own tool: a turn that would be the third
consecutive ``verify_result`` call (or any call beyond ``max_rounds``) is not executed, and after
two consecutive calls the next turn is asked without the tool, so the loop runs at most
``min(max_rounds, MAX_CONSECUTIVE)`` rounds. When the rounds run out while the model's latest
``verify_result`` said ``is_ready: false`` -- or a call past the limit came anyway -- the result
is ``exhausted`` (``forced_not_ready`` in forced mode, whose one round ran out) and
``info["exhausted"]`` keeps the model's latest ``missing_items``/``errors_found``.
:func:`exhaustion_verdict` turns that into the report's verdict: one ``sentinel`` check with
basis ``model`` (the model's own word: it can fail or doubt an answer, never pass it) and the
exhaustion message in the answer's language as the report's ``reason``. The status:

* ``failed`` when the model's latest call listed ``errors_found`` (the model says the answer is
  wrong and never took it back: the check is a ``fail``, its evidence the model's own list);
* else ``unverified`` (only ``missing_items``, or ``is_ready: false`` with nothing listed, or
  unreadable arguments: the answer was never confirmed complete -- the check is ``unknown``);
  a report that already ``failed`` stays ``failed``.

A ``ready`` verdict adds no check: ``is_ready: true`` is the model's word and never a pass.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.stores.budget import RequestBudget, usage_tokens
from proxy.wire.messages import first_message
from proxy.wire.sse import encode_chunk
from verifiers import Check

__all__ = ["TOOL_NAME", "TOOL", "RULE", "MAX_CONSECUTIVE", "EXHAUSTED_REASON", "should_inject", "inject",
           "settle", "SettleResult", "exhaustion_check", "exhaustion_reason", "exhaustion_verdict",
           "overhead_tokens", "overhead_tokens_cached", "strip_sentinel", "offers_tool", "DeltaFilter"]

Complete = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

TOOL_NAME = "verify_result"

TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": ("Must be called before the final answer: check your result against what "
                        "the user explicitly asked for."),
        "parameters": {
            "type": "object",
            "properties": {
                "task_goal": {"type": "string"},
                "actual_result": {"type": "string"},
                "missing_items": {"type": "array", "items": {"type": "string"}},
                "errors_found": {"type": "array", "items": {"type": "string"}},
                "is_ready": {"type": "boolean", "description": "True only if nothing is missing or wrong."},
            },
            "required": ["task_goal", "actual_result", "missing_items", "errors_found", "is_ready"],
        },
    },
}

#: The system rule: three lines, must-wording, scope limited to what the user asked; the first
#: line also states docs/sentinel.md's limit of two consecutive calls of one tool (:data:`MAX_CONSECUTIVE`).
RULE = ("You must call verify_result before your final answer, and must never call a tool more than twice in a row.\n"
        "Check only what the user explicitly asked for.\n"
        "If anything is missing or wrong, fix it before answering.")

#: Consecutive ``verify_result`` calls the gateway executes (docs/sentinel.md's rule "no tool is called
#: more than twice in a row"); a third is not executed and the loop ends as ``exhausted``.
MAX_CONSECUTIVE = 2

#: The report's ``reason`` when the sentinel's rounds ran out unready (docs/sentinel.md: the message for
#: Chinese answers, its English equivalent otherwise; :func:`exhaustion_reason`).
EXHAUSTED_REASON = {"zh": "[验证未通过但已耗尽步数]", "en": "[verification did not pass, steps exhausted]"}

_READY_REPLY = "Verified: nothing missing or wrong. Now give your final answer to the user."


def _forced_choice() -> dict[str, Any]:
    return {"type": "function", "function": {"name": TOOL_NAME}}


def should_inject(body: dict[str, Any], mode: str, when: str = "always",
                  multi_part: bool = True) -> tuple[bool, str]:
    """Whether to inject the sentinel into this request, and why not.

    Never when ``mode`` is ``off``; when the client's ``tool_choice`` is ``none``, ``required``
    or forces one of its own functions (injecting would change what the client asked for);
    when the request uses the legacy ``functions`` field; when ``when`` is ``multi_part`` and
    the question is not multi-part; when ``messages`` is not a list or ``tools`` is neither
    absent nor a list (a malformed body goes upstream unchanged, for the upstream to reject).
    """
    if mode not in ("offered", "forced"):
        return False, "sentinel off"
    if not isinstance(body.get("messages"), list):
        return False, "malformed request: messages is not a list"  # forwarded as sent; the upstream judges it
    if body.get("tools") is not None and not isinstance(body.get("tools"), list):
        return False, "malformed request: tools is not a list"
    if any(_is_ours_tool(t) for t in body.get("tools") or ()):
        # the client's own tool has our name: injecting would duplicate it and intercepting
        # would swallow the client's calls
        return False, f"client defines a tool named {TOOL_NAME}"
    tc = body.get("tool_choice")
    if tc == "none":
        return False, "client tool_choice none"
    if tc == "required":
        return False, "client tool_choice required"
    if isinstance(tc, dict):
        return False, "client forces its own tool"
    if "functions" in body or "function_call" in body:
        return False, "legacy functions request"
    if when == "multi_part" and not multi_part:
        return False, "question not multi-part"
    return True, ""


def inject(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``body`` with the tool and the rule added.

    The tool goes first among the client's tools (never last when the client has tools); the
    rule is appended to a leading ``system``/``developer`` message with string content, or
    added as a new first ``system`` message. The client's ``body`` is not modified.
    """
    new = dict(body)
    tools = list(body.get("tools") or [])
    new["tools"] = [TOOL] + tools
    msgs = list(body.get("messages") or [])
    if msgs and isinstance(msgs[0], dict) and msgs[0].get("role") in ("system", "developer") \
            and isinstance(msgs[0].get("content"), str):
        first = dict(msgs[0])
        first["content"] = first["content"].rstrip() + "\n\n" + RULE
        msgs[0] = first
    else:
        msgs.insert(0, {"role": "system", "content": RULE})
    new["messages"] = msgs
    return new


def _without_tool(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with ``verify_result`` removed (and ``tools``/``tool_choice``/
    ``parallel_tool_calls`` dropped when no client tool remains)."""
    new = dict(body)
    tools = [t for t in body.get("tools") or [] if not _is_ours_tool(t)]
    if tools:
        new["tools"] = tools
        if isinstance(new.get("tool_choice"), dict) and _choice_is_ours(new["tool_choice"]):
            new.pop("tool_choice")
    else:
        for k in ("tools", "tool_choice", "parallel_tool_calls"):
            new.pop(k, None)
    return new


def offers_tool(body: Any) -> bool:
    """Whether the request ``body`` offers ``verify_result`` (the turn may call it)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    return isinstance(tools, list) and any(_is_ours_tool(t) for t in tools)


class _Call:
    """One tool call of a streamed choice, as the filter has read it so far: its ``id``, its
    ``name`` (the decoded name pieces concatenated, as the ``openai`` SDK merges them), whether
    argument text arrived, ``ours`` (``None`` while undecided) and ``out`` (the index the client
    sees, assigned when its first delta is relayed)."""

    __slots__ = ("id", "name", "args", "odd", "ours", "out")

    def __init__(self, call_id: Any) -> None:
        self.id = call_id
        self.name = ""
        self.args = False
        self.odd = False   # a name that is not a string: never ours
        self.ours: bool | None = None
        self.out: int | None = None

    def decide(self, final: bool) -> None:
        """Decide ``ours`` once the name can no longer change what it is: a name that is not a
        prefix of ``verify_result`` is the client's at once; a name equal to it is ours once
        argument text follows it (a longer client name such as ``verify_result_v2`` would have
        continued before the arguments), or when ``final`` (the choice finished, the stream
        ended, or the hold limit was reached)."""
        if self.ours is not None:
            return
        if self.odd or not TOOL_NAME.startswith(self.name):
            self.ours = False
        elif final or (self.args and self.name):
            self.ours = self.name == TOOL_NAME


class _ChoiceCalls:
    """The tool calls of one choice (``by_index``: the call each ``index`` currently names, the
    rule of :func:`proxy.wire.sse.assemble`), whether a client call was relayed (``relayed``) or one
    of ours dropped (``dropped``), and the next index to give the client."""

    __slots__ = ("calls", "by_index", "relayed", "dropped", "next_out")

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.by_index: dict[int, _Call] = {}
        self.relayed = False
        self.dropped = False
        self.next_out = 0

    def locate(self, delta: dict[str, Any]) -> _Call:
        """The call ``delta`` belongs to (a new one when it starts one), by the rules of
        :func:`proxy.wire.sse.assemble`: merged by ``index``; a new ``id`` on an index in use starts
        a new call; a delta without an integer ``index`` continues the last call unless it
        brings another ``id``."""
        idx, call_id = delta.get("index"), delta.get("id")
        if not isinstance(idx, int) or isinstance(idx, bool):
            last = self.calls[-1] if self.calls else None
            if last is not None and (not call_id or call_id == last.id):
                return last
            idx = max(self.by_index, default=-1) + 1
        call = self.by_index.get(idx)
        if call is None or (call_id and call.id and call_id != call.id):
            call = _Call(call_id)
            self.by_index[idx] = call
            self.calls.append(call)
        elif call_id and not call.id:
            call.id = call_id
        return call


class _Frame:
    """A frame waiting to be relayed: its bytes, its decoded chunk (``None`` for anything that
    is not a chunk object: comments, ``[DONE]``, error events, undecodable data) and, per choice
    with tool-call deltas, the calls those deltas belong to."""

    __slots__ = ("raw", "chunk", "prefix", "links", "dirty")

    def __init__(self, raw: bytes, chunk: dict[str, Any] | None, prefix: bytes, dirty: bool) -> None:
        self.raw = raw
        self.chunk = chunk
        self.prefix = prefix      # lines before the data (``event: ...``), kept on re-encoding
        self.links: list[tuple[dict[str, Any], _ChoiceCalls, list[_Call | None]]] = []
        self.dirty = dirty        # re-encode even if nothing is dropped (escapes, several data lines)

    def undecided(self) -> bool:
        return any(c is not None and c.ours is None for _, _, calls in self.links for c in calls)


def _data_of(frame: bytes) -> tuple[bytes, bytes | None, bool]:
    """``(prefix lines, data payload or None, several data lines)`` of one SSE event."""
    prefix: list[bytes] = []
    data: list[bytes] = []
    for line in frame.split(b"\n"):
        if line.startswith(b"data:"):
            v = line[5:]
            data.append(v[1:] if v.startswith(b" ") else v)
        elif line:
            prefix.append(line + b"\n")
    if not data:
        return b"".join(prefix), None, False
    return b"".join(prefix), b"\n".join(data), len(data) > 1


class DeltaFilter:
    """A stateful filter of relayed SSE bytes (``data: {chunk}\n\n`` events, as
    :class:`proxy.wire.relay.SSERelay` yields them) that drops ``verify_result`` tool calls, deciding
    on the decoded JSON of each chunk, never on its bytes: a name written with escapes
    (``verify\\u005fresult``), split over several deltas or frames, calls interleaved by ``index``,
    deltas without ``index``, and an ``id`` reused by two calls are all read as the ``openai``
    SDK reads them (OpenAI's "The chat completion chunk object", ``tool_calls[].index``; calls
    tracked by the rules of :func:`proxy.wire.sse.assemble`).

    A call whose name so far is a prefix of ``verify_result`` is undecided (:meth:`_Call.decide`):
    from its first delta on, frames are held, in order, until it is decided (usually one frame,
    the one bringing its first argument text), the choice finishes, the stream ends (``[DONE]``,
    an error event, :meth:`flush`) or :data:`MAX_HELD_BYTES` are held. The client receives only its
    own calls, renumbered ``0, 1, ...`` in the order they first appear (the SDK merges deltas
    by position ``index``), each delta with an ``index``; a delta left empty is dropped, and a
    frame left without choices; the ``finish_reason`` of a choice says what was relayed:
    ``tool_calls`` when a client call was relayed (the upstream's ``stop`` included), ``stop``
    when only ours were and the upstream said ``tool_calls``. Frames the filter does not change
    pass byte for byte, except that a chunk written with ``\\u`` escapes or over several
    ``data:`` lines is re-encoded (the same JSON values, one line), so that later byte-level
    looks at the relayed frames see what the client's parser sees."""

    __slots__ = ("_choices", "_held", "_held_bytes", "_tail")

    #: bytes of frames held while a call is undecided; past it, undecided calls are decided as
    #: they stand (a name equal to ``verify_result`` is ours, any other is the client's)
    MAX_HELD_BYTES = 1 << 20

    def __init__(self) -> None:
        self._choices: dict[int, _ChoiceCalls] = {}
        self._held: list[_Frame] = []
        self._held_bytes = 0
        self._tail = b""

    def __call__(self, blob: bytes) -> bytes:
        """The relayable part of ``blob`` (complete events; a trailing incomplete event waits
        for the next call): our tool calls removed, held frames released once decided."""
        buf = self._tail + blob if self._tail else blob
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._tail = buf
            return b""
        self._tail = buf[end + 2:]
        out: list[bytes] = []
        for raw in buf[:end].split(b"\n\n"):
            if raw.strip(b"\n"):
                self._add(raw.strip(b"\n") + b"\n\n", out)
        return b"".join(out)

    def flush(self) -> bytes:
        """At the end of the stream: every held frame, undecided calls decided as they stand."""
        out: list[bytes] = []
        if self._tail.strip():
            self._add(self._tail.strip(b"\n") + b"\n\n", out)
        self._tail = b""
        self._decide_all()
        self._release(out)
        return b"".join(out)

    def _add(self, raw: bytes, out: list[bytes]) -> None:
        if not self._held and b"\\" not in raw and b"tool_calls" not in raw and (
                b"finish_reason" not in raw or not any(c.relayed or c.dropped for c in self._choices.values())):
            # Without a backslash JSON text decodes to itself, so no key or value here is, or
            # becomes, "tool_calls": no tool call to decide, no finish_reason to rewrite (and
            # nothing held to keep in order). Exact, not a guess; the common content frame.
            out.append(raw)
            return
        prefix, data, several = _data_of(raw)
        chunk = None
        if data is not None and data.strip() != b"[DONE]":
            try:
                obj = json.loads(data)   # the stdlib parser, as the openai SDK's
            except (ValueError, RecursionError):
                obj = None
            if isinstance(obj, dict) and isinstance(obj.get("choices"), list):
                chunk = obj
        if chunk is None:
            # [DONE], an error event, a comment, undecodable data: nothing more comes for the
            # calls held so far (or nothing to decide): release everything before it
            self._held.append(_Frame(raw, None, prefix, False))
            if data is not None:
                self._decide_all()
            self._release(out)
            return
        frame = _Frame(raw, chunk, prefix, several or b"\\u" in data)
        for ch in chunk["choices"]:
            if not isinstance(ch, dict):
                continue
            ci = ch.get("index", 0)
            ci = 0 if ci is None else ci
            if not isinstance(ci, int):
                continue
            state = self._choices.setdefault(ci, _ChoiceCalls())
            delta = ch.get("delta")
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            if isinstance(calls, list):
                linked: list[_Call | None] = []
                for c in calls:
                    if not isinstance(c, dict):
                        linked.append(None)
                        continue
                    call = state.locate(c)
                    fn = c.get("function")
                    if isinstance(fn, dict):
                        name, args = fn.get("name"), fn.get("arguments")
                        if isinstance(name, str):
                            call.name += name
                        elif name is not None:
                            call.odd = True
                        if args not in (None, ""):
                            call.args = True
                    call.decide(False)
                    linked.append(call)
                frame.links.append((ch, state, linked))
            if ch.get("finish_reason") is not None:
                for call in state.calls:
                    call.decide(True)
                if not isinstance(calls, list):
                    frame.links.append((ch, state, []))
        self._held.append(frame)
        self._held_bytes += len(raw)
        if self._held_bytes > self.MAX_HELD_BYTES:
            self._decide_all()
        self._release(out)

    def _decide_all(self) -> None:
        for state in self._choices.values():
            for call in state.calls:
                call.decide(True)

    def _release(self, out: list[bytes]) -> None:
        n = 0
        for frame in self._held:
            if frame.undecided():
                break
            n += 1
            data = self._render(frame)
            if data:
                out.append(data)
        if n:
            del self._held[:n]
            self._held_bytes = sum(len(f.raw) for f in self._held)

    def _render(self, frame: _Frame) -> bytes:
        chunk = frame.chunk
        if chunk is None:
            return frame.raw
        changed = frame.dirty
        emptied: list[int] = []
        for ch, state, linked in frame.links:
            delta = ch.get("delta")
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            if isinstance(calls, list) and linked:
                keep = []
                for c, call in zip(calls, linked):
                    if call is None:        # not an object: nothing a client can merge
                        changed = True
                        continue
                    if call.ours:
                        state.dropped = changed = True
                        continue
                    if call.out is None:
                        call.out = state.next_out
                        state.next_out += 1
                    state.relayed = True
                    if c.get("index") != call.out or isinstance(c.get("index"), bool):
                        c = dict(c, index=call.out)
                        changed = True
                    keep.append(c)
                if len(keep) != len(calls):
                    if keep:
                        delta["tool_calls"] = keep
                    else:
                        delta.pop("tool_calls")
                        if not delta and ch.get("finish_reason") is None and ch.get("logprobs") is None:
                            emptied.append(id(ch))
                else:
                    delta["tool_calls"] = keep
            fr = ch.get("finish_reason")
            if state.relayed and fr == "stop":
                ch["finish_reason"] = "tool_calls"
                changed = True
            elif not state.relayed and state.dropped and fr == "tool_calls":
                ch["finish_reason"] = "stop"
                changed = True
        if not changed:
            return frame.raw
        if emptied:
            chunk["choices"] = [ch for ch in chunk["choices"] if id(ch) not in emptied]
            if not chunk["choices"] and chunk.get("usage") is None:
                return b""
        return frame.prefix + encode_chunk(chunk)


def _is_ours_tool(t: Any) -> bool:
    return isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name") == TOOL_NAME


def _choice_is_ours(tc: Any) -> bool:
    return isinstance(tc, dict) and isinstance(tc.get("function"), dict) and tc["function"].get("name") == TOOL_NAME


def _split_calls(msg: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    ours, theirs = [], []
    calls = msg.get("tool_calls")
    for c in calls if isinstance(calls, list) else ():  # an upstream's odd value is not ours to judge
        fn = c.get("function") if isinstance(c, dict) else None
        if isinstance(fn, dict) and fn.get("name") == TOOL_NAME:
            ours.append(c)
        else:
            theirs.append(c)
    return ours, theirs


#: Bounds on what one ``verify_result`` call may put into the report and into the tool reply
#: sent back upstream: items per list, characters per text field. A model's arguments are
#: untrusted; without bounds 50,000 listed items came back in the report once per round.
MAX_ITEMS = 50
MAX_CHARS = 500
#: characters of the tool reply that lists what is missing or wrong (sent back once per call)
MAX_REPLY_CHARS = 4000


#: the error recorded for arguments that are not JSON (the gateway's words, not the model's)
MALFORMED = "verify_result arguments were not valid JSON"


def _clip(s: str) -> str:
    return s if len(s) <= MAX_CHARS else s[:MAX_CHARS] + "..."


def _parse_args(call: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments, normalised and bounded (:data:`MAX_ITEMS`, :data:`MAX_CHARS`);
    malformed JSON (also JSON nested too deep for the parser) counts as not ready."""
    raw = (call.get("function") or {}).get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else (raw or {})
    except (ValueError, TypeError, RecursionError):
        return {"task_goal": "", "actual_result": "", "missing_items": [],
                "errors_found": [MALFORMED], "is_ready": False}
    if not isinstance(args, dict):
        args = {}

    def text(v: Any) -> str:
        # only scalars: str() of a nested container is unbounded work and says nothing
        return _clip(v if isinstance(v, str) else str(v)) if isinstance(v, (str, int, float)) else ""

    def strs(v: Any) -> list[str]:
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list):
            return []
        if len(v) <= MAX_ITEMS:
            return [t for t in (text(x).strip() for x in v) if t]
        out = [t for t in (text(x).strip() for x in v[:MAX_ITEMS - 1]) if t]
        return out + [f"... and {len(v) - MAX_ITEMS + 1} more"]

    return {
        "task_goal": text(args.get("task_goal")),
        "actual_result": text(args.get("actual_result")),
        "missing_items": strs(args.get("missing_items")),
        "errors_found": strs(args.get("errors_found")),
        "is_ready": args.get("is_ready") is True,
    }


def _record(info: dict[str, Any], args_list: list[dict[str, Any]]) -> None:
    """Add the parsed calls to the report record, at most :data:`MAX_ITEMS` per list (a
    model may make many calls per turn, and up to ``max_rounds`` turns)."""
    for key, items in (("calls", args_list),
                       ("missing_items", [m for a in args_list for m in a["missing_items"]]),
                       ("errors_found", [e for a in args_list for e in a["errors_found"]])):
        info[key].extend(items[:max(0, MAX_ITEMS - len(info[key]))])


def _ready(args: dict[str, Any]) -> bool:
    return bool(args["is_ready"]) and not args["missing_items"] and not args["errors_found"]


def _instruction(args_list: list[dict[str, Any]]) -> str:
    missing = [m for a in args_list for m in a["missing_items"]]
    errors = [e for a in args_list for e in a["errors_found"]]
    lines = ["Not ready. Complete the answer before handing it in."]
    if missing:
        lines.append("Missing (asked for by the user): " + "; ".join(missing))
    if errors:
        lines.append("Errors to fix: " + "; ".join(errors))
    if not missing and not errors:
        lines.append("You marked the answer as not ready: finish it.")
    lines.append("Then give the complete final answer.")
    out = "\n".join(lines)
    return out if len(out) <= MAX_REPLY_CHARS else out[:MAX_REPLY_CHARS] + "...\nThen give the complete final answer."


def strip_sentinel(completion: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``completion`` without ``verify_result`` tool calls in any choice; a choice
    left without calls loses ``tool_calls`` and gets ``finish_reason: stop``."""
    out = copy.deepcopy(completion)
    for ch in out.get("choices") or []:
        msg = ch.get("message") if isinstance(ch, dict) else None
        if not isinstance(msg, dict) or not msg.get("tool_calls") or not isinstance(msg["tool_calls"], list):
            continue
        _, theirs = _split_calls(msg)
        if theirs:
            msg["tool_calls"] = theirs
        else:
            msg.pop("tool_calls", None)
            if msg.get("content") is None:
                msg["content"] = ""
            if ch.get("finish_reason") == "tool_calls":
                ch["finish_reason"] = "stop"
    return out


@dataclass(slots=True)
class SettleResult:
    """The completion to continue with (never containing ``verify_result`` calls) and the
    sentinel record for the report: ``called``, ``rounds``, ``result`` (``ready``,
    ``not_ready``, ``not_called``, ``forced_ready``, ``forced_not_ready``, ``mixed``,
    ``max_rounds``, ``budget``, ``upstream_error``), ``missing_items``, ``errors_found``,
    ``calls`` (the arguments of every intercepted call), ``extra_calls``, ``extra_tokens``;
    when the rounds ran out unready (result ``exhausted`` or ``forced_not_ready``) also
    ``exhausted``: ``{"by": "max_rounds" | "consecutive_calls" | "forced", "limit", "task_goal",
    "actual_result", "missing_items", "errors_found", "malformed"}`` -- the model's latest
    verdict (:func:`exhaustion_verdict`)."""

    completion: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)


async def _call(complete: Complete, req: dict[str, Any], budget: RequestBudget | None) -> dict[str, Any]:
    if budget is not None:
        return await asyncio.wait_for(complete(req), max(0.001, budget.remaining_s()))
    return await complete(req)


async def settle(body: dict[str, Any], draft: dict[str, Any], complete: Complete, *, mode: str = "offered",
                 max_rounds: int = 3, budget: RequestBudget | None = None) -> SettleResult:
    """Intercept ``verify_result`` calls in ``draft`` (the answer to the injected ``body``).

    Loop: if the model called ``verify_result`` (and no client tool), answer each call with
    "ready -> give the final answer" or the list of missing items and errors, and call the
    upstream again (without the tool once ready or on the last round); at most
    ``min(max_rounds, MAX_CONSECUTIVE)`` round trips (docs/sentinel.md: "no tool more than twice in a
    row"). A call past that limit is not executed: the loop ends as ``exhausted``, as it does when
    the last round's answer follows an ``is_ready: false`` (``info["exhausted"]``, see the module
    doc). A turn that mixes client tool calls and ``verify_result`` returns only the client's
    calls. In ``forced`` mode a draft without a call gets one forced call.
    """
    info: dict[str, Any] = {"called": False, "rounds": 0, "result": "not_called", "missing_items": [],
                            "errors_found": [], "calls": [], "extra_calls": 0, "extra_tokens": 0,
                            "mode": mode}
    conv = list(body.get("messages") or [])
    current = draft
    req_base = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}

    async def extra(req: dict[str, Any]) -> dict[str, Any] | None:
        if budget is not None and not budget.allow_call():
            info["result"] = "budget"
            return None
        try:
            res = await _call(complete, req, budget)
        except Exception as exc:
            info["result"] = "upstream_error"
            info["error"] = type(exc).__name__
            if budget is not None:
                budget.charge(0)
            info["extra_calls"] += 1
            return None
        t = usage_tokens(res)
        info["extra_calls"] += 1
        info["extra_tokens"] += t
        if budget is not None:
            budget.charge(t)
        return res

    limit = min(max_rounds, MAX_CONSECUTIVE)
    last: list[dict[str, Any]] = []  # the model's latest verdict (the args of its latest turn's calls)
    while True:
        msg = first_message(current)
        ours, theirs = _split_calls(msg)
        if not ours:
            if mode == "forced" and not info["called"] and info["rounds"] == 0 and not theirs:
                return await _forced(req_base, conv, current, info, extra)
            if info["called"] and info["result"] in ("not_called",):
                info["result"] = "ready"
            if info["result"] == "not_ready" and info["rounds"] >= limit:
                # the last round was asked without the tool: its answer was never confirmed
                _exhausted(info, last, max_rounds)
            return SettleResult(strip_sentinel(current), info)
        info["called"] = True
        args_list = [_parse_args(c) for c in ours]
        _record(info, args_list)
        ready = all(_ready(a) for a in args_list)
        if theirs:
            info["result"] = "mixed"
            return SettleResult(strip_sentinel(current), info)
        info["result"] = "ready" if ready else "not_ready"
        last = args_list
        if info["rounds"] >= limit:
            # a third consecutive call (or one past max_rounds): not executed, the loop ends
            _exhausted(info, last, max_rounds)
            return SettleResult(strip_sentinel(current), info)
        info["rounds"] += 1
        conv = conv + [{"role": "assistant", "content": msg.get("content"), "tool_calls": ours}]
        reply = _READY_REPLY if ready else _instruction(args_list)
        conv += [{"role": "tool", "tool_call_id": c.get("id", ""), "content": reply} for c in ours]
        req = dict(req_base, messages=conv)
        if ready or info["rounds"] >= limit:
            req = _without_tool(req)
        nxt = await extra(req)
        if nxt is None:
            return SettleResult(strip_sentinel(current), info)
        current = nxt


async def _forced(req_base: dict[str, Any], conv: list[dict[str, Any]], draft: dict[str, Any],
                  info: dict[str, Any], extra) -> SettleResult:
    """Forced mode: the model answered without ``verify_result``; make it check the draft."""
    draft_msg = {"role": "assistant", "content": first_message(draft).get("content") or ""}
    req = dict(req_base, messages=conv + [draft_msg], tool_choice=_forced_choice())
    forced = await extra(req)
    if forced is None:
        return SettleResult(strip_sentinel(draft), info)
    ours, _ = _split_calls(first_message(forced))
    if not ours:  # the upstream ignored tool_choice: keep the draft
        info["result"] = "not_called"
        return SettleResult(strip_sentinel(draft), info)
    info["called"] = True
    info["rounds"] = 1
    args_list = [_parse_args(c) for c in ours]
    _record(info, args_list)
    if all(_ready(a) for a in args_list):
        info["result"] = "forced_ready"
        return SettleResult(strip_sentinel(draft), info)   # the draft as is: no third call
    info["result"] = "forced_not_ready"
    _exhausted(info, args_list, 1, by="forced")  # the forced mode's one round: the fix is never re-checked
    msgs = conv + [draft_msg,
                   {"role": "assistant", "content": None, "tool_calls": ours}]
    msgs += [{"role": "tool", "tool_call_id": c.get("id", ""), "content": _instruction(args_list)} for c in ours]
    fixed = await extra(_without_tool(dict(req_base, messages=msgs)))
    if fixed is None:
        return SettleResult(strip_sentinel(draft), info)
    return SettleResult(strip_sentinel(fixed), info)


def _exhausted(info: dict[str, Any], last: list[dict[str, Any]], max_rounds: int, by: str | None = None) -> None:
    """Mark ``info`` as exhausted with the model's latest verdict ``last`` (the parsed args of its
    latest turn's calls, bounded as :func:`_record` bounds them)."""
    if info["result"] != "forced_not_ready":
        info["result"] = "exhausted"
    if by is None:
        by = "consecutive_calls" if info["rounds"] >= MAX_CONSECUTIVE and max_rounds > MAX_CONSECUTIVE else "max_rounds"
    missing = [m for a in last for m in a["missing_items"]][:MAX_ITEMS]
    errors = [e for a in last if not _malformed(a) for e in a["errors_found"]][:MAX_ITEMS]
    info["exhausted"] = {
        "by": by, "limit": 1 if by == "forced" else min(max_rounds, MAX_CONSECUTIVE),
        "task_goal": next((a["task_goal"] for a in last if a["task_goal"]), ""),
        "actual_result": next((a["actual_result"] for a in last if a["actual_result"]), ""),
        "missing_items": missing, "errors_found": errors,
        "malformed": sum(1 for a in last if _malformed(a)),
        "is_ready": bool(last) and all(_ready(a) for a in last),
    }


def _malformed(args: dict[str, Any]) -> bool:
    """Arguments :func:`_parse_args` could not read (its :data:`MALFORMED` note is the gateway's
    word, not an error the model listed)."""
    return args["errors_found"] == [MALFORMED] and not args["missing_items"] and not args["task_goal"]


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def exhaustion_reason(text: str | None, fallback: str | None = None) -> str:
    """The exhaustion message (:data:`EXHAUSTED_REASON`) in the language of ``text`` (the answer;
    ``fallback``, e.g. the question, when the answer has no letters): Chinese when at least a
    fifth of its letters are Han characters (a Chinese answer keeps Latin names, code and
    units), else English."""
    for t in (text, fallback):
        han = len(_HAN.findall(t or ""))
        latin = len(_LATIN.findall(t or ""))
        if han + latin:
            return EXHAUSTED_REASON["zh" if han * 5 >= han + latin else "en"]
    return EXHAUSTED_REASON["en"]


def exhaustion_check(info: dict[str, Any] | None) -> Check | None:
    """The ``sentinel`` check of an exhausted loop (``info["exhausted"]``, from :func:`settle`),
    else None. Basis ``model``: the model's own ``missing_items``/``errors_found`` are the
    evidence. ``fail`` when it listed errors (the model says the answer is wrong), else
    ``unknown`` (never confirmed complete); never ``pass``."""
    ex = (info or {}).get("exhausted")
    if not isinstance(ex, dict):
        return None
    errors, missing = list(ex.get("errors_found") or ()), list(ex.get("missing_items") or ())
    if errors:
        outcome, note = "fail", "the model's own check listed errors and the sentinel's rounds ran out: " + "; ".join(errors)
    elif missing:
        outcome, note = "unknown", "the model's own check listed missing items and the sentinel's rounds ran out: " + "; ".join(missing)
    else:
        outcome, note = "unknown", "the model never confirmed the answer ready before the sentinel's rounds ran out"
    return Check(verifier="sentinel", claim=ex.get("task_goal") or "the answer is complete (verify_result)",
                 outcome=outcome, found=ex.get("actual_result") or None,
                 evidence={"kind": "sentinel_exhausted", "by": ex.get("by"), "limit": ex.get("limit"),
                           "rounds": info.get("rounds"), "missing_items": missing, "errors_found": errors,
                           "malformed": ex.get("malformed", 0)},
                 confidence=0.5, note=_clip(note), basis="model")


def exhaustion_verdict(report: Any, info: dict[str, Any] | None, answer: str | None,
                       question: str | None = None) -> Check | None:
    """Put the exhausted sentinel's verdict into ``report`` (a :class:`verifiers._types.Report`):
    append :func:`exhaustion_check`, set the status (``failed`` on a ``fail`` check; else
    ``passed``/``corrected``/``skipped`` become ``unverified``, other statuses stay) and set
    ``reason`` to :func:`exhaustion_reason` of ``answer`` (a reason already there follows it).
    Returns the check added, or None when the loop was not exhausted (``report`` unchanged).
    Works on a multi-choice report too (the sentinel settles choice 0: the check is tagged with
    choice 0 when the report keeps ``check_choice``)."""
    check = exhaustion_check(info)
    if check is None:
        return None
    report.checks.append(check)
    tags = getattr(report, "check_choice", None)
    if isinstance(tags, list):
        tags.append(0)
    if check.outcome == "fail":
        report.status = "failed"
    elif report.status in ("passed", "corrected", "skipped"):
        report.status = "unverified"
    msg = exhaustion_reason(answer, question)
    report.reason = f"{msg} {report.reason}" if report.reason else msg
    return check


_OVERHEAD: dict[str, tuple[int, bool]] = {}


def _tiktoken_cache() -> None:
    """Point tiktoken at litellm's bundled BPE files when no cache is configured, so that the
    count works offline (tiktoken downloads encodings on first use otherwise)."""
    if os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR"):
        return
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        d = Path(loc) / "litellm_core_utils" / "tokenizers"
        if d.is_dir():
            os.environ["TIKTOKEN_CACHE_DIR"] = str(d)
            return


_BPE_URLS = {  # where tiktoken fetches each encoding; its cache file is named by the URL's sha1
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


def _encoding_cached(encoding: str) -> bool:
    """True when tiktoken can load ``encoding`` from its cache without the network."""
    import hashlib
    from pathlib import Path

    _tiktoken_cache()
    url = _BPE_URLS.get(encoding)
    import tempfile

    d = (os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
         or os.path.join(tempfile.gettempdir(), "data-gym-cache"))  # tiktoken's own default
    if not url:
        return False
    return (Path(d) / hashlib.sha1(url.encode()).hexdigest()).is_file()


def overhead_tokens(encoding: str = "o200k_base") -> tuple[int, bool]:
    """Tokens the sentinel adds to a request: the tool schema (as JSON) plus the rule, counted
    with tiktoken's ``encoding``. Returns ``(tokens, exact)``; ``exact`` is False when the
    encoding could not be loaded offline and the count is the chars/4 estimate. The API
    renders tools in its own internal format, so the true figure differs by a few tokens."""
    if encoding in _OVERHEAD:
        return _OVERHEAD[encoding]
    text = json.dumps(TOOL, separators=(",", ":")) + "\n" + RULE
    n, exact = (len(text) + 3) // 4, False
    if _encoding_cached(encoding):  # never let tiktoken download (no network in CI, no hangs)
        try:
            import tiktoken

            n, exact = len(tiktoken.get_encoding(encoding).encode(text)), True
        except Exception:  # noqa: BLE001 - fall back to the estimate
            pass
    _OVERHEAD[encoding] = (n, exact)
    return n, exact


def overhead_tokens_cached(encoding: str = "o200k_base") -> int | None:
    """:func:`overhead_tokens` when already measured, else None after starting the
    measurement in a daemon thread (loading a tiktoken encoding takes a while; the request
    path never waits for it)."""
    hit = _OVERHEAD.get(encoding)
    if hit is not None:
        return hit[0]
    import threading

    threading.Thread(target=overhead_tokens, args=(encoding,), daemon=True).start()
    return None
