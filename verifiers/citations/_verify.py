"""Verify every citation of an answer against the configured sources: :func:`acheck` / :func:`check`.

For each claim (kind ``entry``, ``bibtex``, ``identifier``, ``title``; bare ``in_text``
author-year citations are not checked on their own) all enabled sources are queried in
parallel — by DOI, by arXiv ID and by title — with early exit as soon as one candidate
VERIFIES the claim, all inside one deadline per answer (``Sources.deadline``, default 3 s).

Outcome mapping (docs/design.md "citation status"):

=====================  ==========================================================================
citation status        outcome
=====================  ==========================================================================
VERIFIED               ``pass``
PARTIALLY_VERIFIED     ``unknown`` -- a near match (a title off by a word or a hyphen, the fields
                       right but the stated identifier unconfirmed, or a year off by one: preprint
                       vs published version, or a changed year) is a typo in a real citation as
                       often as a near-miss fabrication: on the labelled cases it was right (VALID)
                       for 14 of 138 renderings (verifiers/citations/confidence_fit.json), so it is
                       neither a pass (something must be verified) nor a failure (false alarms
                       on typos cost more than misses)
CONFLICT               ``fail`` (an identifier resolves to a work that contradicts the stated fields,
                       or a preprint is cited with a year before its first version -- from its arXiv
                       ID / arXiv or bioRxiv DOI, or an arXiv record:
                       :func:`verifiers.citations._match.preprint_year_conflict`)
LIKELY_HALLUCINATION   ``fail`` only when the absence rule below holds (the version that matches the
                       claim may exist where nobody looked or nobody answered); else ``unknown``
NOT_FOUND              ``fail`` only when the absence rule holds and the claim carries enough to be
                       looked up (title + authors/year/venue, or an identifier); else ``unknown``
=====================  ==========================================================================

The absence rule: every query was answered definitively (a timeout, rate limit, HTTP error or
malformed body is never evidence: it only makes that source's say ``unknown``) and at least one
source that can be expected to hold the work answered (:func:`expected_to_hold`: an
authoritative local index, OpenAlex, Semantic Scholar; Crossref, arXiv and DBLP only for the
works they cover). A partial library (``local_index.authoritative: false``) never fails a
reference on absence, whether its search returned nothing or only other works.

``Check.basis``: ``record`` when a bibliographic record was matched (``expected`` holds it),
``absence`` when none was (NOT_FOUND; ``evidence["searched"]`` lists the sources expected to hold
the work that answered -- empty: the absence is no evidence and the check is ``unknown``).
The ``Check``: ``expected`` = best candidate record (title, authors, year, venue, doi, arxiv_id,
source, url, retracted); ``found`` = the stated fields; ``evidence`` = ``{"status", "fields"
(per-field comparison), "sources" (per-source status), "authenticity", "retracted", ...}``;
``confidence`` = how sure the outcome is (:data:`OUTCOME_CONFIDENCE`); ``note`` = one line.
Retracted works keep their status (citing them is not a hallucination) but the note and
``evidence["retracted"]`` say so.

With ``relevance`` on (:func:`acheck`), every resolved reference (VERIFIED / PARTIALLY_VERIFIED)
also gets ``evidence["relevance"]``: the sentences of the answer that cite it judged against the
work's abstract (:mod:`verifiers.citations._relevance`). It changes the outcome only with
``{"fail_unsupported": true}``: then an ``unsupported`` reference is a ``fail``.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import httpx

from verifiers._limits import TRUNCATED, unread_check
from verifiers._types import Check
from verifiers.citations._cache import make_cache
from verifiers.citations._config import Sources
from verifiers.citations._extract import MAX_TEXT, extract
from verifiers.citations._match import (
    CONFLICT,
    LIKELY_HALLUCINATION,
    NOT_FOUND,
    PARTIALLY_VERIFIED,
    PREPRINT_VENUES,
    STATUS_AUTHENTICITY,
    VENUE_ALIASES,
    VERIFIED,
    Comparison,
    canonical_venue,
    compare,
    status_rank,
    titles_equal,
)
from verifiers.citations import _relevance as _rel
from verifiers.citations._records import CitationClaim, Record, registered_doi, repository_doi
from verifiers.citations.sources import NETWORK_SOURCES, SourceResult
from verifiers.citations.sources._base import CACHE_ONLY, _RateLimiter
from verifiers.citations.sources.local_index import LocalIndex
from verifiers.model import ChatModel

#: Check.confidence per (status, outcome): the fitted probability that the outcome is right
#: (verifiers/citations/confidence_fit.json): for pass the status' authenticity, for fail
#: 1 - authenticity. Every other pair -- ``unknown`` outcomes, PARTIALLY_VERIFIED among them --
#: carries :data:`UNKNOWN_CONFIDENCE`.
OUTCOME_CONFIDENCE = {
    (VERIFIED, "pass"): STATUS_AUTHENTICITY[VERIFIED],
    (LIKELY_HALLUCINATION, "fail"): round(1 - STATUS_AUTHENTICITY[LIKELY_HALLUCINATION], 3),
    (CONFLICT, "fail"): round(1 - STATUS_AUTHENTICITY[CONFLICT], 3),
    (NOT_FOUND, "fail"): round(1 - STATUS_AUTHENTICITY[NOT_FOUND], 3),
}
UNKNOWN_CONFIDENCE = 0.5
CHECKED_KINDS = ("entry", "bibtex", "identifier", "title")
#: References looked up per answer; later ones get one ``unknown`` check. Each is a lookup in
#: every configured source (rate-limited public APIs), and each check adds ~350 bytes to the
#: report: an answer listing 4,000 references made a 1.3 MB report.
MAX_CLAIMS = 200


# --------------------------------------------------------------------------- runtime (per loop)


class _Runtime:
    """HTTP client, cache and source objects for one event loop and one configuration."""

    def __init__(self, cfg: Sources, limiters: dict[str, _RateLimiter], local: LocalIndex | None):
        self.cfg = cfg
        self.client = httpx.AsyncClient(trust_env=False, limits=httpx.Limits(max_connections=32))
        self.cache = make_cache(cfg.cache)
        self.sources: dict[str, Any] = {}
        for name in cfg.enabled:
            if name == "local":
                if local is not None:
                    self.sources["local"] = local
                continue
            cls = NETWORK_SOURCES[name]
            self.sources[name] = cls(getattr(cfg, name), client=self.client, cache=self.cache, mailto=cfg.mailto,
                                     limiter=limiters[name], user_agent=cfg.user_agent)

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.cache.aclose()


class _Shared:
    """Loop-independent state per configuration: rate limiters and the local index handle."""

    def __init__(self, cfg: Sources):
        self.limiters = {n: _RateLimiter(getattr(cfg, n).rate_per_sec) for n in NETWORK_SOURCES}
        self.cfg = cfg
        self.local: LocalIndex | None = None
        self.local_error: str | None = None
        self.runtimes: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Runtime]" = weakref.WeakKeyDictionary()
        self.open_local()


    def open_local(self) -> None:
        """(Re)try opening the local index: an index built after start-up is picked up."""
        if self.local is not None or not self.cfg.local_index.path:
            return
        try:
            self.local = LocalIndex(self.cfg.local_index.path, authoritative=self.cfg.local_index.authoritative)
            self.local_error = None
            for rt in self.runtimes.values():
                rt.sources.setdefault("local", self.local)
        except FileNotFoundError as exc:
            self.local_error = str(exc)


_SHARED: dict[str, _Shared] = {}
_SHARED_LOCK = threading.Lock()


def _runtime(cfg: Sources) -> tuple[_Runtime, _Shared]:
    key = cfg.fingerprint()
    with _SHARED_LOCK:
        shared = _SHARED.get(key)
        if shared is None:
            shared = _SHARED[key] = _Shared(cfg)
    if shared.local is None:
        shared.open_local()
    loop = asyncio.get_running_loop()
    rt = shared.runtimes.get(loop)
    if rt is None:
        rt = shared.runtimes[loop] = _Runtime(cfg, shared.limiters, shared.local)
    return rt, shared


async def aclose_all() -> None:
    """Close the HTTP clients and caches opened on the running loop (gateway shutdown)."""
    loop = asyncio.get_running_loop()
    for shared in list(_SHARED.values()):
        rt = shared.runtimes.pop(loop, None)
        if rt is not None:
            await rt.aclose()


# --------------------------------------------------------------------------- one claim


@dataclass(slots=True)
class _Query:
    source: str
    op: str  # doi | arxiv | search | isbn
    via_identifier: bool


def _queries(claim: CitationClaim, sources: dict[str, Any]) -> list[tuple[_Query, Any]]:
    """``(query, factory)`` pairs; ``factory()`` makes the lookup coroutine (called once per phase)."""
    out: list[tuple[_Query, Any]] = []
    for name, src in sources.items():
        if claim.doi:
            out.append((_Query(name, "doi", True), functools.partial(src.lookup_doi, claim.doi)))
        if claim.arxiv_id and hasattr(src, "lookup_arxiv") and not (
                name in ("openalex", "arxiv") and claim.doi and registered_doi(claim.doi) == f"10.48550/arxiv.{claim.arxiv_id}"):
            # (for those two the arXiv DOI lookup above already is the arXiv ID lookup)
            out.append((_Query(name, "arxiv", True), functools.partial(src.lookup_arxiv, claim.arxiv_id)))
        if claim.isbn and hasattr(src, "lookup_isbn"):
            out.append((_Query(name, "isbn", True), functools.partial(src.lookup_isbn, claim.isbn)))
        if claim.title:
            first = [claim.people[0].surname] if claim.people else None
            out.append((_Query(name, "search", False), functools.partial(src.search, claim.title, first, claim.year)))
    return out


def _confident(claim: CitationClaim, comps: list[Comparison]) -> bool:
    """Early exit: the best candidate VERIFIES the claim, the stated identifier (if any) was
    confirmed, and nothing conflicts."""
    b = _best(comps)
    id_ok = not (claim.doi or claim.arxiv_id) or any(c.via_identifier and c.status == VERIFIED for c in comps)
    return b is not None and b.status == VERIFIED and id_ok and not any(c.status == CONFLICT for c in comps)


async def _from_cache(claim: CitationClaim, queries: list[tuple[_Query, Any]]) -> list[tuple[_Query, SourceResult | None]]:
    """Phase 0: every query answered from the cache alone (``None`` = not cached, ask the source).

    Without this phase a cached DOI answer and an uncached title search raced: the search went
    out on every repeat of the same answer and was cancelled by the early exit before its
    result could be cached (seen as a flaky cache test in CI).
    """
    token = CACHE_ONLY.set(True)
    try:
        got = await asyncio.gather(*(_none_safe(f()) for _, f in queries))
    finally:
        CACHE_ONLY.reset(token)
    return [(q, r) for (q, _), r in zip(queries, got)]


def _best(comps: list[Comparison]) -> Comparison | None:
    if not comps:
        return None
    return max(comps, key=lambda c: (status_rank(c.status), c.title, c.via_identifier))


#: Sources that index scholarly works of every field and kind (journal and conference papers,
#: preprints, books): OpenAlex (~250 M works, arXiv included) and Semantic Scholar (~200 M).
GENERAL_SOURCES = ("openalex", "semantic_scholar")
#: Conferences among :data:`VENUE_ALIASES`: Crossref holds their papers only when a DOI was
#: registered (ICLR, NeurIPS and PMLR volumes have none), so its silence says nothing about them.
_CONFERENCES = (frozenset(VENUE_ALIASES) - {"jmlr", "tmlr", "tpami", "ijcv", "pnas", "nature", "science"}
                - PREPRINT_VENUES)
#: Journals that register no DOI with Crossref (JMLR, TMLR publish without DOIs).
_NO_DOI_JOURNALS = frozenset({"jmlr", "tmlr"})
#: Repositories of :data:`verifiers.citations._records.REPOSITORY_DOI_PREFIXES` whose DOIs are not
#: Crossref's (DataCite registers arXiv's, Zenodo's and figshare's; ACM's 10.5555 are unregistered).
_DATACITE_REPOSITORIES = frozenset({"arXiv", "Zenodo", "figshare", "ACM DL (unregistered)"})
#: Venues DBLP indexes: the computer-science venues of :data:`VENUE_ALIASES` and arXiv (CoRR).
_DBLP_VENUES = (frozenset(VENUE_ALIASES) - {"pnas", "nature", "science", "biorxiv", "medrxiv"})
_PROCEEDINGS_WORDS = re.compile(r"\b(conference|proceedings|proc|workshop|symposium|meeting|congress|colloquium)\b",
                                re.IGNORECASE)


def expected_to_hold(name: str, source: Any, claim: CitationClaim) -> bool:
    """Whether source ``name`` can be expected to hold the work ``claim`` cites, so that its not
    having it is evidence (docs/citations.md, "Absence rule": absence is evidence only where
    presence was expected).

    * ``local``: only an index configured ``authoritative`` (the library is the whole world);
      a partial library (``local_index.authoritative: false``) holds what it holds.
    * ``openalex``, ``semantic_scholar``: yes (:data:`GENERAL_SOURCES`).
    * ``crossref``: when the claim states a DOI that is not a repository's (arXiv, Zenodo...
      register with DataCite), or names a journal that registers DOIs (not a conference, a
      proceedings, a preprint server, JMLR or TMLR).
    * ``arxiv``: when the claim cites an arXiv preprint (an arXiv ID or the venue arXiv).
    * ``dblp``: when the claim names a computer-science venue DBLP indexes (or arXiv: CoRR).

    Anything else (a source this function does not know): no. Never raises.
    """
    if name == "local":
        return bool(getattr(source, "authoritative", False))
    if name in GENERAL_SOURCES:
        return True
    venue = canonical_venue(claim.venue)
    if name == "arxiv":
        return bool(claim.arxiv_id) or venue == "arxiv" or repository_doi(claim.doi) == "arXiv"
    if name == "dblp":
        return venue in _DBLP_VENUES
    if name == "crossref":
        if claim.doi and repository_doi(claim.doi) not in _DATACITE_REPOSITORIES:
            return True
        return bool(venue and venue not in _CONFERENCES and venue not in PREPRINT_VENUES
                    and venue not in _NO_DOI_JOURNALS and not _PROCEEDINGS_WORDS.search(claim.venue or ""))
    return False


def _enough_to_judge(claim: CitationClaim) -> bool:
    """Whether a NOT_FOUND may fail the claim: an identifier, or a title with authors/year/venue
    (a quoted title in prose needs an attached author-year citation)."""
    if claim.doi or claim.arxiv_id:
        return True
    if claim.kind == "title":
        return bool(claim.title and claim.authors and claim.year)
    return bool(claim.title) and bool(claim.authors or claim.year or claim.venue)


async def _verify_claim(claim: CitationClaim, rt: _Runtime, shared: _Shared, deadline_at: float
                        ) -> tuple[Check, list[Comparison]]:
    loop = asyncio.get_running_loop()
    results: list[tuple[_Query, SourceResult]] = []
    comps: list[Comparison] = []
    ask: list[tuple[_Query, Any]] = []
    queries = _queries(claim, rt.sources)
    for (q, res), (_, factory) in zip(await _from_cache(claim, queries), queries):
        if res is None:
            ask.append((q, factory))
            continue
        results.append((q, res))
        comps.extend(compare(claim, rec, via_identifier=q.via_identifier) for rec in res.records)
    holders = {name for name, src in rt.sources.items() if expected_to_hold(name, src, claim)}
    if _confident(claim, comps):
        return _decide(claim, results, comps, True, shared, holders), comps
    pending: dict[asyncio.Task, _Query] = {asyncio.ensure_future(_none_safe(f())): q for q, f in ask}
    early = False
    try:
        while pending:
            timeout = deadline_at - loop.time()
            if timeout <= 0:
                break
            done, _ = await asyncio.wait(list(pending), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                break
            for t in done:
                q = pending.pop(t)
                res = t.result()
                if res is None:
                    continue
                results.append((q, res))
                for rec in res.records:
                    comps.append(compare(claim, rec, via_identifier=q.via_identifier))
            if _confident(claim, comps):
                early = True
                break
    finally:
        for t, q in pending.items():
            t.cancel()
            if not early:
                results.append((q, SourceResult(q.source, "timeout", [], "deadline reached")))
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
    return _decide(claim, results, comps, early, shared, holders), comps


async def _none_safe(coro) -> SourceResult | None:
    try:
        return await coro
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a source bug must not break the answer: record it as an error
        return SourceResult("?", "error", [], f"{type(exc).__name__}: {exc}"[:200])


def _decide(claim: CitationClaim, results: list[tuple[_Query, SourceResult]], comps: list[Comparison],
            early: bool, shared: _Shared, holders: set[str] | frozenset[str] = frozenset()) -> Check:
    """The check of one claim from every source's answer (module doc: the outcome table).

    ``holders``: the sources :func:`expected_to_hold` the cited work. Absence -- NOT_FOUND, and
    the LIKELY_HALLUCINATION that says "a near record exists and the stated version does not" --
    fails the claim only when every query was answered definitively (no timeout, rate limit,
    HTTP error) and at least one holder answered: a partial library or a source that does not
    cover the work saying "not here" is no evidence, and the check stays ``unknown``."""
    per_source: dict[str, dict[str, str]] = {}
    for q, r in results:
        per_source.setdefault(q.source, {})[q.op] = r.status + (f" ({r.detail})" if r.detail and not r.definitive else "")
    all_definitive = bool(results) and all(r.definitive for _, r in results) and not shared.local_error
    searched = sorted({q.source for q, r in results if q.source in holders and r.definitive})
    absence_ok = all_definitive and bool(searched)
    notes: list[str] = []

    # identifier lookups: did every source that was asked say definitively "no such identifier"?
    # Only the registry's own "no" (no registration agency knows the DOI; arXiv has no such ID)
    # shows the identifier is made up: Crossref, OpenAlex and S2 each miss real DOIs of other
    # agencies (DataCite, mEDRA, JaLC...), so their 404s alone prove nothing; nor does a partial
    # library's (not a holder).
    id_results = [(q, r) for q, r in results if q.via_identifier]
    id_missing = (bool(id_results) and all(r.status == "not_found" for _, r in id_results)
                  and any(q.source in holders or r.registry for q, r in id_results))
    id_missing_online = id_missing and any(r.registry for _, r in id_results)

    id_conflicts = [c for c in comps if c.via_identifier and c.status == CONFLICT]
    # (a CONFLICT reached by title search is the same-version year conflict of
    # match.preprint_year_conflict: a candidate like any other; one reached by identifier is handled below)
    best = _best([c for c in comps if c.status != CONFLICT or not c.via_identifier]) or _best(comps)
    status = best.status if best else NOT_FOUND
    title_ok = best is not None and best.status in (VERIFIED, PARTIALLY_VERIFIED) and bool(claim.title)
    if id_conflicts and (best is None or best.status != VERIFIED or not best.via_identifier):
        # the identifier resolves, but to another work
        worst = max(id_conflicts, key=lambda c: c.title)
        title_match = _best([c for c in comps if not c.via_identifier and c.status in (VERIFIED, PARTIALLY_VERIFIED)])
        status = CONFLICT
        best = title_match or worst
        what = "DOI" if claim.doi else "arXiv ID"
        if claim.title and titles_equal(claim.title, worst.record.title):
            notes.extend(worst.notes)   # the stated work itself, with a field its record contradicts
            notes.append(f"the {what} resolves to this work, whose record contradicts the stated fields")
        else:
            notes.append(f"the {what} resolves to \u201c{worst.record.title[:80]}\u201d, not the stated work")
    elif title_ok and id_missing_online:
        # a real work cited with an identifier that no registry knows (a fabricated DOI)
        status = CONFLICT
        notes.append(f"the stated {'DOI' if claim.doi else 'arXiv ID'} does not resolve, though the title matches a real work")
    elif (title_ok and id_missing and claim.doi and best.record.doi and best.record.source == "local"
          and "local" in holders and best.record.doi != claim.doi and not repository_doi(claim.doi)
          and not repository_doi(best.record.doi)):
        # offline: the library's record of this work carries another DOI (repository and preprint
        # DOIs excepted: a work legitimately has an arXiv/bioRxiv/Zenodo DOI and a publisher DOI).
        # Online sources are partial (OpenAlex, S2): only a registry's "no" counts there; and only
        # an authoritative library's missing DOI says anything (a partial one's: see expected_to_hold).
        status = CONFLICT
        notes.append(f"stated DOI {claim.doi} differs from the record's {best.record.doi}")
    elif (title_ok and id_missing and claim.doi and not best.record.doi and best.record.source == "local"
          and "local" in holders and shared.local is not None
          and (why := shared.local.foreign_doi_prefix(claim.doi, best.record.venue))):
        # offline: the library's record of this work has no DOI, and the stated DOI's registrant
        # publishes nothing the library knows, least of all this venue (LocalIndex.foreign_doi_prefix)
        status = CONFLICT
        notes.append(f"stated DOI {claim.doi}: " + why)

    if status == VERIFIED and (claim.doi or claim.arxiv_id) and not any(
            c.via_identifier and c.status == VERIFIED for c in comps):
        # the fields match a record, but no source confirmed the stated identifier
        status = PARTIALLY_VERIFIED
        notes.append(f"the stated {'DOI' if claim.doi else 'arXiv ID'} could not be confirmed")

    if best is not None and status != NOT_FOUND:
        notes = best.notes + notes
    if shared.local_error:
        notes.append(shared.local_error)

    # outcome
    if status == VERIFIED:
        outcome = "pass"
    elif status == PARTIALLY_VERIFIED:  # see the module doc: a near match is not verified as written
        outcome = "unknown"
    elif status == CONFLICT:
        outcome = "fail"
    elif status == LIKELY_HALLUCINATION:
        # a record resembles the claim but contradicts it: the claim is a distortion only if the
        # version that matches is absent where it would be (another version, a namesake, a sibling
        # paper of the same authors may exist in a source that was not asked or did not answer)
        outcome = "fail" if absence_ok else "unknown"
        if not all_definitive:
            notes.append("some sources did not answer; they may hold the matching version")
        elif not searched:
            notes.append("no source that would hold every version of the work was searched (a partial library): "
                         "the matching version may exist")
    else:  # NOT_FOUND
        outcome = "fail" if (absence_ok and _enough_to_judge(claim)) else "unknown"
        if not results:
            notes.append("no source configured for this kind of reference")
        elif not all_definitive:
            notes.append("not every source answered (timeout/error), so absence is not proof")
        elif not searched:
            notes.append("none of the sources searched can be expected to hold this work "
                         f"({', '.join(sorted({q.source for q, _ in results}))}), so absence is not proof")
        elif not _enough_to_judge(claim):
            notes.append("too few fields to call it fabricated")
    confidence = OUTCOME_CONFIDENCE.get((status, outcome), UNKNOWN_CONFIDENCE)

    rec = best.record if best is not None and status != NOT_FOUND else None
    retracted = bool(rec and rec.retracted)
    if retracted:
        notice = (rec.retraction or {}).get("notice_doi")
        notes.insert(0, "RETRACTED" + (f" (notice {notice})" if notice else ""))
    head = {VERIFIED: "verified", PARTIALLY_VERIFIED: "partially verified", LIKELY_HALLUCINATION: "likely hallucinated",
            NOT_FOUND: "not found in any source", CONFLICT: "identifier conflicts with the stated fields"}[status]
    src_note = f" against {rec.source}" if rec else ""
    note = f"{head}{src_note}" + (": " + "; ".join(dict.fromkeys(notes)) if notes else "")
    evidence: dict[str, Any] = {
        "status": status,
        "authenticity": STATUS_AUTHENTICITY[status],
        "fields": best.to_evidence() if best is not None and status != NOT_FOUND else None,
        "sources": per_source,
        "retracted": retracted,
        "candidates": len(comps),
        "early_exit": early,
        "claim_kind": claim.kind,
        # the sources expected to hold the work that answered definitively: what an absence rests on
        "searched": searched,
    }
    if retracted:
        evidence["retraction"] = rec.retraction
    # what the verdict rests on: a matched record, or -- nothing matched -- the absence of the work
    # from the sources that would hold it (``evidence["searched"]``)
    basis = "record" if rec is not None else "absence"
    return Check(verifier="citations", claim=claim.raw[:500], outcome=outcome, expected=rec.to_dict() if rec else None,
                 found=claim.fields(), evidence=evidence, confidence=confidence, span=claim.span, note=note[:300],
                 basis=basis)


# --------------------------------------------------------------------------- public API


async def acheck(answer: str, question: str | None = None, *, sources: Sources | dict[str, Any] | None,
                 deadline: float | None = None, relevance: bool | dict[str, Any] = False,
                 model: ChatModel | None = None) -> list[Check]:
    """Verify the citations in ``answer``; one :class:`Check` per checked claim, in text order.

    ``relevance``: False (default: nothing changes), True, or ``{"fail_unsupported": bool}``.
    When on, each resolved reference's check gets ``evidence["relevance"]`` = ``{"status"
    (supported | unsupported | abstract_unavailable | unknown), "confidence", "quote", "method",
    "note", "abstract_source", "sentences": [{"sentence", "status", ...}]}``; an ``unsupported``
    reference fails the check only with ``fail_unsupported: true``. ``model``: the verifier
    model for the relevance model tier (None: the deterministic tier alone). An answer longer
    than the extractor reads (``extract.MAX_TEXT``) or with more than :data:`MAX_CLAIMS`
    references gets one ``unknown`` check saying so (``evidence["kind"] == "truncated"``).

    ``sources``: a :class:`Sources` or a dict for :meth:`Sources.from_dict` (None = defaults:
    the public APIs). ``deadline`` overrides ``Sources.deadline`` (seconds for the whole
    answer). ``question`` is accepted for interface symmetry with the other verifiers and not
    used. Raises ``TypeError`` if ``answer`` is not a str and ``pydantic.ValidationError`` for a
    bad configuration; never raises for a source failure.
    """
    cfg = Sources.coerce(sources)
    if not isinstance(answer, str):
        raise TypeError(f"answer must be a str, not {type(answer).__name__}")
    # extraction is CPU work (~0.3 ms per reference line): off the event loop for long answers,
    # so the gateway keeps serving and the caller's deadline can fire
    found = extract(answer) if len(answer) < 20_000 else await asyncio.to_thread(extract, answer)
    claims = [c for c in found if c.kind in CHECKED_KINDS]
    unread = ([unread_check("citations", limit="MAX_TEXT", limit_value=MAX_TEXT, checked=MAX_TEXT, total=len(answer))]
              if len(answer) > MAX_TEXT else [])  # references past the extractor's limit: say so
    if not claims:
        return unread
    claims, rest = claims[:MAX_CLAIMS], claims[MAX_CLAIMS:]
    rt, shared = _runtime(cfg)
    loop = asyncio.get_running_loop()
    deadline_at = loop.time() + (deadline if deadline is not None else cfg.deadline)
    done = await asyncio.gather(*(_verify_claim(c, rt, shared, deadline_at) for c in claims))
    checks = [chk for chk, _ in done]
    if relevance:
        opts = relevance if isinstance(relevance, dict) else {}
        unknown_opts = set(opts) - {"fail_unsupported"}
        if unknown_opts:
            raise ValueError(f"unknown relevance option(s): {', '.join(sorted(unknown_opts))}")
        await asyncio.gather(*(_add_relevance(answer, claim, found, chk, comps, rt, deadline_at, model,
                                              bool(opts.get("fail_unsupported")))
                               for claim, (chk, comps) in zip(claims, done)))
    if rest:
        checks.append(Check(verifier="citations", claim=f"{len(rest)} more references", outcome="unknown",
                            confidence=0.0, span=(rest[0].span[0], rest[-1].span[1]),
                            evidence={"reason": "too many references", "unchecked": len(rest), "kind": TRUNCATED,
                                      "limit": "MAX_CLAIMS", "limit_value": MAX_CLAIMS, "checked": MAX_CLAIMS,
                                      "total": len(claims) + len(rest), "unit": "references"},
                            note=f"not checked: only the first {MAX_CLAIMS} references of an answer are looked up"))
    return checks + unread


# --------------------------------------------------------------------------- relevance


_ABSTRACT_SOURCES = ("openalex", "semantic_scholar", "arxiv", "crossref", "local")


def _with_abstract(recs: list[Record]) -> Record | None:
    """The first record with a real abstract, else the first with a TLDR, else None."""
    return next((r for r in recs if r.abstract and r.abstract_kind != "tldr"), None) or next(
        (r for r in recs if r.abstract), None)


async def _find_abstract(check_: Check, comps: list[Comparison], rt: _Runtime, deadline_at: float) -> Record | None:
    """The resolved work's abstract: from the records that resolved it, else by asking the other
    enabled sources for the resolved DOI / arXiv ID (cached; within the answer's deadline)."""
    resolved = [c.record for c in sorted(comps, key=lambda c: -status_rank(c.status))
                if c.status in (VERIFIED, PARTIALLY_VERIFIED)]
    rec = _with_abstract(resolved)
    if rec is not None or not check_.expected:
        return rec
    doi, arxiv_id = check_.expected.get("doi"), check_.expected.get("arxiv_id")
    calls = []
    for name in _ABSTRACT_SOURCES:
        src = rt.sources.get(name)
        if src is None:
            continue
        if doi:
            calls.append(src.lookup_doi(doi))
        elif arxiv_id and hasattr(src, "lookup_arxiv"):
            calls.append(src.lookup_arxiv(arxiv_id))
    if not calls:
        return None
    timeout = deadline_at - asyncio.get_running_loop().time()
    if timeout <= 0:
        for c in calls:
            c.close()
        return None
    tasks = [asyncio.ensure_future(_none_safe(c)) for c in calls]
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    recs = [r for t in done if t.result() is not None for r in t.result().records]
    return _with_abstract(recs)


async def _add_relevance(answer: str, claim: CitationClaim, found: list[CitationClaim], check_: Check,
                         comps: list[Comparison], rt: _Runtime, deadline_at: float, model: ChatModel | None,
                         fail_unsupported: bool) -> None:
    """Judge the sentences citing a resolved reference against its abstract; record the result in
    ``check_.evidence["relevance"]`` and, with ``fail_unsupported``, fail an unsupported one."""
    if check_.evidence.get("status") not in (VERIFIED, PARTIALLY_VERIFIED):
        return
    sentences = _rel.citing_sentences(answer, claim, found)
    if not sentences:
        check_.evidence["relevance"] = {**_rel.Relevance(_rel.UNKNOWN, 0.0, note="no sentence of the answer cites this "
                                                         "reference").to_dict(), "sentences": [], "abstract_source": None}
        return
    rec = await _find_abstract(check_, comps, rt, deadline_at)
    abstract = rec.abstract if rec is not None else None
    title = rec.title if rec is not None else (check_.expected or {}).get("title")
    judged = [await _rel.judge_relevance(s, abstract, model=model, title=title) for s in sentences[:5]]
    overall = _rel.aggregate(judged)
    check_.evidence["relevance"] = {
        **overall.to_dict(),
        "abstract_source": f"{rec.source}:{rec.abstract_kind}" if rec is not None else None,
        "sentences": [{"sentence": s[:500], **r.to_dict()} for s, r in zip(sentences, judged)],
    }
    if overall.status == _rel.UNSUPPORTED and fail_unsupported and check_.outcome == "pass":
        check_.outcome = "fail"
        check_.confidence = overall.confidence
        check_.note = f"cited for something its abstract does not say: {overall.note}; " + check_.note
        check_.note = check_.note[:300]


def check(answer: str, question: str | None = None, *, sources: Sources | dict[str, Any] | None,
          deadline: float | None = None, relevance: bool | dict[str, Any] = False) -> list[Check]:
    """Synchronous :func:`acheck` (runs its own event loop; call :func:`acheck` from async code).

    Raises ``RuntimeError`` when called from a running event loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("verifiers.citations.check() called inside an event loop; await acheck() instead")

    async def run() -> list[Check]:
        try:
            return await acheck(answer, question, sources=sources, deadline=deadline, relevance=relevance)
        finally:
            await aclose_all()

    return asyncio.run(run())
