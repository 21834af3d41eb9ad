"""Structured output for the scripted upstream (:mod:`proxy.mock_upstream`, demo mode): a JSON
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
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["minimal_instance", "structured_reply"]

#: deepest nesting followed (a recursive ``$ref`` stops here with the smallest value of its type)
MAX_DEPTH = 12

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


def _string(schema: dict[str, Any]) -> str:
    value = _FORMATS.get(schema.get("format", ""), "mock")
    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if isinstance(lo, int) and len(value) < lo:
        value = value + "x" * (lo - len(value))
    if isinstance(hi, int) and len(value) > hi:
        value = value[:hi]
    return value


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    """The number nearest 0 among a few candidates (0, the bounds, one step inside them, their
    midpoint) that satisfies ``minimum``/``exclusiveMinimum``/``maximum``/``exclusiveMaximum``."""
    def num(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

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
        v = math.ceil(c) if integer else float(c)
        if ok(v):
            return int(v) if integer else float(v)
    return int(lo or 0) if integer else float(lo or 0)


def minimal_instance(schema: Any, root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A small JSON value valid against ``schema`` (see the module doc for the keywords
    followed). ``root``: the document local ``$ref`` pointers resolve against (default:
    ``schema``). Never raises; an unsupported schema gives ``{}``, ``"mock"``, ``0`` or ``null``
    by its ``type``."""
    if root is None:
        root = schema if isinstance(schema, dict) else {}
    schema = _resolve(schema, root)
    if schema is True or not isinstance(schema, dict):
        return {}
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            resolved = [_resolve(b, root) for b in branches]
            # null when allowed (the smallest value, and it ends recursive schemas), else the first
            pick = next((b for b in resolved if isinstance(b, dict) and b.get("type") == "null"), resolved[0])
            rest = {k: v for k, v in schema.items() if k != key}
            return minimal_instance({**rest, **pick} if isinstance(pick, dict) else pick, root, depth + 1)
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            if isinstance(part, dict):
                for k, v in part.items():
                    if k in ("properties",) and isinstance(merged.get(k), dict):
                        merged[k] = {**merged[k], **v}
                    elif k == "required" and isinstance(merged.get(k), list):
                        merged[k] = merged[k] + [r for r in v if r not in merged[k]]
                    else:
                        merged.setdefault(k, v)
        return minimal_instance(merged, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "null" if "null" in kind else (kind[0] if kind else None)
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else None
    if kind == "null" or (kind is None and depth > 0 and not schema):
        return None if kind == "null" else {}
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "array":
        n = schema.get("minItems") if isinstance(schema.get("minItems"), int) else 0
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        items = schema.get("items", {})
        if depth >= MAX_DEPTH:
            return []
        out = [minimal_instance(p, root, depth + 1) for p in prefix[:max(n, len(prefix))]]
        while len(out) < n:
            out.append(minimal_instance(items if isinstance(items, dict) else {}, root, depth + 1))
        return out
    # object (also the fallback)
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    if depth >= MAX_DEPTH:
        return {}
    return {name: minimal_instance(props.get(name, {}), root, depth + 1) for name in required}


def _last_user_text(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):
                return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""


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
    """The reply fields (for :class:`proxy.mock_upstream.Reply`) answering a request that asks
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
        return {"content": json.dumps({"answer": f"Mock reply to: {_last_user_text(body)[:500]}"})}
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
