"""Absence is evidence only where presence was expected (verifiers/citations/_verify.py, the absence rule).

A right reference must not fail because a source that cannot be expected to hold it -- a partial
library (``local_index.authoritative: false``), a search that returned only other works, a
source that does not cover the work's kind -- or a source that did not answer (rate limit,
timeout, HTTP error) lacks it. What still fails: positive evidence (an identifier that resolves to
another work), and absence from sources expected to hold the work. Each case is run both ways
where the contrast is the point. Every check says what it rests on (``basis``).
"""

from __future__ import annotations

import pytest

from tests.fixtures.citations.fakes import FakeAPI, cfg, json_file, status, xml_file
from verifiers.citations import build_index, check
from verifiers.citations._records import CitationClaim, Record
from verifiers.citations.sources.local_index import LocalIndex
from verifiers.citations._verify import expected_to_hold

LIBRARY = [
    Record(title="Deep residual learning for image recognition", authors=["He, Kaiming", "Zhang, Xiangyu", "Ren, Shaoqing",
           "Sun, Jian"], year=2016, venue="CVPR", doi="10.1109/cvpr.2016.90"),
    Record(title="Residual attention networks for protein contact prediction", authors=["Lee, Mina", "Park, Jisoo"],
           year=2021, venue="Bioinformatics", doi="10.1093/bioinformatics/btab001"),
    Record(title="Sparse mixture of experts for speech recognition", authors=["Wang, Lei", "Chen, Yu"], year=2022,
           venue="ICASSP"),
]
# a real-looking reference whose work the library lacks; its title shares rare words with records
# the library holds, so the search answers with other works (``found``), none of them this one
ABSENT = ("1. Okafor, C., & Lindqvist, E. (2020). Residual networks for protein recognition under sparse "
          "supervision. *Journal of Computational Biology*, 27(4), 512-530.\n")
# the same authors as a held record, a different (real) paper of theirs: in a partial library the
# cited paper can be absent while its sibling is there
SIBLING = ("1. Lee, M., & Park, J. (2022). Residual attention networks for protein function prediction. "
           "*Bioinformatics*.\n")
EMPTY_SEARCH = status(200, '{"status":"ok","message":{"items":[],"total-results":0}}', "application/json")


@pytest.fixture
def library(tmp_path) -> str:
    db = str(tmp_path / "partial.sqlite3")
    assert build_index([], db, records=LIBRARY) == 3
    return db


def local(db: str, authoritative: bool) -> dict:
    return {"use": [], "local_index": {"path": db, "authoritative": authoritative}, "cache": {"backend": "none"}}


def only(checks):
    assert len(checks) == 1, [c.claim for c in checks]
    return checks[0]


# --------------------------------------------------------------------------- a partial library


def test_partial_library_search_with_other_works_is_unknown_not_fail(library):
    c = only(check(ABSENT, sources=local(library, authoritative=False)))
    assert c.evidence["sources"]["local"]["search"] == "found"   # other works came back ...
    assert c.evidence["candidates"] >= 1
    assert (c.evidence["status"], c.outcome) == ("NOT_FOUND", "unknown")   # ... and that is no evidence
    assert c.basis == "absence" and c.evidence["searched"] == []
    assert "absence is not proof" in c.note


def test_authoritative_library_still_fails_the_same_miss(library):
    c = only(check(ABSENT, sources=local(library, authoritative=True)))
    assert (c.evidence["status"], c.outcome) == ("NOT_FOUND", "fail")
    assert c.basis == "absence" and c.evidence["searched"] == ["local"]


def test_partial_library_empty_search_is_unknown(library):
    ans = "1. Quist, B. (2019). Thermodynamics of glacier calving fronts. *Journal of Glaciology*, 65, 1-12.\n"
    c = only(check(ans, sources=local(library, authoritative=False)))
    assert c.evidence["sources"]["local"]["search"] == "not_found"
    assert (c.evidence["status"], c.outcome, c.basis) == ("NOT_FOUND", "unknown", "absence")


