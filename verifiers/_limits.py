"""Reading limits made visible: the ``unknown`` check a verifier adds when an answer is longer
than what it reads ("nothing is silently unverified": what was not read is reported).

Every verifier bounds its work on untrusted text (the arithmetic verifier reads the first
``MAX_CHARS`` characters, the citation extractor ``MAX_TEXT``, the risk scan ``MAX_SCAN_CHARS``,
...). A bound is fine; silence is not: an answer whose wrong claim sits past the bound must not
come out ``skipped`` with ``checks: []`` as if there were nothing to check. So wherever a
verifier cuts the answer it adds :func:`unread_check`: one ``unknown`` check naming the
verifier, the limit (its name and value) and how much was read, with ``evidence["kind"] ==
"truncated"``. An ``unknown`` check makes the report at least ``unverified`` (never
``skipped``, never ``passed`` on its own), and the gateway counts these checks in
``veracity_truncated_verifications_total{verifier}``.
"""

from __future__ import annotations

from verifiers._types import Check

__all__ = ["TRUNCATED", "unread_check", "is_truncation"]

#: ``Check.evidence["kind"]`` of a check that says part of the answer was not read.
TRUNCATED = "truncated"


def unread_check(verifier: str, *, limit: str, limit_value: int, checked: int, total: int,
                 unit: str = "characters", reader: str | None = None) -> Check:
    """The ``unknown`` check saying ``verifier`` read only part of the answer.

    Args:
        verifier: the verifier that cut (``arithmetic``, ``citations``, ``facts``, ``planner``,
            ``risk``, ...), the check's ``verifier``.
        limit: the limit's name as the code spells it (``MAX_CHARS``), so a reader can find it.
        limit_value: the limit's value, in ``unit``.
        checked: how much was read (``unit``), usually ``limit_value``.
        total: how long the input was (``unit``).
        unit: ``characters`` (the default) or another count (``code blocks``, ``references``).
        reader: who read the prefix, for the note (default ``the <verifier> verifier``).

    Returns:
        ``Check(outcome="unknown", confidence=0.0, span=(checked, total))`` with ``evidence``
        ``{"kind": "truncated", "limit": limit, "limit_value": ..., "checked": ..., "total":
        ..., "unit": ...}``; the span is only meaningful for ``characters``.
    """
    note = (f"the answer is longer than {reader or f'the {verifier} verifier'} reads: checked the first "
            f"{checked:,} of {total:,} {unit} ({limit} = {limit_value:,}); the rest is unchecked")
    return Check(verifier=verifier, claim="", outcome="unknown", confidence=0.0,
                 span=(checked, total) if unit == "characters" else None,
                 evidence={"kind": TRUNCATED, "limit": limit, "limit_value": limit_value, "checked": checked,
                           "total": total, "unit": unit},
                 note=note)


def is_truncation(check: Check) -> bool:
    """True when ``check`` is a :func:`unread_check` (``evidence["kind"] == "truncated"``)."""
    ev = check.evidence
    return isinstance(ev, dict) and ev.get("kind") == TRUNCATED
