"""Citation verifier: "source or it didn't happen".

Public API::

    from verifiers.citations import extract, check, acheck, Sources, build_index
    claims = extract(answer_text)                       # list[CitationClaim]
    checks = check(answer_text, sources={"use": [], "local_index": {"path": "lib.sqlite3"}})
    checks = await acheck(answer_text, sources=Sources.from_dict({...}))

Each check has ``verifier="citations"``, the citation status in ``evidence["status"]``
(VERIFIED, PARTIALLY_VERIFIED, LIKELY_HALLUCINATION, NOT_FOUND, CONFLICT), the best candidate
record in ``expected`` and the outcome mapping documented in :mod:`verifiers.citations._verify`.
``acheck(..., relevance=True, model=...)`` also judges whether each resolved reference's abstract
supports the sentences citing it (``evidence["relevance"]``; :mod:`verifiers.citations._relevance`,
entry point :func:`judge_relevance`).
"""

from verifiers.citations._config import Sources, SourceSettings
from verifiers.citations._extract import extract
from verifiers.citations._match import STATUS_AUTHENTICITY, STATUSES
from verifiers.citations._records import CitationClaim, Record
from verifiers.citations._relevance import Relevance, judge_relevance
from verifiers.citations._styles import STYLES, render
from verifiers.citations.sources.local_index import LocalIndex, build_index
from verifiers.citations._verify import acheck, aclose_all, check

__all__ = ["extract", "check", "acheck", "aclose_all", "Sources", "SourceSettings", "CitationClaim", "Record",
           "build_index", "LocalIndex", "STATUSES", "STATUS_AUTHENTICITY", "Relevance", "judge_relevance",
           "render", "STYLES"]
