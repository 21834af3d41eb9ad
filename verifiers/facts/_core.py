"""The facts loop: claims -> queries -> retrieval -> credibility -> verdict, up to ``max_rounds``
(docs/facts.md steps 2 and 4: later rounds ask new queries; the loop stops when confident, when
queries repeat, or when the budget or deadline is spent). The follow-up questions are after
Self-Ask (Press et al. 2022, arXiv:2210.03350).

Per claim, concurrently (:func:`acheck`):

1. **Round queries.** Round 1 searches the claim itself (cheap and, for the ``context``
   backend, the best query). Later rounds use the verifier model's verification questions from
   the last verdict (FIRE: one call decides or names what to look for), else a ``queries`` call,
   else deterministic rewrites (:func:`fallback_queries`: key terms, then the subject without
   its quantities). Queries already asked are never repeated: nothing new to ask stops the loop.
2. **Retrieval** over every backend concurrently per query; a backend that raises
   (:class:`SourceUnavailable`, timeout, anything) is noted in ``unavailable`` and gives no
   passage -- never evidence.
3. **Ranking**: key-term overlap with the claim x credibility weight x recency
   (:mod:`verifiers.facts._credibility`); the top ``2k`` passages are judged.
4. **Deterministic tier** (:mod:`verifiers.facts._compare`) before any model call. Its verdict
   stands when the agreeing independent sources give confidence >= :data:`DET_MIN_CONFIDENCE`
   and no passage says the opposite.
5. **Grounding** (``grounding=True``, the ``rag`` policy): a claim the deterministic tier left
   open whose number, date or name no supplied document contains fails as ``ungrounded``
   (:mod:`verifiers.facts._grounding`), the closest passage as evidence; no model call.
6. **Model tier** (a :class:`ChatModel` given): a ``verdict`` call over the numbered passages.
   A quote not in its cited passage -> ``not_enough_info``. ``supported`` stands only when the
   rules confirm the cited passage states the claim (:func:`confirm_support`: its numbers and
   names there, no denial, doubt or attribution around them; basis ``passage``), a passage that
   denies it fails the claim, anything else is ``unknown`` (docs/design.md "Asymmetric trust").
   ``refuted`` may fail the claim (basis ``model``). A decided verdict with confidence >=
   :data:`CONFIDENT` ends the loop; a model that gives no valid verdict leaves the claim
   ``unknown`` with its failure as the note.
7. **Stop** when confident, when queries repeat, when a round brought no new passage, after
   ``max_rounds``, or when the deadline or the model budget is spent (``unknown``).

Checks: supported -> ``pass``, refuted -> ``fail`` (``expected``: what the source says;
``evidence.passages``: the passages with their ``[n]``), ungrounded -> ``fail`` (rule
``ungrounded``), conflicting / not_enough_info -> ``unknown`` with the reason; each check's
``basis`` says what it rests on.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verifiers._limits import TRUNCATED, unread_check
from verifiers._types import Check
from verifiers.facts._cache import VerdictCache, cache_key
from verifiers.facts._claims import ANSWER_CHARS, Claim, find_claims, model_claims
from verifiers.facts._compare import MIN_KEYS, judge_passage
from verifiers.facts._context import ContextBackend
from verifiers.facts._credibility import agreement, recency_factor, source_key, weight_of
from verifiers.facts._grounding import Anchor, Documents, fold, missing
from verifiers.facts._compare import confirm_support
from verifiers.facts._judge import ask_queries, ask_verdict, quote_in
from verifiers.facts import _offload
from verifiers.facts._passage import Passage, SearchBackend, SourceUnavailable
from verifiers.facts._text import STOP, display_order, entities, is_time_bound, key_set, norm_claim, numbers, words
from verifiers.model import ChatModel

__all__ = ["acheck", "FactsOutcome", "fallback_queries", "DET_MIN_CONFIDENCE", "CONFIDENT"]

#: Confidence one full-weight source gives a deterministic verdict (the tier's measured
#: precision on held-out flags, rounded down: bench/results/facts.md).
DET_BASE = 0.9
#: A deterministic verdict stands at or above this agreement (one context passage: 0.9; one
#: default-weight web page: 0.54 -> not enough alone).
DET_MIN_CONFIDENCE = 0.6
#: A model verdict at or above this confidence ends the loop.
CONFIDENT = 0.7
#: Characters of a passage kept in a check's evidence.
EVIDENCE_CHARS = 400
_NOTE_MAX = 300
#: With a question, a claim of fewer key terms than this is a fragment of an answer ("Francis
#: Kinloch Huger"): it is judged with the question as its subject, and never "contained".
SHORT_KEYS = MIN_KEYS + 2
#: What makes a short claim a clause rather than a bare answer phrase: a lower-case finite-verb
#: cue (an auxiliary, a past form in -ed, a third-person -s/-es form) -- "The company is based in
#: Lyon." -- or CJK text. "Francis Kinloch Huger", "San Antonio Spurs.", "Dayton's department
#: store." have none: a passage that mentions them does not state that they answer the question.
_CLAUSE_CUE = re.compile(r"(?<![\w'])(?:is|are|was|were|be|been|being|has|have|had|does|do|did|can|could|will|"
                         r"would|shall|should|may|might|must|[a-z]{2,}ed|[a-z]{2,}[^s\W]s)(?![\w'])"
                         r"|[\u3400-\u9fff]")


def is_clause(text: str) -> bool:
    """True when ``text`` reads as a clause (it has a verb cue, :data:`_CLAUSE_CUE`), not as a
    bare noun phrase such as a name given as an answer."""
    return _CLAUSE_CUE.search(text) is not None


@dataclass(slots=True)
class FactsOutcome:
    """What :func:`acheck` returns.

    ``checks``: one :class:`Check` per claim (``verifier="facts"``); ``sources``: the passages
    cited as evidence, ``{"n", "title", "url", "doc_id", "source", "domain", "published"}``
    numbered ``[n]`` in citation order (the ``n`` in each check's ``evidence.passages``);
    ``unconfirmed``: claims left ``unknown``; ``searches``: backend calls made; ``claims``: the
    claims checked; ``model_calls``: verifier-model calls made by this check; ``unavailable``:
    backend name -> why it could not answer; ``rounds``: the most rounds any claim took.
    """

    checks: list[Check] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    searches: int = 0
    claims: list[Claim] = field(default_factory=list)
    model_calls: int = 0
    unavailable: dict[str, str] = field(default_factory=dict)
    rounds: int = 0


@dataclass(slots=True)
class _Result:
    verdict: str  # supported | refuted | conflicting | not_enough_info | error
    method: str = "deterministic"
    confidence: float = 0.0
    passages: list[tuple[Passage, str]] = field(default_factory=list)  # (passage, quote)
    expected: Any = None
    found: Any = None
    note: str = ""
    rule: str = ""
    basis: str = "passage"  # what the verdict rests on (verifiers._types.BASES)
    queries: list[str] = field(default_factory=list)
    rounds: int = 0
    cacheable: bool = True
    cached: bool = False


class _Run:
    """Shared state of one :func:`acheck` call: backends, search memo, counters, deadline."""

    def __init__(self, backends: Sequence[SearchBackend], model: ChatModel | None, k: int,
                 weights: Mapping[str, float] | None, t_end: float, docs: Documents | None = None,
                 answer: str = "") -> None:
        self.backends = list(backends)
        self.docs = docs
        self.answer = answer
        self.model = model
        self.k = k
        self.weights = weights
        self.t_end = t_end
        self.searches = 0
        self.unavailable: dict[str, str] = {}
        self._memo: dict[tuple[int, str], asyncio.Future] = {}

    def remaining(self) -> float:
        return self.t_end - time.monotonic()

    async def _one(self, i: int, query: str) -> list[Passage]:
        b = self.backends[i]
        name = str(getattr(b, "name", f"backend{i}"))
        self.searches += 1
        try:
            got = await asyncio.wait_for(b.search(query, self.k), max(0.01, self.remaining()))
            return [p for p in got if isinstance(p, Passage) and p.text.strip()]
        except SourceUnavailable as exc:
            self.unavailable[name] = str(exc)[:200]
        except asyncio.TimeoutError:
            self.unavailable[name] = f"{name}: no answer before the verification deadline"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a backend bug is an unavailable source, never evidence
            self.unavailable[name] = f"{name}: {type(exc).__name__}"
        return []

    async def search(self, query: str) -> list[Passage]:
        """Every backend at once; each (backend, query) asked once per run."""
        futs = []
        for i in range(len(self.backends)):
            key = (i, norm_claim(query))
            if key not in self._memo:
                self._memo[key] = asyncio.ensure_future(self._one(i, query))
            futs.append(self._memo[key])
        out: list[Passage] = []
        for res in await asyncio.gather(*futs, return_exceptions=True):
            if isinstance(res, list):
                out.extend(res)
        return out


def fallback_queries(claim: Claim, round_no: int) -> list[str]:
    """Deterministic queries for round ``round_no`` (0-based): the claim itself; then its
    entities, quantities and content words; then the subject without the quantities."""
    text = claim.context or claim.text
    if round_no == 0:
        return [text]
    ents = [e for e, _, _ in entities(text)]
    content = [w for w in words(text) if w not in STOP and not w[0].isdigit() and len(w) > 2]
    if round_no == 1:
        terms = ents + [q.text for q in numbers(text)] + content
    else:
        low = {e.lower() for e in ents}
        terms = ents + [w for w in content if w not in " ".join(low)][:6]
    seen: list[str] = []
    for t in terms:
        if t.lower() not in (s.lower() for s in seen):
            seen.append(t)
    q = " ".join(seen[:12])
    return [q] if q else []


def _rank(claim: Claim, pool: list[Passage], weights: Mapping[str, float] | None, limit: int) -> list[Passage]:
    ck = key_set(claim.context or claim.text)
    tb = is_time_bound(claim.text)

    def score(p: Passage) -> float:
        ov = len(ck & key_set(p.text + " " + p.title)) / max(1, len(ck))
        return ov * weight_of(p, weights) * recency_factor(p, tb)

    return sorted(pool, key=score, reverse=True)[:limit]


def _deterministic(claim: Claim, passages: list[Passage], weights: Mapping[str, float] | None) -> _Result | None:
    tb = is_time_bound(claim.text)
    sup: list[tuple[Passage, Any]] = []
    ref: list[tuple[Passage, Any]] = []
    for i, p in enumerate(passages):
        # the rest of the same source (a document cut into passages) can hold the claim's value
        others = "\n".join(q.text for j, q in enumerate(passages) if j != i and source_key(q) == source_key(p))
        pv = judge_passage(claim.text, p.text, context=claim.context, elsewhere=others)
        if claim.context and pv.verdict == "not_enough_info":
            # a short claim read with the question as its subject may still be a whole sentence
            # the passage states word for word, or repeats to deny: only those two verdicts count,
            # and support only for a clause -- a bare phrase the passage merely mentions ("Francis
            # Kinloch Huger", HaluEval's hallucinated answers) is not stated to answer the question
            alone = judge_passage(claim.text, p.text, elsewhere=others)
            if (alone.verdict == "supported" and is_clause(claim.text)) or alone.rule == "denial":
                pv = alone
        if pv.verdict == "supported":
            sup.append((p, pv))
        elif pv.verdict == "refuted" and not p.truncated:  # the unread rest may state the claim's value
            ref.append((p, pv))
    if sup and ref:
        return _Result("conflicting", confidence=0.5, passages=[(p, v.quote) for p, v in (ref[:2] + sup[:2])],
                       note="the passages disagree: " + ref[0][1].note)
    for group, verdict in ((ref, "refuted"), (sup, "supported")):
        if not group:
            continue
        conf = agreement(((source_key(p), weight_of(p, weights) * recency_factor(p, tb)) for p, _ in group), DET_BASE)
        if conf < DET_MIN_CONFIDENCE:
            return _Result("not_enough_info", confidence=conf, passages=[(p, v.quote) for p, v in group[:2]],
                           note=f"only low-credibility sources: {group[0][1].note}")
        p0, v0 = group[0]
        return _Result(verdict, "deterministic", conf, [(p, v.quote) for p, v in group[:3]],
                       expected=v0.expected if verdict == "refuted" else v0.quote,
                       found=v0.found if verdict == "refuted" else claim.text, note=v0.note, rule=v0.rule)
    return None


def _rank_and_judge(claim: Claim, pool: list[Passage], weights: Mapping[str, float] | None,
                    limit: int) -> tuple[list[Passage], _Result | None]:
    """:func:`_rank`, then :func:`_deterministic` over the ranked passages: the CPU work of one
    round, as one step for :func:`verifiers.facts._offload.run` (a worker process)."""
    ranked = _rank(claim, pool, weights, limit)
    return ranked, (_deterministic(claim, ranked, weights) if ranked else None)


async def _verify(claim: Claim, run: _Run, max_rounds: int, cache: VerdictCache | None) -> _Result:
    key = (cache_key(claim.context or claim.text, run.backends,
                     {"weights": dict(run.weights or {}), "model": run.model is not None,
                      "grounding": run.docs is not None})
           if cache is not None else "")
    if cache is not None:
        hit = await cache.get(key)
        if hit:
            return _reconfirmed(claim, _from_cache(hit))
    miss = _missing_anchors(claim, run)
    pool: dict[tuple, Passage] = {}
    asked: list[str] = []
    gaps: list[str] = []
    last: _Result | None = None
    rounds = 0
    stop = ""
    for r in range(max(1, max_rounds)):
        if run.remaining() <= 0:
            stop = "the verification deadline passed"
            break
        queries = await _queries_for(claim, r, asked, gaps, run)
        new = [q for q in dict.fromkeys(q.strip() for q in queries if q.strip())
               if norm_claim(q) not in {norm_claim(a) for a in asked}][:3]
        if not new:
            stop = "no new query to ask"
            break
        asked.extend(new)
        rounds = r + 1
        fresh = 0
        for got in await asyncio.gather(*(run.search(q) for q in new)):
            for p in got:
                pk = (p.source, p.doc_id or p.url or p.title, p.text[:200])
                if pk not in pool:
                    pool[pk] = p
                    fresh += 1
        if not fresh and r > 0:
            stop = "the new queries found no new passage"
            break
        passages = list(pool.values())
        ranked, det = await _offload.run(_rank_and_judge, claim, passages, dict(run.weights or {}) or None,
                                         max(2, 2 * run.k), size=sum(len(p.text) for p in passages))
        if det is not None and det.verdict in ("supported", "refuted"):
            last = det
            break
        if miss:  # a number, date or name no supplied document contains: ungrounded
            last = _ungrounded(claim, miss, ranked or _closest(claim, run))
            break
        if not ranked:
            last = _Result("not_enough_info", note="no passage found")
            continue
        if run.model is None:
            last = det or _Result("not_enough_info", note="no passage states or contradicts the claim")
            continue
        if run.remaining() <= 0:
            stop = "the verification deadline passed"
            break
        try:
            ans = await asyncio.wait_for(ask_verdict(run.model, claim.text, ranked,
                                                     claim.context if claim.context else None),
                                         max(0.01, run.remaining()))
        except asyncio.TimeoutError:
            stop = "the verification deadline passed"
            break
        if ans.value is None:  # the deterministic tier left it open and the model gave no verdict
            last = _Result("not_enough_info", "model", passages=(det.passages if det else []),
                           note=f"verifier model failed: {ans.error}" if not ans.unavailable
                           else f"verifier model {ans.error}", basis="model", cacheable=False)
            break
        last = _model_result(claim, ans.value, ranked)
        if last.verdict in ("supported", "refuted") and last.confidence >= CONFIDENT:
            break
        gaps = [q for q in ans.value.questions if q.strip()]
    if last is None:
        last = _Result("not_enough_info", note=stop or "no passage found")
    elif stop and last.verdict not in ("supported", "refuted", "error"):
        last.note = f"{last.note}; stopped: {stop}"[:_NOTE_MAX]
    last.queries = asked
    last.rounds = rounds
    if "deadline" in stop:
        last.cacheable = False
    cut = sorted({p.source for p in pool.values() if p.truncated})
    if cut and last.verdict not in ("supported", "refuted"):
        last.note = f"{last.note}; read in part (a result over the size bound): {', '.join(cut)}"[:_NOTE_MAX]
    if run.unavailable:
        last.cacheable = False
        if last.verdict not in ("supported", "refuted"):
            last.note = f"{last.note}; unavailable: {', '.join(sorted(run.unavailable))}"[:_NOTE_MAX]
    if cache is not None and last.cacheable and last.verdict != "error":
        await cache.set(key, _to_cache(last))
    return last


def _missing_anchors(claim: Claim, run: _Run) -> list[Anchor]:
    """Under grounding, the anchors of the claim no supplied document contains. A model-written
    claim counts only the anchors the answer itself states (the model may not invent what
    fails)."""
    if run.docs is None:
        return []
    miss = missing(claim.text, run.docs)
    if claim.origin != "sentence" and miss:
        folded = fold(run.answer)
        anums = numbers(run.answer)
        miss = [a for a in miss if (a.quantity is not None and any(a.quantity.rounds_to(n) for n in anums))
                or (a.quantity is None and fold(a.text) in folded)]
    return miss


def _closest(claim: Claim, run: _Run) -> list[Passage]:
    """The supplied document passage sharing most key terms with the claim (the first one when
    none shares any): the evidence of an ungrounded claim the search found nothing for."""
    pool = [p for b in run.backends if isinstance(b, ContextBackend) for p in b.passages]
    ck = key_set(claim.text)
    return sorted(pool, key=lambda p: -len(ck & key_set(p.text)))[:1]


def _ungrounded(claim: Claim, miss: list[Anchor], ranked: list[Passage]) -> _Result:
    """A failed grounding: ``miss`` (numbers, dates, names of the claim) are in no supplied
    document; the closest passage (most key terms shared) is the evidence."""
    what = ", ".join(dict.fromkeys(a.text for a in miss))
    return _Result("ungrounded", "deterministic", DET_BASE, [(p, "") for p in ranked[:1]],
                   expected=f"no supplied document states {what}", found=what,
                   note=f"ungrounded: no supplied document contains {what}", rule="ungrounded")


async def _queries_for(claim: Claim, r: int, asked: list[str], gaps: list[str], run: _Run) -> list[str]:
    if r == 0:
        return fallback_queries(claim, 0)
    if gaps:
        return gaps
    if run.model is not None and run.remaining() > 0:
        try:
            ans = await asyncio.wait_for(ask_queries(run.model, claim.text, asked, gaps), max(0.01, run.remaining()))
        except asyncio.TimeoutError:
            return []
        if ans.value is not None:
            return ans.value.queries
    return fallback_queries(claim, r)


#: Share of the claim's key terms a model's quote must hold for ``supported`` (``refuted`` needs
#: the deterministic tier's SUBJECT_COVERAGE): a quote that only names the subject ("Northwind
#: Traders") decides nothing.
QUOTE_SUPPORT_KEYS = 0.3


def _quote_off_subject(claim: str, verdict: str, quote: str, holders: list[Passage]) -> str | None:
    """Why a model verdict's quote cannot carry it, or None. The quote is copied from a passage
    (checked before) but must also be *about* the claim: it holds a share of the claim's key terms
    (:data:`QUOTE_SUPPORT_KEYS` for ``supported``, ``SUBJECT_COVERAGE`` for ``refuted``), and for
    ``supported`` every number of the claim occurs in a cited passage. A verifier model that
    text under check steered (an instruction in the draft or in a document) thus cannot pass or
    fail a claim with an unrelated quote."""
    from verifiers.facts._compare import SUBJECT_COVERAGE

    ckeys = key_set(claim)
    if ckeys:
        share = len(ckeys & key_set(quote)) / len(ckeys)
        need = QUOTE_SUPPORT_KEYS if verdict == "supported" else SUBJECT_COVERAGE
        if share < need:
            return "its quote is not about the claim"
    if verdict == "supported":
        pnums = [q for p in holders for q in numbers(p.text)]
        for q in numbers(claim):
            if not any(q.rounds_to(p) or p.rounds_to(q) for p in pnums):
                return f"the cited passage does not state {q.text.strip()}"
    return None


def _model_result(claim: Claim, v: Any, passages: list[Passage]) -> _Result:
    cited = [passages[i - 1] for i in v.passages if isinstance(i, int) and 1 <= i <= len(passages)]
    conf = round(float(v.confidence), 3)
    if v.verdict in ("supported", "refuted"):
        quote = v.quote.strip()
        holders = [p for p in cited if quote_in(quote, p.text)]
        if not holders:
            return _Result("not_enough_info", "model", 0.5, [(p, "") for p in cited[:2]],
                           note=f"the model said {v.verdict} but its quote is not in the passage it cites",
                           basis="model")
        refs = ", ".join(str(passages.index(p) + 1) for p in holders[:3])
        st, why_st = confirm_support(claim.text, quote, holders[0].text) if v.verdict == "supported" else ("", "")
        if st == "denies":  # the cited passage repeats the claim to deny it: the passage fails it
            return _Result("refuted", "deterministic", DET_BASE, [(p, quote) for p in holders[:3]],
                           expected=holders[0].text.strip()[:EVIDENCE_CHARS], found=claim.text, rule="denial",
                           basis="passage",
                           note=f"the model said supported, but passage {refs} repeats the claim to deny it "
                                f"(\u201c{why_st}\u201d)")
        why = _quote_off_subject(claim.text, v.verdict, quote, holders)
        if why:
            return _Result("not_enough_info", "model", 0.5, [(p, quote) for p in holders[:2]],
                           note=f"the model said {v.verdict} but {why}", basis="model")
        if v.verdict == "supported":
            why = why_st
            if st != "asserts":
                return _Result("not_enough_info", "model", 0.5, [(p, quote) for p in holders[:2]], basis="model",
                               note=f"the model said supported, but the rules cannot confirm passage {refs} states "
                                    f"it: {why}")
            return _Result("supported", "model", conf, [(p, quote) for p in holders[:3]], expected=quote,
                           found=claim.text, basis="passage",
                           note=f"the verifier model found the claim supported by passage(s) {refs}, and the rules "
                                f"confirm the passage states its numbers and names without denying or attributing them")
        return _Result(v.verdict, "model", conf, [(p, quote) for p in holders[:3]],
                       expected=v.source_says.strip() or quote, found=claim.text, basis="model",
                       note=f"the verifier model found the claim {v.verdict} by passage(s) {refs}")
    reason = "the passages disagree" if v.verdict == "conflicting" else "the passages neither state nor contradict it"
    return _Result(v.verdict, "model", conf, [(p, "") for p in cited[:3]], note=f"verifier model: {reason}",
                   basis="model")


def _to_cache(r: _Result) -> dict[str, Any]:
    return {"verdict": r.verdict, "method": r.method, "confidence": r.confidence, "expected": r.expected,
            "found": r.found, "note": r.note, "rule": r.rule, "basis": r.basis, "queries": r.queries, "rounds": r.rounds,
            "passages": [{**p.to_dict(), "quote": q} for p, q in r.passages]}


def _from_cache(d: Mapping[str, Any]) -> _Result:
    ps = []
    for x in d.get("passages") or []:
        x = dict(x)
        q = x.pop("quote", "")
        ps.append((Passage(**{k: x.get(k) for k in ("text", "title", "url", "doc_id", "published", "source", "domain")
                              if x.get(k) is not None}), q))
    return _Result(d.get("verdict", "not_enough_info"), d.get("method", "deterministic"), float(d.get("confidence", 0)),
                   ps, d.get("expected"), d.get("found"), d.get("note", ""), d.get("rule", ""),
                   str(d.get("basis") or ("model" if d.get("method") == "model" else "passage")),
                   list(d.get("queries") or []), int(d.get("rounds") or 0), cacheable=False, cached=True)


def _reconfirmed(claim: Claim, r: _Result) -> _Result:
    """A cached verdict as the rules read it today: a verifier model's ``supported`` stands only
    when :func:`confirm_support` still confirms its quote in the passage it cites (the cache may
    hold a verdict written before a rule was added, by a replica running older code, or by
    anyone who can write to a shared Redis: it is evidence to re-read, never a pass by itself;
    docs/design.md "Asymmetric trust"). Other verdicts are returned unchanged."""
    if r.verdict != "supported" or r.method != "model":
        return r
    passage, quote = r.passages[0] if r.passages else (None, "")
    st, why = confirm_support(claim.text, quote or "", passage.text) if passage is not None else ("", "no passage")
    if st == "asserts":
        return r
    return _Result("not_enough_info", "model", 0.5, r.passages[:2], basis="model", queries=r.queries, rounds=r.rounds,
                   cacheable=False, cached=True,
                   note=f"cached: the model said supported, but the rules cannot confirm the passage states it: {why}")


_OUTCOME = {"supported": "pass", "refuted": "fail", "ungrounded": "fail", "conflicting": "unknown",
            "not_enough_info": "unknown", "error": "error"}


def _source_id(p: Passage) -> tuple:
    return (p.url or "", p.doc_id or "", p.title if not (p.url or p.doc_id) else "")


def _checks(claims: list[Claim], results: list[_Result]) -> tuple[list[Check], list[dict[str, Any]]]:
    sources: list[dict[str, Any]] = []
    numbered: dict[tuple, int] = {}
    checks = []
    for c, r in zip(claims, results):
        ev_passages = []
        for p, quote in r.passages:
            sid = _source_id(p)
            if sid not in numbered:
                numbered[sid] = len(sources) + 1
                sources.append({"n": numbered[sid], "title": p.title, "url": p.url, "doc_id": p.doc_id,
                                "source": p.source, "domain": p.domain, "published": p.published})
            ev_passages.append({"n": numbered[sid], "source": p.source, "title": p.title, "url": p.url,
                                "doc_id": p.doc_id, "quote": quote or None, **({"truncated": True} if p.truncated else {}),
                                "text": " ".join(p.text.split())[:EVIDENCE_CHARS]})
        outcome = _OUTCOME.get(r.verdict, "unknown")
        evidence = {"verdict": r.verdict, "method": r.method, "passages": ev_passages, "queries": r.queries,
                    "rounds": r.rounds}
        if r.rule:
            evidence["rule"] = r.rule
        if r.cached:
            evidence["cached"] = True
        if c.span is None:  # a model claim not verbatim in the answer: the sentence it comes from
            evidence["sentence_span"] = list(c.sentence_span) if c.sentence_span else None
        refs = "".join(f"[{e['n']}]" for e in ev_passages)
        note = r.note + (f" {refs}" if refs and outcome in ("pass", "fail") else "")
        conf = r.confidence if outcome in ("pass", "fail") else min(r.confidence or 0.5, 0.5)
        checks.append(Check(verifier="facts", claim=c.text, outcome=outcome,
                            expected=r.expected if outcome != "unknown" else None,
                            found=r.found if outcome != "unknown" else None,
                            evidence=evidence, confidence=round(conf, 3), span=c.span,
                            note=note[:_NOTE_MAX], basis=r.basis))
    return checks, sources


async def acheck(answer: str, question: str | None = None, *, model: ChatModel | None = None,
                 backends: Sequence[SearchBackend] = (), max_claims: int = 8, max_rounds: int = 3, k: int = 5,
                 weights: Mapping[str, float] | None = None, cache: VerdictCache | None = None,
                 deadline_s: float = 10.0, grounding: bool = False) -> FactsOutcome:
    """Check the fact claims of ``answer`` against ``backends`` (see module doc).

    Args:
        answer: the draft answer (untrusted text).
        question: the user's question; a short answer ("1998") is judged with it.
        model: the verifier model, or None for the deterministic path alone (claims by
            sentence splitting, deterministic verdicts, rewritten queries).
        backends: search backends (``context``, ``local``, ``wikipedia``...), all consulted.
        max_claims: claims checked at most (policy cap); when the answer has more, one
            ``unknown`` check says so (``evidence.kind == "truncated"``, ``limit: "max_claims"``,
            ``total: None``: only "more" is known), as does one for an answer longer than the
            claim finder reads (``ANSWER_CHARS``).
        max_rounds: search rounds per claim at most (default 3, as in docs/facts.md's example).
        k: passages asked from each backend per query.
        weights: credibility overrides (:data:`verifiers.facts._credibility.DEFAULT_WEIGHTS`).
        cache: a :class:`VerdictCache`, or None.
        deadline_s: seconds this call may take; claims unfinished then are ``unknown``.

        grounding: every statement sentence is a claim (:func:`find_claims` ``every_statement``)
            and a number, date or name no supplied document contains fails its sentence
            (``rule: "ungrounded"``, :mod:`verifiers.facts._grounding`); the documents are the
            texts of the :class:`ContextBackend` backends (none, or under ``MIN_DOC_CHARS``:
            no ungrounded verdict).

    Claims: the rule tier's sentence claims always; a verifier model's claim list only adds
    claims (it never removes a sentence the rules check). Each check's ``basis``: ``passage``
    when a passage decided it (the deterministic tier, or a model ``supported`` verdict that
    :func:`~verifiers.facts._compare.confirm_support` confirms), ``model`` for the model's word
    alone (a ``refuted`` verdict may fail; an unconfirmed ``supported`` is ``unknown``).

    Returns:
        A :class:`FactsOutcome`. Never raises for backend or model failures: those become
        ``unknown`` with the reason as the note (unavailable, deadline, budget, a model answer
        that stays invalid after its repair); claims the deterministic tier decided keep their
        outcome.
    """
    t_end = time.monotonic() + max(0.01, float(deadline_s))
    answer = display_order(answer) if isinstance(answer, str) else answer  # what the reader sees, same spans
    calls_before = len(getattr(model, "calls", []) or []) if model is not None else 0
    docs = None
    if grounding:
        docs = Documents(t for b in backends if isinstance(b, ContextBackend) for t in b.texts)
        # the index is CPU work on the whole context: built in a worker thread, not on the loop
        docs = await asyncio.to_thread(docs.build) if docs.enough else None
    run = _Run(backends, model, max(1, int(k)), weights, t_end, docs, answer or "")
    # the rule tier's claims always: a claim list from the model adds claims, never removes a
    # sentence the rules check (docs/design.md "Asymmetric trust")
    claims: list[Claim] = find_claims(answer, max_claims=max_claims + 1, every_statement=grounding)
    extra_note = ""
    if model is not None:
        try:
            got, err = await asyncio.wait_for(model_claims(answer, question, model, max_claims=max_claims + 1),
                                              max(0.01, run.remaining()))
        except asyncio.TimeoutError:
            got, err = [], "deadline"
        if err is not None:
            extra_note = f"verifier model claims failed: {err}"
        have = {norm_claim(c.text) for c in claims}
        claims += [c for c in got if norm_claim(c.text) not in have]
    # the claims came from the first ANSWER_CHARS characters only, at most max_claims of them (one
    # more is asked for to know): say so (nothing is silently unverified)
    unread = [unread_check("facts", limit="ANSWER_CHARS", limit_value=ANSWER_CHARS, checked=ANSWER_CHARS,
                           total=len(answer))] if len(answer) > ANSWER_CHARS else []
    if len(claims) > max_claims:
        claims = claims[:max_claims]
        unread.append(Check(verifier="facts", claim="", outcome="unknown", confidence=0.0, basis="passage",
                            evidence={"kind": TRUNCATED, "limit": "max_claims", "limit_value": max_claims,
                                      "checked": max_claims, "total": None, "unit": "claims"},
                            note=f"the answer has more than max_claims = {max_claims} check-worthy claims: "
                                 f"the first {max_claims} were checked, the rest is unchecked"))
    for c in claims:
        if question and len(key_set(c.text)) < SHORT_KEYS:
            c.context = f"{question.strip()} {c.text}"
    out = FactsOutcome(claims=claims)
    if not claims:
        out.checks = unread
        return out
    tasks = [asyncio.ensure_future(_verify(c, run, max_rounds, cache)) for c in claims]
    done, pending = await asyncio.wait(tasks, timeout=max(0.01, run.remaining() + 0.05))
    for t in pending:
        t.cancel()
    results: list[_Result] = []
    for t in tasks:
        if t in done and not t.cancelled() and t.exception() is None:
            results.append(t.result())
        elif t in done and not t.cancelled():
            exc = t.exception()
            results.append(_Result("not_enough_info", note=f"{type(exc).__name__}: {exc}"[:_NOTE_MAX]))
        else:
            results.append(_Result("not_enough_info", note="the verification deadline passed"))
    out.checks, out.sources = _checks(claims, results)
    if extra_note:  # the model's claim list failed: the rule tier's claims stand, the rest says why
        for c in out.checks:
            if c.outcome == "unknown" and "verifier model" not in c.note:
                c.note = f"{c.note}; {extra_note}"[:_NOTE_MAX]
    out.unconfirmed = [c.claim for c in out.checks if c.outcome == "unknown"]
    out.checks += unread
    out.searches = run.searches
    out.unavailable = dict(run.unavailable)
    out.rounds = max((r.rounds for r in results), default=0)
    if model is not None:
        out.model_calls = len(getattr(model, "calls", []) or []) - calls_before
    return out
