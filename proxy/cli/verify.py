"""``veracity verify FILE``: verify answers offline, without an upstream.

Each answer goes through :func:`proxy.pipeline.verify.verify_text` under one policy (as
``POST /v1/veracity/verify`` does, without the request's key or headers) and one JSON report
per answer is printed (``{"answer_index", "veracity"}`` per line).
"""

from __future__ import annotations

import json
from typing import Any

from proxy.pipeline.correction import walked_states
from proxy.pipeline.verify import verify_text
from proxy.policy import PolicyError
from proxy.stores.budget import RequestBudget
from proxy.wire.messages import last_user_text
from verifiers import Report

__all__ = ["verify_offline"]


def verify_offline(path: str, *, policy: str = "default", policies_dir: str | None = None,
                   question: str | None = None, out: Any = None) -> int:
    """``veracity verify FILE``: verify answers without an upstream and print one JSON report
    per answer (``{"answer_index", "veracity"}`` per line). Exit status: 0 when no check
    failed, 1 when any failed, 2 for unreadable input or an unknown policy."""
    import asyncio
    import sys
    from pathlib import Path

    from proxy.policy import PolicyStore, load_file

    out = out or sys.stdout
    try:
        if policy.endswith((".yaml", ".yml")) and Path(policy).is_file():
            pol = load_file(policy)
        else:
            pol = PolicyStore(policies_dir).get(policy)
        raw = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (PolicyError, OSError) as exc:
        print(f"veracity: {exc}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:  # a binary file, or another encoding than UTF-8
        print(f"veracity: {path}: not UTF-8 text ({exc.reason} at byte {exc.start})", file=sys.stderr)
        return 2
    items = _offline_items(raw, question)
    if not items:
        print("veracity: no answer found in the input", file=sys.stderr)
        return 2

    async def go() -> list[Report]:
        from proxy.gateway import VerificationResources

        reports = []
        resources = VerificationResources()  # caches and sandboxes shared by the answers of this run
        try:
            for q, answer in items:
                reports.append(await verify_text(pol, q, answer, RequestBudget.from_policy(pol.budgets.request),
                                                 resources=resources))
        finally:
            await resources.aclose()
        return reports

    failed = False
    for i, rep in enumerate(asyncio.run(go())):
        rep.policy = pol.name
        rep.states = walked_states(rep)
        failed |= rep.status == "failed"
        print(json.dumps({"answer_index": i, "veracity": rep.to_dict()}, ensure_ascii=False, default=str), file=out)
    return 1 if failed else 0


def _offline_items(raw: str, question: str | None) -> list[tuple[str | None, str]]:
    """(question, answer) pairs from a JSON object/list, JSONL, or plain text."""
    def item(obj: Any) -> tuple[str | None, str] | None:
        if not isinstance(obj, dict) or not isinstance(obj.get("answer"), str):
            return None
        q = obj.get("question") if isinstance(obj.get("question"), str) else last_user_text(obj.get("messages"))
        return q, obj["answer"]

    text = raw.strip()
    try:
        data = json.loads(text)
    except RecursionError:  # JSON nested ~1,000 levels deep: verify it as plain text
        return [(question, raw)] if text else []
    except ValueError:
        data = None
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            parsed = [json.loads(ln) for ln in lines]
        except (ValueError, RecursionError):
            parsed = None
        if parsed and all(isinstance(p, dict) for p in parsed):
            return [x for x in (item(p) for p in parsed) if x]
        return [(question, raw)] if text else []
    if isinstance(data, list):
        return [x for x in (item(p) for p in data) if x]
    one = item(data)
    return [one] if one else []
