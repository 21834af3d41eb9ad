"""The entry points :func:`check` and :func:`warm_up`: one reading of the answer (``_read``), the
second readings of its failures (``_ambiguous``), the consistency and coverage checks
(``_consistency``, ``_coverage``), and the limits :data:`MAX_CHARS` and :data:`BUDGET_MS`."""

from __future__ import annotations

from verifiers._limits import unread_check
from verifiers._types import Check
from verifiers.arithmetic import _consistency
from verifiers.arithmetic._claims import VERIFIER
from verifiers.arithmetic._confirm import second_value
from verifiers.arithmetic._work import Work
from verifiers.arithmetic._ambiguous import _bitwise_xor, _other_grouping, _other_locale, _right_to_left
from verifiers.arithmetic._coverage import _unchecked_results, _unread_statements
from verifiers.arithmetic._read import MAX_CLAIMS, _check


#: characters of an answer read (the rest: one ``unknown`` check says so)
MAX_CHARS = 60_000
#: default work budget of one :func:`check` call, in milliseconds of the reference machine
#: (counted in operations, not wall time: ``_work``; checked between claims)
BUDGET_MS = 250.0


def warm_up() -> None:
    """Build the pint unit registry (~0.5-1 s once) and import SymPy and its parser (~0.5 s once) now, instead
    of inside the first request that states a unit conversion or an identity with symbols (a
    first import inside a request would use up its time budget). Call it at gateway start-up."""
    from verifiers.arithmetic._units import _registry

    _registry()
    check("\\[ (a+b)^2 = a^2 + 2ab + b^2 \\]", budget_ms=10_000)
    second_value("2 ** 10 + sqrt 2")  # SymPy's parser, for the second evaluation of a failure


def check(answer: str, question: str | None = None, *, budget_ms: float = BUDGET_MS) -> list[Check]:
    """Verify the arithmetic claims of ``answer`` (see the module docstring for the syntax,
    the tolerance rule and the limits). ``question`` (the user's message) adds the
    question/answer link claim when the question is itself arithmetic.

    Returns one ``Check`` per claim, in text order (calculator notes first). ``budget_ms``
    bounds the work, counted in operations at fixed costs (``_work``: milliseconds of the
    reference machine, never the wall clock, so the same answer gives the same checks under any
    load): past it, the rest of the answer is left unchecked and one ``unknown`` check
    (``evidence.kind == "budget"``) says so, and a question/answer link that would fail is
    ``unknown`` (the claim that states the answer may be in the unread rest). Never raises on
    untrusted text: a fault of the verifier itself is reported as one ``error`` check.
    """
    if not isinstance(answer, str) or not answer.strip():
        return []
    text = answer[:MAX_CHARS]
    try:
        checks = _check(text, question if isinstance(question, str) else None, Work.of_ms(budget_ms))
        _other_locale(text, checks)
        _other_grouping(checks)
        _bitwise_xor(checks)
        _right_to_left(text, checks)
    except RecursionError:
        return [Check(verifier=VERIFIER, claim="", outcome="unknown", confidence=0.5,
                      note="input nested too deeply to check")]
    except Exception as exc:  # the verifier's own fault: report, never crash the gateway
        return [Check(verifier=VERIFIER, claim="", outcome="error", confidence=0.0,
                      evidence={"error": type(exc).__name__}, note=f"arithmetic verifier failed: {exc}")]
    checks += _consistency.check(text, question)  # docs/arithmetic.md: defined with one value, used with another
    checks += _unread_statements(text, checks)
    checks += _unchecked_results(text, question, checks)
    if len(answer) > MAX_CHARS:  # say the rest was not read, never a silent `skipped`
        return checks[:MAX_CLAIMS - 1] + [unread_check(VERIFIER, limit="MAX_CHARS", limit_value=MAX_CHARS,
                                                       checked=MAX_CHARS, total=len(answer))]
    return checks[:MAX_CLAIMS]
