"""Correction and synthesis text of the facts verifier (docs/facts.md, the report's ``sources[]``).

Both are templates, not generated: the honest "could not be confirmed" note is a fixed sentence
(docs/facts.md: "a template, not generated text"), and the re-ask quotes the sources verbatim
with their ``[n]`` numbers so the corrected answer can cite them and the report's ``sources``
says what each number is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from verifiers._types import Check

__all__ = ["unconfirmed_note", "sources_prompt"]

#: The unconfirmed-claims note (a policy option appends it to the answer).
UNCONFIRMED_TEMPLATE = "Could not be confirmed from the available sources: {claims}."


def unconfirmed_note(claims: Sequence[str]) -> str:
    """``"Could not be confirmed from the available sources: "`` + the claims quoted and joined
    by ``"; "`` + ``"."``; ``""`` for no claims. Each claim is shown at most 200 characters,
    without its ``[n]`` source markers (a quoted "… [1]" would read as if source 1 confirmed
    it) and its trailing full stop."""
    from verifiers.facts._compare import strip_citation_markers

    items = []
    for c in claims:
        t = " ".join(strip_citation_markers(str(c)).split()).rstrip(".")
        if t:
            items.append(f"\u201c{t[:200]}\u201d")
    return UNCONFIRMED_TEMPLATE.format(claims="; ".join(items)) if items else ""


def _fmt_source(s: Mapping[str, Any]) -> str:
    where = s.get("url") or s.get("doc_id") or s.get("source") or ""
    title = s.get("title") or ""
    date = f", {s['published']}" if s.get("published") else ""
    return f"[{s['n']}] {title}{' — ' if title and where else ''}{where}{date}"


def sources_prompt(checks: Sequence[Check], sources: Sequence[Mapping[str, Any]]) -> str:
    """The evidence part of the correction re-ask for failed facts.

    Lists every failed ``facts`` check: the claim, what the sources say (``expected``) and the
    passages with their ``[n]`` numbers (the text the sources returned, quoted); an
    ``ungrounded`` one (rule of the grounding tier) with the numbers and names no document
    holds; then the numbered sources; then asks the model to correct the claims using only these sources and to
    cite each corrected fact as ``[n]``. ``""`` when no facts check failed.
    """
    failed = [c for c in checks if c.verifier == "facts" and c.outcome == "fail"]
    if not failed:
        return ""
    ungrounded = [c for c in failed if (c.evidence or {}).get("rule") == "ungrounded"]
    contradicted = [c for c in failed if c not in ungrounded]
    lines = ["These statements in your answer are contradicted by the sources:"] if contradicted else []
    cited: set[int] = set()
    for c in contradicted:
        lines.append(f"- You wrote: \u201c{c.claim}\u201d")
        if c.expected not in (None, ""):
            lines.append(f"  The sources say: {c.expected}")
        for p in (c.evidence or {}).get("passages") or []:
            n = p.get("n")
            if n is None:
                continue
            cited.add(int(n))
            text = p.get("quote") or p.get("text") or ""
            lines.append(f"  [{n}] \u201c{' '.join(str(text).split())[:400]}\u201d")
    if ungrounded:
        lines.append("These statements in your answer state what none of the documents contains:")
        for c in ungrounded:
            lines.append(f"- You wrote: \u201c{c.claim}\u201d (not in any document: {c.found})")
    numbered = [s for s in sources if int(s.get("n", 0)) in cited]
    if numbered:
        lines.append("Sources:")
        lines.extend(_fmt_source(s) for s in numbered)
    lines.append("Correct these statements using only the sources above, and cite the source of each corrected "
                 "fact as [n]" + ("; remove or qualify what no document states" if ungrounded else "")
                 + ". Keep the rest of your answer unchanged.")
    return "\n".join(lines)
