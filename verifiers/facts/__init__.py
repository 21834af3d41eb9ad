"""The facts verifier: Self-Ask with loop verification and grounding (docs/facts.md; Self-Ask:
Press et al. 2022, arXiv:2210.03350).

A draft's fact claims are split out (:func:`find_claims` deterministically, or by the verifier
model), searched over the configured backends -- the request's own messages
(:class:`ContextBackend`), a local corpus, Wikipedia, SearXNG, a web-search API (the clients in
``verifiers.facts.backends``) -- weighed for credibility and independence, judged first by a
deterministic tier (numbers, dates, named entities, negation, and the polarity of the passage:
one that repeats a claim to deny it refutes it, one that doubts or attributes it does not support
it -- :mod:`verifiers.facts._polarity`) and then by the verifier model, whose ``supported`` stands
only when the rules confirm the cited passage states the claim, over up to ``max_rounds`` rounds
with changing queries. With ``grounding=True`` (the ``rag`` policy) every statement sentence is a
claim and one whose number, date or name no supplied document contains fails as ungrounded
(:mod:`verifiers.facts._grounding`). Entry point: :func:`acheck`.

Public surface::

    outcome = await acheck(answer, question, model=None, backends=[...], max_claims=8,
                           max_rounds=3, k=5, weights=None, cache=None, deadline_s=10.0)
    outcome.checks, outcome.sources, outcome.unconfirmed, outcome.searches
    unconfirmed_note(outcome.unconfirmed) -> str
    sources_prompt(outcome.checks, outcome.sources) -> str
"""

from verifiers.facts._cache import VerdictCache, cache_key
from verifiers.facts._claims import Claim, find_claims, locate
from verifiers.facts._compare import PassageVerdict, judge_passage
from verifiers.facts._context import ContextBackend
from verifiers.facts._core import FactsOutcome, acheck, fallback_queries
from verifiers.facts._credibility import DEFAULT_WEIGHTS, weight_of
from verifiers.facts._passage import Passage, SearchBackend, SourceUnavailable
from verifiers.facts._report import sources_prompt, unconfirmed_note

__all__ = ["acheck", "FactsOutcome", "VerdictCache", "cache_key", "Claim", "find_claims", "locate",
           "judge_passage", "PassageVerdict", "ContextBackend", "fallback_queries", "DEFAULT_WEIGHTS", "weight_of",
           "Passage", "SearchBackend", "SourceUnavailable", "sources_prompt", "unconfirmed_note"]
