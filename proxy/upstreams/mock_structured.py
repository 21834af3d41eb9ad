"""Structured output for the scripted upstream (:mod:`proxy.upstreams.mock`, demo mode): a JSON
value valid against a request's JSON Schema, so clients that parse what they asked for
(openai-python's ``chat.completions.parse``, LangChain's ``with_structured_output``, instructor)
work against the demo as against a real model.

:func:`structured_reply` answers a chat request that asks for structure and that no script rule
answered: ``response_format: {"type": "json_schema"}`` -> content that is a minimal instance of
the schema; ``{"type": "json_object"}`` -> a minimal instance of the schema given with it
(``response_format.schema``) or written into a message (JSON mode clients put it in the prompt),
else ``{"answer": "Mock reply to: ..."}``; ``tool_choice``
naming a function (or ``"required"``: the first tool) -> one call of it whose ``arguments`` are a
minimal instance of the tool's ``parameters``.

:func:`minimal_instance` covers the JSON Schema keywords that OpenAI's Structured Outputs and
pydantic's ``model_json_schema`` emit (JSON Schema 2020-12, "Validation" and "Core"): ``type``
(or a list of types: ``null`` when listed), ``properties`` + ``required`` (only required properties are filled),
``items``/``prefixItems`` + ``minItems``, ``enum`` (the first value), ``const``, ``default``,
``anyOf``/``oneOf`` (``null`` when a branch allows it, else the first branch), ``allOf`` (merged), local ``$ref`` into
``$defs``/``definitions``, ``minLength``/``maxLength``, ``minimum``/``exclusiveMinimum``/
``maximum``/``exclusiveMaximum``, ``format`` (``date-time``, ``date``, ``time``, ``email``,
``uri``, ``uuid``). ``pattern`` is not solved: a string with a pattern gets ``default`` when
the schema has one, else ``"mock"``.

Hostile schemas are bounded: nesting (``$ref`` cycles through ``anyOf``/``oneOf``/``allOf``
included) stops at :data:`MAX_DEPTH` with the smallest value; a keyword of the wrong JSON type
(``"required": 5``, ``"format": []``, ``"properties": [1]``) or a bound that is not finite is
ignored; an instance that would need more than :data:`MAX_VALUES` values (``minItems: 10**9``,
a ``$ref`` fanning out at every level) or strings longer than :data:`MAX_STRING_CHARS` characters
(``minLength: 10**12``; all strings together) raises :class:`SchemaTooLarge`, which the scripted upstream answers
with a 400 ``invalid_request_error`` (a real model server refuses such schemas too).
"""

from __future__ import annotations

import json
import math
from typing import Any

from proxy.wire.messages import last_user_content_text

__all__ = ["minimal_instance", "structured_reply", "SchemaTooLarge", "MAX_VALUES", "MAX_STRING_CHARS"]

#: deepest nesting followed (a recursive ``$ref`` stops here with the smallest value of its type)
MAX_DEPTH = 12
#: most JSON values (objects, arrays, strings, numbers...) one minimal instance may hold: bounds
#: the time and memory a hostile schema costs the scripted upstream (in demo mode, the gateway's
#: own process). OpenAI's Structured Outputs caps a schema at 5000 object properties (its
#: "Supported schemas" guide); 10000 values leaves room for every schema it accepts.
MAX_VALUES = 10_000
#: most characters the strings of one minimal instance may hold together (``minLength``)
MAX_STRING_CHARS = 100_000


class SchemaTooLarge(ValueError):
    """The smallest instance of a schema exceeds :data:`MAX_VALUES` values or a string of
    :data:`MAX_STRING_CHARS` characters; the message names the limit."""


class _Budget:
    """Values left to build in one :func:`minimal_instance` call."""

    __slots__ = ("left", "chars")

    def __init__(self) -> None:
        self.left = MAX_VALUES
        self.chars = MAX_STRING_CHARS

    def take(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise SchemaTooLarge(f"the schema's smallest instance has more than {MAX_VALUES} values "
                                 "(minItems, or required properties nested through $ref): the demo's "
                                 "scripted model answers at most that")


def _int(v: Any) -> int | None:
    """``v`` when it is a JSON integer (not a bool), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None

_FORMATS = {"date-time": "2025-01-01T00:00:00Z", "date": "2025-01-01", "time": "00:00:00Z",
            "email": "user@example.com", "uri": "https://example.com/", "uuid": "00000000-0000-4000-8000-000000000000"}


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    """Follow a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``, any ``#/a/b`` pointer)."""
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < MAX_DEPTH:
        ref = schema["$ref"]
        if not ref.startswith("#"):
            return {}
        target: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **rest} if isinstance(target, dict) else rest
        seen += 1
    return schema