def test_partial_library_sibling_paper_is_not_a_hallucination(library):
    partial = only(check(SIBLING, sources=local(library, authoritative=False)))
    assert partial.evidence["status"] == "LIKELY_HALLUCINATION" and partial.outcome == "unknown", partial.note
    assert partial.basis == "record" and partial.expected["title"].startswith("Residual attention networks")
    assert "matching version may exist" in partial.note
    # the authoritative library is the whole world: the resemblance without the work is a near-miss title
    assert only(check(SIBLING, sources=local(library, authoritative=True))).outcome == "fail"


def test_partial_library_identifier_of_another_work_still_conflicts(library):
    ans = ("1. Okafor, C. (2020). Quantum annealing for crop yield forecasting. *Nature Food*. "
           "https://doi.org/10.1109/CVPR.2016.90\n")
    c = only(check(ans, sources=local(library, authoritative=False)))
    assert (c.evidence["status"], c.outcome, c.basis) == ("CONFLICT", "fail", "record")   # positive evidence
    assert "resolves to" in c.note


def test_partial_library_verifies_what_it_holds(library):
    ans = "1. He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learning for image recognition. *CVPR*.\n"
    c = only(check(ans, sources=local(library, authoritative=False)))
    assert (c.evidence["status"], c.outcome, c.basis) == ("VERIFIED", "pass", "record")


def test_partial_library_does_not_veto_a_source_that_holds_the_work(library):
    """OpenAlex answered definitively that the work is not there: that is evidence, whatever the
    partial library says (its miss used to be an ``error`` that left every such check unknown)."""
    with FakeAPI() as oa:
        oa.routes["/works"] = status(200, '{"meta":{"count":0},"results":[]}', "application/json")
        srcs = cfg({"openalex": oa.url}, local_index={"path": library, "authoritative": False})
        c = only(check(ABSENT, sources=srcs))
    assert (c.evidence["status"], c.outcome, c.basis) == ("NOT_FOUND", "fail", "absence")
    assert c.evidence["searched"] == ["openalex"]


# --------------------------------------------------------------------------- network sources


@pytest.fixture
def fake():
    with FakeAPI() as f:
        yield f


def test_crossref_alone_does_not_hold_conference_papers_without_doi(fake):
    fake.routes["/works"] = EMPTY_SEARCH
    ans = "1. Tanaka, H., & Moreau, L. (2021). Contrastive objectives for sparse graph transformers. *ICLR*.\n"
    c = only(check(ans, sources=cfg({"crossref": fake.url})))
    assert (c.evidence["status"], c.outcome, c.basis) == ("NOT_FOUND", "unknown", "absence")
    assert c.evidence["searched"] == [] and "can be expected to hold" in c.note


def test_crossref_alone_holds_a_journal_article(fake):
    fake.routes["/works"] = EMPTY_SEARCH
    ans = "1. Tanaka, H., & Moreau, L. (2021). Contrastive objectives for sparse graph transformers. *Nature Methods*.\n"
    c = only(check(ans, sources=cfg({"crossref": fake.url})))
    assert (c.evidence["status"], c.outcome, c.evidence["searched"]) == ("NOT_FOUND", "fail", ["crossref"])


def test_arxiv_alone_does_not_hold_a_journal_article(fake):
    fake.routes["/api/query"] = xml_file("arxiv_feed_empty.xml")
    ans = "1. Tanaka, H., & Moreau, L. (2021). Contrastive objectives for sparse graph transformers. *Nature Methods*.\n"
    c = only(check(ans, sources=cfg({"arxiv": fake.url})))
    assert (c.evidence["status"], c.outcome) == ("NOT_FOUND", "unknown")


