"""Which sandbox runs may grant a ``pass`` (docs/design.md "A verdict rests on what the checked
content cannot write"; docs/security.md): none whose harness framing is missing or forged, that ended
early or abnormally, that reaches raw memory, that holds bidirectional control characters, or
whose code writes how its own results are judged. Such a run's passes become ``unknown``.
"""

from __future__ import annotations

import re
from typing import Any

from verifiers._types import Check
from verifiers.code._harness import legacy_records
from verifiers.code._state import _Plan
from verifiers.code._static import self_judging
from verifiers.sandbox import Result


#: What the harness's audit hook cannot see: numpy's doors to raw memory (an array over any
#: address). Code naming them gets no pass from the sandbox run (see _harness's docstring).
_RAW_MEMORY = re.compile(r"\b(__array_interface__|__array_struct__|as_strided|ctypeslib)\b")

#: Bidirectional embeddings, overrides and isolates (not the LRM/RLM marks): in a string or a
#: comment they reorder what the reader sees of the code, so the run checks another program than
#: the one shown (Boucher & Anderson, "Trojan Source", CVE-2021-42574). Such code gets no pass.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _distrust(p: _Plan, res: Result | None, obs: Any) -> str | None:
    """Why no tier-3 pass of this run may stand (docs/design.md "A verdict rests on what the
    checked content cannot write"), or None: the harness's framing
    is missing/forged, the code tried to reach the checker, the run ended early (``sys.exit``,
    ``os._exit``, a signal, a limit), the code names what the harness cannot watch, or it
    writes how its own results are judged (:func:`~verifiers.code._static.self_judging`)."""
    if res is None or obs is None:
        return None
    src = "\n".join(b.code for b in p.runnable)
    m = _RAW_MEMORY.search(src)
    if m:
        return f"the code reaches raw memory ({m.group(1)}), which the sandbox harness cannot watch"
    m = _BIDI.search(src)
    if m:
        return (f"the code holds a bidirectional control character (U+{ord(m.group(0)):04X}): it displays "
                "otherwise than it runs (Trojan Source, CVE-2021-42574)")
    why = obs.untrusted()
    if why is not None:
        return why
    for b in p.runnable:
        why = self_judging(b.tree)
        if why is not None:
            return why
    exits = [r for r in legacy_records(obs, {}, {}) if r.get("status") == "exit"]
    if exits:
        return "the program ended itself (sys.exit) before all of its code and examples ran"
    if res.killed_by != "none" or res.exit_code != 0:
        return f"the run did not end normally (exit code {res.exit_code}, {res.killed_by})"
    return None


def _void_passes(checks: list[Check], why: str) -> None:
    """Turn every ``pass`` among ``checks`` into ``unknown`` saying why (failures stay)."""
    for c in checks:
        if c.outcome == "pass":
            c.outcome, c.confidence = "unknown", 0.0
            c.note = f"not taken as verified: {why}"
            c.evidence["reason"] = "untrusted run"
            c.evidence["untrusted"] = why