def _string(schema: dict[str, Any], budget: _Budget | None = None) -> str:
    fmt = schema.get("format")
    value = _FORMATS.get(fmt, "mock") if isinstance(fmt, str) else "mock"
    lo, hi = _int(schema.get("minLength")), _int(schema.get("maxLength"))
    if lo is not None and len(value) < lo:
        if lo > (budget.chars if budget is not None else MAX_STRING_CHARS):
            raise SchemaTooLarge(f"minLength {lo} needs more than the {MAX_STRING_CHARS} characters the demo's "
                                 "scripted model writes in one answer")
        value = value + "x" * (lo - len(value))
    if budget is not None:
        budget.chars -= len(value)
    if hi is not None and len(value) > hi >= 0:
        value = value[:hi]
    return value


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    """The number nearest 0 among a few candidates (0, the bounds, one step inside them, their
    midpoint) that satisfies ``minimum``/``exclusiveMinimum``/``maximum``/``exclusiveMaximum``."""
    def num(v: Any) -> bool:  # finite: json.loads reads Infinity and NaN
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    lo, lo_x, hi, hi_x = None, False, None, False
    if num(schema.get("minimum")):
        lo = schema["minimum"]
    if num(schema.get("exclusiveMinimum")) and (lo is None or schema["exclusiveMinimum"] >= lo):
        lo, lo_x = schema["exclusiveMinimum"], True
    if num(schema.get("maximum")):
        hi = schema["maximum"]
    if num(schema.get("exclusiveMaximum")) and (hi is None or schema["exclusiveMaximum"] <= hi):
        hi, hi_x = schema["exclusiveMaximum"], True

    def ok(v: float) -> bool:
        return ((lo is None or (v > lo if lo_x else v >= lo))
                and (hi is None or (v < hi if hi_x else v <= hi)))

    candidates: list[float] = [0]
    if lo is not None:
        candidates += [lo, lo + 1] + ([(lo + hi) / 2] if hi is not None else [])
    if hi is not None:
        candidates += [hi, hi - 1]
    for c in sorted(candidates, key=abs):
        if not math.isfinite(c):  # (lo + hi) / 2 of two huge floats
            continue
        v = math.ceil(c) if integer else float(c)
        if ok(v):
            return int(v) if integer else float(v)
    return math.ceil(lo or 0) if integer else float(lo or 0)