def test_rate_limited_source_keeps_a_likely_hallucination_unknown(fake):
    """Crossref finds "Deep learning" under other authors; OpenAlex (which could hold the version
    that matches) answers 429 to every try: the resemblance is not a verdict."""
    with FakeAPI() as limited:
        fake.routes["/works"] = json_file("crossref_works_query.json")
        limited.routes["/works*"] = status(429, "slow down", headers={"Retry-After": "0"})
        ans = "1. Marcus, G., & Davis, E. (2015). Deep learning. *Nature*.\n"
        c = only(check(ans, sources=cfg({"crossref": fake.url, "openalex": limited.url})))
        assert (c.evidence["status"], c.outcome, c.basis) == ("LIKELY_HALLUCINATION", "unknown", "record")
        assert "did not answer" in c.note
        # both answering: the same resemblance fails (Crossref holds Nature articles)
        limited.routes["/works*"] = status(200, '{"meta":{"count":0},"results":[]}', "application/json")
        c = only(check(ans, sources=cfg({"crossref": fake.url, "openalex": limited.url})))
        assert (c.evidence["status"], c.outcome) == ("LIKELY_HALLUCINATION", "fail")


# --------------------------------------------------------------------------- the coverage rule itself


def _claim(**kw) -> CitationClaim:
    return CitationClaim(raw="x", span=(0, 1), title="A title", authors=["Doe, J."], year=2020, **kw)


@pytest.mark.parametrize("name,kw,expected", [
    ("openalex", {}, True),
    ("semantic_scholar", {"venue": "ICLR"}, True),
    ("crossref", {"venue": "ICLR"}, False),                                  # no DOIs for ICLR papers
    ("crossref", {"venue": "Proceedings of the 3rd Workshop on Graph Learning"}, False),
    ("crossref", {"venue": "Journal of Machine Learning Research"}, False),  # JMLR registers no DOIs
    ("crossref", {"venue": "Nature Methods"}, True),
    ("crossref", {"venue": "ICLR", "doi": "10.1109/cvpr.2016.90"}, True),    # a Crossref DOI was stated
    ("crossref", {"doi": "10.48550/arxiv.2003.01234"}, False),               # arXiv DOIs are DataCite's
    ("crossref", {}, False),                                                 # nothing says what it is
    ("arxiv", {"venue": "Nature Methods"}, False),
    ("arxiv", {"arxiv_id": "2003.01234"}, True),
    ("arxiv", {"venue": "arXiv preprint"}, True),
    ("dblp", {"venue": "NeurIPS"}, True),
    ("dblp", {"venue": "The Lancet"}, False),
    ("somewhere_else", {}, False),
])
def test_expected_to_hold(name, kw, expected):
    assert expected_to_hold(name, object(), _claim(**kw)) is expected


def test_expected_to_hold_local_follows_authoritative(library):
    assert expected_to_hold("local", LocalIndex(library, authoritative=True), _claim()) is True
    assert expected_to_hold("local", LocalIndex(library, authoritative=False), _claim()) is False


def test_partial_library_with_another_doi_is_no_doi_conflict(library):
    """The library's record of ResNet carries 10.1109/cvpr.2016.90; the reference states another
    (publisher) DOI that OpenAlex does not know. OpenAlex misses real DOIs of other agencies and a
    partial library's missing DOI says nothing: the DOI is unconfirmed, not shown fabricated.
    An authoritative library's record is the whole world's: there the other DOI is a CONFLICT."""
    ans = ("1. He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learning for image recognition. *CVPR*. "
           "https://doi.org/10.1007/978-3-319-46493-0_38\n")
    with FakeAPI() as oa:
        oa.routes["/works/doi:10.1007/978-3-319-46493-0_38"] = status(404, "{}", "application/json")
        oa.routes["/works"] = status(200, '{"meta":{"count":0},"results":[]}', "application/json")
        srcs = cfg({"openalex": oa.url}, local_index={"path": library, "authoritative": False})
        c = only(check(ans, sources=srcs))
    assert (c.evidence["status"], c.outcome, c.basis) == ("PARTIALLY_VERIFIED", "unknown", "record"), c.note
    assert "could not be confirmed" in c.note
    c = only(check(ans, sources=local(library, authoritative=True)))
    assert (c.evidence["status"], c.outcome) == ("CONFLICT", "fail")
