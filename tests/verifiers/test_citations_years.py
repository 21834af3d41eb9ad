"""A year off by one is never VERIFIED (verifiers/citations/_match.py ``compare``).

Preprint and published versions differ by a year (arXiv 2019, proceedings 2020), so a year off
by one may be right -- ``PARTIALLY_VERIFIED`` (``unknown``) -- but it is also how years are
changed (HALLMARK ``arxiv_version_mismatch``; a held-back fabrication, a year off by one against
an arXiv preprint, was VERIFIED). Cited as a preprint with a year before the preprint's first
version, it is a CONFLICT: no version of the work carries that year.
"""

from __future__ import annotations

import pytest

from verifiers.citations import build_index, check
from verifiers.citations._match import compare, first_version_year, preprint_year_conflict
from verifiers.citations._records import CitationClaim, Record

AUTHORS = ["Tanaka, Hiro", "Moreau, Lea"]
TITLE = "Contrastive objectives for sparse graph transformers"
PREPRINT = Record(title=TITLE, authors=AUTHORS, year=2020, venue="arXiv", arxiv_id="2003.01234",
                  doi="10.48550/arxiv.2003.01234", source="local")
PUBLISHED = Record(title=TITLE, authors=AUTHORS, year=2021, venue="ICLR", source="local")


def claim(**kw) -> CitationClaim:
    d = {"raw": "x", "span": (0, 1), "title": TITLE, "authors": ["Tanaka, H.", "Moreau, L."], "year": 2020}
    d.update(kw)
    return CitationClaim(**d)


def test_same_year_is_verified():
    assert compare(claim(venue="arXiv preprint"), PREPRINT).status == "VERIFIED"
    assert compare(claim(year=2021, venue="ICLR"), PUBLISHED).status == "VERIFIED"


@pytest.mark.parametrize("kw,record", [
    ({"year": 2021, "venue": "arXiv preprint"}, PREPRINT),   # a later revision's year, perhaps
    ({"year": 2021}, PREPRINT),                                # no venue stated
    ({"year": 2020, "venue": "ICLR"}, PUBLISHED),              # the preprint's year beside the venue
    ({"year": 2022, "venue": "ICLR"}, PUBLISHED),              # a year late
])
def test_off_by_one_is_at_best_partially_verified(kw, record):
    c = compare(claim(**kw), record)
    assert c.status == "PARTIALLY_VERIFIED" and c.year == "off_by_one"
    assert any("differ by a year" in n for n in c.notes)


def test_before_the_preprint_existed_is_a_conflict():
    c = compare(claim(year=2019, venue="arXiv preprint arXiv:2003.01234", arxiv_id="2003.01234"), PREPRINT)
    assert c.status == "CONFLICT"
    assert any("before 2020" in n and "first version" in n for n in c.notes)
    # identifier-only: the arXiv ID resolves to the preprint, the stated year precedes it
    bare = CitationClaim(raw="x", span=(0, 1), kind="identifier", arxiv_id="2003.01234", year=2019)
    assert compare(bare, PREPRINT, via_identifier=True).status == "CONFLICT"


def test_published_version_cited_with_an_earlier_arxiv_is_not_a_conflict():
    # the claim names the venue: the published version's year may precede a later arXiv posting
    assert not preprint_year_conflict(claim(year=2019, venue="ICLR", arxiv_id="2003.01234"), PREPRINT)


def test_first_version_year_comes_from_the_identifier():
    assert first_version_year(claim(arxiv_id="1910.06378"), PUBLISHED) == 2019
    assert first_version_year(claim(arxiv_id="hep-th/9901001"), PUBLISHED) == 1999
    assert first_version_year(claim(doi="10.48550/arXiv.2101.00001"), PUBLISHED) == 2021
    assert first_version_year(claim(doi="10.1101/2025.06.26.661885"), PUBLISHED) == 2025
    # a bioRxiv record's year alone may be a later version's: it says nothing
    biorxiv = Record(title=TITLE, authors=AUTHORS, year=2026, venue="bioRxiv", source="local")
    assert first_version_year(claim(), biorxiv) is None
    assert first_version_year(claim(), PUBLISHED) is None


def test_biorxiv_cited_with_its_posting_year_is_not_a_conflict():
    """raw_crossdomain_valid holds bioRxiv records whose year is a later version's (DOI posted
    2025, record 2026): citing the posting year is right and must not fail."""
    rec = Record(title=TITLE, authors=AUTHORS, year=2026, venue="bioRxiv", doi="10.1101/2025.06.26.661885",
                 source="local")
    c = compare(claim(year=2025, venue="bioRxiv", doi="10.1101/2025.06.26.661885"), rec)
    assert c.status == "PARTIALLY_VERIFIED"


def test_a_record_venue_naming_the_stated_year_confirms_it():
    """An arXiv record's journal_ref ("ICLR 2021") beside its first version's year (2020)."""
    rec = Record(title=TITLE, authors=AUTHORS, year=2020, venue="ICLR 2021", arxiv_id="2003.01234", source="arxiv")
    c = compare(claim(year=2021, venue="ICLR"), rec)
    assert c.status == "VERIFIED" and c.year == "match"


# --------------------------------------------------------------------------- end to end


@pytest.fixture
def library(tmp_path) -> str:
    db = str(tmp_path / "lib.sqlite3")
    assert build_index([], db, records=[PREPRINT]) == 1
    return db


@pytest.mark.parametrize("authoritative", [True, False])
def test_end_to_end_against_an_arxiv_record(library, authoritative):
    src = {"use": [], "local_index": {"path": library, "authoritative": authoritative}, "cache": {"backend": "none"}}

    def run(ref: str):
        (c,) = check(f"References\n\n1. {ref}\n", sources=src)
        return c.evidence["status"], c.outcome, c.basis

    # the held-back class: a year off by one against an arXiv preprint -- never VERIFIED
    assert run(f"Tanaka, H., & Moreau, L. (2021). {TITLE}. *arXiv preprint arXiv:2003.01234*.") == (
        "PARTIALLY_VERIFIED", "unknown", "record")
    # before the first version of the very preprint cited: the record contradicts it, even in a
    # partial library (positive evidence, not absence)
    assert run(f"Tanaka, H., & Moreau, L. (2019). {TITLE}. *arXiv preprint arXiv:2003.01234*.") == (
        "CONFLICT", "fail", "record")
    assert run(f"Tanaka, H., & Moreau, L. (2020). {TITLE}. *arXiv preprint arXiv:2003.01234*.") == (
        "VERIFIED", "pass", "record")