def minimal_instance(schema: Any, root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A small JSON value valid against ``schema`` (see the module doc for the keywords
    followed). ``root``: the document local ``$ref`` pointers resolve against (default:
    ``schema``). An unsupported or malformed schema gives ``{}``, ``"mock"``, ``0`` or ``null``
    by its ``type``. Raises :class:`SchemaTooLarge` (only) when the instance would exceed
    :data:`MAX_VALUES` values or :data:`MAX_STRING_CHARS` characters in a string."""
    if root is None:
        root = schema if isinstance(schema, dict) else {}
    return _instance(schema, root, depth, _Budget())


def _instance(schema: Any, root: dict[str, Any], depth: int, budget: _Budget) -> Any:
    budget.take()
    schema = _resolve(schema, root)
    if schema is True or not isinstance(schema, dict):
        return {}
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    if depth >= MAX_DEPTH:  # a $ref cycle through anyOf/oneOf/allOf ends here too
        return _smallest(schema, budget)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            resolved = [_resolve(b, root) for b in branches]
            # null when allowed (the smallest value, and it ends recursive schemas), else the first
            pick = next((b for b in resolved if isinstance(b, dict) and b.get("type") == "null"), resolved[0])
            rest = {k: v for k, v in schema.items() if k != key}
            return _instance({**rest, **pick} if isinstance(pick, dict) else pick, root, depth + 1, budget)
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            if isinstance(part, dict):
                for k, v in part.items():
                    if k == "properties" and isinstance(merged.get(k), dict) and isinstance(v, dict):
                        merged[k] = {**merged[k], **v}
                    elif k == "required" and isinstance(merged.get(k), list) and isinstance(v, list):
                        merged[k] = merged[k] + [r for r in v if r not in merged[k]]
                    else:
                        merged.setdefault(k, v)
        return _instance(merged, root, depth + 1, budget)
    kind = _kind(schema)
    if kind == "null" or (kind is None and depth > 0 and not schema):
        return None if kind == "null" else {}
    if kind == "string":
        return _string(schema, budget)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "array":
        n = _int(schema.get("minItems")) or 0
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        items = schema.get("items", {})
        if n > MAX_VALUES:
            raise SchemaTooLarge(f"minItems {n} is more than the {MAX_VALUES} values the demo's scripted "
                                 "model answers")
        out = [_instance(p, root, depth + 1, budget) for p in prefix[:max(n, len(prefix))]]
        while len(out) < n:
            out.append(_instance(items if isinstance(items, dict) else {}, root, depth + 1, budget))
        return out
    # object (also the fallback)
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return {name: _instance(props.get(name, {}), root, depth + 1, budget)
            for name in dict.fromkeys(r for r in required if isinstance(r, str))}


def _kind(schema: dict[str, Any]) -> str | None:
    """The JSON type a schema asks for (``null`` when a type list allows it), or None."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "null" if "null" in kind else (kind[0] if kind else None)
    if not isinstance(kind, str):
        kind = None
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else None
    return kind


def _smallest(schema: dict[str, Any], budget: _Budget) -> Any:
    """The value a schema gets past :data:`MAX_DEPTH`: the smallest of its type."""
    kind = _kind(schema)
    if kind == "string":
        return _string(schema, budget)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    return {"null": None, "boolean": False, "array": []}.get(kind or "", {})


def _forced_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The function tool a request forces (``tool_choice`` naming it, or ``"required"``: the
    first function tool), or None."""
    tools = [t.get("function") for t in body.get("tools") or [] if isinstance(t, dict)
             and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)]
    choice = body.get("tool_choice")
    if choice == "required" and tools:
        return tools[0]
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), dict) else None
        return next((t for t in tools if t["name"] == name), None)
    return None


def structured_reply(body: dict[str, Any]) -> dict[str, Any] | None:
    """The reply fields (for :class:`proxy.upstreams.mock.Reply`) answering a request that asks
    for structured output (see the module doc), or None when it asks for none."""
    tool = _forced_tool(body)
    if tool is not None:
        args = minimal_instance(tool.get("parameters") or {"type": "object"})
        return {"tool_calls": [{"name": tool["name"], "arguments": json.dumps(args)}]}
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        schema = fmt["json_schema"].get("schema") or {"type": "object"}
        return {"content": json.dumps(minimal_instance(schema))}
    if fmt.get("type") == "json_object":
        schema = fmt.get("schema") if isinstance(fmt.get("schema"), dict) else _schema_in_messages(body)
        if schema is not None:
            return {"content": json.dumps(minimal_instance(schema))}
        echo = last_user_content_text(body.get("messages"))[:500]
        return {"content": json.dumps({"answer": f"Mock reply to: {echo}"})}
    return None


#: most ``{`` positions tried per message when looking for a schema in its text (bounds the work)
MAX_SCHEMA_PROBES = 200


def _schema_in_messages(body: dict[str, Any]) -> dict[str, Any] | None:
    """A JSON Schema written into a system/developer/user message (JSON mode clients put it in
    the prompt: instructor's ``Mode.JSON``, LangChain's ``json_mode`` with a schema in the
    prompt): the first JSON object in the text that has ``properties`` or ``$defs``."""
    decoder = json.JSONDecoder()
    for m in body.get("messages") or []:
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer", "user"):
            continue
        content = m.get("content")
        texts = [content] if isinstance(content, str) else [
            p.get("text") for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str)
        ] if isinstance(content, list) else []
        for text in texts:
            pos, probes = text.find("{"), 0
            while pos != -1 and probes < MAX_SCHEMA_PROBES:
                probes += 1
                try:
                    obj, end = decoder.raw_decode(text, pos)
                except ValueError:
                    pos = text.find("{", pos + 1)
                    continue
                if isinstance(obj, dict) and ("properties" in obj or "$defs" in obj):
                    return obj
                pos = text.find("{", end)
    return None
