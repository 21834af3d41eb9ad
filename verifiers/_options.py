"""Typed options of each verifier that :func:`verifiers.run.run` starts.

One dataclass per verifier, named after what its entry point takes (``verifiers.arithmetic.check``,
``verifiers.code.acheck``, ``verifiers.citations.acheck``, ``verifiers.facts.acheck``,
``verifiers.planner.acheck``), plus ``timeout_s``: that verifier's own deadline inside the
request's verification deadline. :meth:`VerifierOptions.of` reads the mapping form that library
callers and policies write (``{"timeout_ms": 2000, "budget_ms": 500}``): the keys the class names
are taken, ``timeout_ms`` becomes ``timeout_s``, any other key is ignored (a policy's free-form
``options`` may hold keys a verifier does not take).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeVar

from verifiers._types import Check

__all__ = ["VerifierOptions", "ArithmeticOptions", "CodeOptions", "CitationsOptions", "FactsOptions",
           "PlannerOptions", "OPTIONS", "options_of", "DEFAULT_TIMEOUT_S"]

#: A verifier's own deadline (s) when its options do not set one.
DEFAULT_TIMEOUT_S = 10.0

_O = TypeVar("_O", bound="VerifierOptions")


@dataclass(slots=True, kw_only=True)
class VerifierOptions:
    """What every verifier takes: ``timeout_s``, its own deadline in seconds (the request's
    verification deadline still bounds it)."""

    timeout_s: float = DEFAULT_TIMEOUT_S

    _names: ClassVar[dict[type, frozenset[str]]] = {}

    @classmethod
    def of(cls: type[_O], options: Mapping[str, Any] | VerifierOptions | None) -> _O:
        """``options`` as this class: an instance of it as is; a mapping by its keys
        (``timeout_s``, else ``timeout_ms`` / 1000, else :data:`DEFAULT_TIMEOUT_S`; the other
        keys this class names; the rest ignored); None: the defaults. Raises TypeError for
        options of another verifier's class."""
        if isinstance(options, cls):
            return options
        if isinstance(options, VerifierOptions):
            raise TypeError(f"{type(options).__name__} given where {cls.__name__} is expected")
        m = options or {}
        names = cls._names.get(cls)
        if names is None:
            names = cls._names[cls] = frozenset(f.name for f in fields(cls)) - {"timeout_s"}
        kw = {k: v for k, v in m.items() if k in names}
        if "timeout_s" in m:
            kw["timeout_s"] = float(m["timeout_s"])
        elif "timeout_ms" in m:
            kw["timeout_s"] = float(m["timeout_ms"]) / 1000.0
        return cls(**kw)


@dataclass(slots=True, kw_only=True)
class ArithmeticOptions(VerifierOptions):
    """``verifiers.arithmetic.check``: ``budget_ms``, its work budget in milliseconds of the
    reference machine, counted in operations, not wall time (``verifiers.arithmetic._work``;
    None: the verifier's own default, ``verifiers.arithmetic.BUDGET_MS``)."""

    budget_ms: float | None = None


@dataclass(slots=True, kw_only=True)
class CodeOptions(VerifierOptions):
    """``verifiers.code.acheck``: ``sandbox``, a :class:`verifiers.sandbox.Sandbox`, a backend
    name, or a spec ``{"backend": ..., "limits": {...}}`` (None: ``auto``); sandboxes made from
    a spec are kept per (backend, limits) for the process."""

    sandbox: Any = None


@dataclass(slots=True, kw_only=True)
class CitationsOptions(VerifierOptions):
    """``verifiers.citations.acheck``: ``sources`` (the bibliographic sources config or
    object), ``relevance`` (False, True or ``{"fail_unsupported": bool}``), ``model`` (the
    verifier model, for relevance), ``deadline`` (s; None: 0.8 x ``timeout_s``, so the checks
    done so far come back instead of being cancelled)."""

    sources: Any = None
    relevance: bool | dict[str, Any] = False
    model: Any = None
    deadline: float | None = None


@dataclass(slots=True, kw_only=True)
class FactsOptions(VerifierOptions):
    """``verifiers.facts.acheck``: ``backends`` (backend objects, or a config dict for
    ``verifiers.facts.backends.make_backends``; None: the request's context only),
    ``context_messages`` (the client's messages, for the ``context`` backend), ``model`` (the
    verifier model; None: rule verdicts), ``max_claims``, ``max_rounds``, ``k`` (passages per
    claim), ``weights`` (per backend), ``cache`` (a verdict cache), ``grounding`` (the answer
    must be grounded in the request's documents)."""

    backends: Any = None
    context_messages: list[Any] | None = None
    model: Any = None
    max_claims: int = 8
    max_rounds: int = 3
    k: int = 5
    weights: Mapping[str, float] | None = None
    cache: Any = None
    grounding: bool = False


@dataclass(slots=True, kw_only=True)
class PlannerOptions(VerifierOptions):
    """``verifiers.planner.acheck`` (AMTFV): ``when`` model-written plans are asked (``never``
    | ``unexplained`` | ``high_risk`` | ``always``), ``high_risk`` (the risk from which
    ``high_risk`` asks), ``risk_score`` (this answer's), ``max_steps``, ``templates`` (template
    plans on), ``model`` (the verifier model), the tools' inputs (``sandbox`` as
    :class:`CodeOptions`, ``citation_sources``, ``search_facts``: ``await f(claim) -> dict``),
    and ``rule_checks`` (the rule-based verifiers' checks, set by :func:`verifiers.run.run`)."""

    when: str = "never"
    high_risk: float = 0.7
    risk_score: float = 0.0
    max_steps: int = 6
    templates: bool = True
    model: Any = None
    sandbox: Any = None
    citation_sources: Any = None
    search_facts: Callable[[str], Awaitable[dict[str, Any]]] | None = None
    rule_checks: tuple[Check, ...] = ()


#: Verifier name -> its options class.
OPTIONS: dict[str, type[VerifierOptions]] = {
    "arithmetic": ArithmeticOptions,
    "code": CodeOptions,
    "citations": CitationsOptions,
    "facts": FactsOptions,
    "planner": PlannerOptions,
}


def options_of(options: Mapping[str, Mapping[str, Any] | VerifierOptions]) -> dict[str, VerifierOptions]:
    """Per-verifier options as their classes (:data:`OPTIONS`; an unknown name keeps the
    base :class:`VerifierOptions`, its timeout only)."""
    return {name: OPTIONS.get(name, VerifierOptions).of(o) for name, o in options.items()}
