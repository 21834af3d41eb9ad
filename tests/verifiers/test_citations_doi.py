"""Fabricated DOIs on real works, and the legitimate second DOIs that must never be flagged.

Offline: the library's own evidence (the record of the work carries another DOI; or it carries
none and the stated DOI's registrant prefix appears on none of the library's records while the
venue's records all carry other prefixes / none), checked on the real HALLMARK ``fabricated_doi``
entries and on every real HALLMARK entry that carries a DOI. Online: only the registry's "no"
(Crossref ``/works/{doi}/agency`` 404; arXiv's empty answer) shows a DOI is made up; a DataCite
DOI that Crossref lacks, or a DOI that only OpenAlex lacks, is not a fabrication.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.citations_bench import RECORD_FILES, answer_for, cases_dir
from tests.fixtures.citations.fakes import FakeAPI, cfg, dumps, json_file, status, xml_file
from verifiers.citations import aclose_all, acheck, build_index, check

CASES = cases_dir()
CONFERENCES = {"ICLR", "NeurIPS", "ICML", "AAAI", "CVPR"}


def only(checks):
    assert len(checks) == 1, [c.claim for c in checks]
    return checks[0]


# --------------------------------------------------------------------------- offline, real records


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The offline index built from the three real record files only (DBLP, bioRxiv, journals)."""
    if not (CASES / "dev_public.jsonl").exists():
        pytest.skip(f"no citation cases at {CASES}")
    db = str(tmp_path_factory.mktemp("doi") / "lib.sqlite3")
    build_index([CASES / f for f in RECORD_FILES], db)
    return db


@pytest.fixture(scope="module")
def hallmark():
    if not (CASES / "dev_public.jsonl").exists():
        pytest.skip(f"no citation cases at {CASES}")
    return [json.loads(line) for line in (CASES / "dev_public.jsonl").open() if line.strip()]


def offline(db: str) -> dict:
    return {"use": [], "local_index": {"path": db}, "cache": {"backend": "none"}}


def check_all(answers: list[str], sources: dict) -> list:
    """One check per answer (each answer holds one reference), all in one event loop."""
    async def run():
        try:
            return [only(await acheck(a, sources=sources)) for a in answers]
        finally:
            await aclose_all()
    return asyncio.run(run())


def venue(e: dict) -> str | None:
    return e["fields"].get("booktitle") or e["fields"].get("journal")


@pytest.mark.cases
@pytest.mark.parametrize("style", ["apa", "bibtex"])
def test_fabricated_doi_on_a_real_conference_paper_is_conflict_offline(library, hallmark, style):
    fab = [e for e in hallmark if e.get("hallucination_type") == "fabricated_doi" and venue(e) in CONFERENCES
           and e["generation_method"] == "perturbation"]
    assert len(fab) >= 20
    caught = []
    for e, c in zip(fab, check_all([answer_for(e, style) for e in fab], offline(library))):
        caught.append(c.outcome == "fail")
        if c.evidence["status"] == "CONFLICT":
            assert e["fields"]["doi"].lower() in c.note
    # every one: the ICLR/NeurIPS/ICML records of the library carry no DOI, AAAI/CVPR ones 10.1609 / 10.1109
    assert all(caught), [e["fields"]["title"] for e, ok in zip(fab, caught) if not ok]


@pytest.mark.cases
def test_real_entries_with_a_doi_are_never_conflict_offline(library, hallmark):
    real = [e for e in hallmark if e["label"] == "VALID" and e["fields"].get("doi")]
    assert len(real) >= 100
    for e, c in zip(real, check_all([answer_for(e, "apa") for e in real], offline(library))):
        if "$" in e["fields"]["title"]:
            continue  # a record whose title HALLMARK cut at a TeX brace: its DOI does resolve elsewhere
        assert c.evidence["status"] != "CONFLICT", (e["fields"], c.note)


@pytest.mark.cases
@pytest.mark.parametrize("doi", ["10.5281/zenodo.4567890", "10.5555/3495724.3496001", "10.48550/arXiv.2103.00020",
                                 "10.1109/TPAMI.2023.9999999"])
def test_a_second_legitimate_doi_on_a_real_paper_is_not_flagged_offline(library, hallmark, doi):
    """A repository copy (Zenodo), ACM DL's unregistered 10.5555 DOI, an arXiv DOI, or a DOI of a
    registrant the library knows (a journal version at IEEE): no evidence of fabrication, so no
    failure -- and no pass either, the stated DOI being unconfirmed (PARTIALLY_VERIFIED is
    ``unknown``: right for 14 of 138 labelled renderings, verifiers/citations/confidence_fit.json)."""
    iclr = next(e for e in hallmark if e["label"] == "VALID" and venue(e) == "ICLR" and not e["fields"].get("doi"))
    e = {"fields": dict(iclr["fields"], doi=doi)}
    c = only(check(answer_for(e, "apa"), sources=offline(library)))
    assert c.outcome == "unknown", c.note
    assert c.evidence["status"] == "PARTIALLY_VERIFIED" and "could not be confirmed" in c.note


@pytest.mark.cases
def test_small_library_venue_is_no_evidence(tmp_path, hallmark):
    """Fewer than MIN_VENUE_RECORDS records of the venue: the library's DOI practice proves nothing."""
    iclr = [e for e in hallmark if e["label"] == "VALID" and venue(e) == "ICLR"][:5]
    db = str(tmp_path / "small.sqlite3")
    build_index([], db, records=[_record(e) for e in iclr])
    e = {"fields": dict(iclr[0]["fields"], doi="10.77777/made.up.1")}
    c = only(check(answer_for(e, "apa"), sources=offline(db)))
    assert c.outcome == "unknown" and c.evidence["status"] == "PARTIALLY_VERIFIED"


def _record(e):
    from verifiers.citations.sources.local_index import _from_fields
    return _from_fields(e["fields"], "test")


# --------------------------------------------------------------------------- online, loopback fakes


DEEP_WITH = ("1. LeCun, Y., Bengio, Y., & Hinton, G. (2015). Deep learning. *Nature*, 521, 436-444. "
             "https://doi.org/{doi}\n")
AGENCY = {"status": "ok", "message-type": "work-agency", "message-version": "1.0.0"}


@pytest.fixture
def fake():
    with FakeAPI() as f:
        yield f


def test_datacite_doi_that_crossref_lacks_is_not_a_conflict(fake):
    fake.routes["/works"] = json_file("crossref_works_query.json")  # the title search finds the real paper
    fake.routes["/works/10.5281/zenodo.1234567/agency"] = status(200, dumps(dict(AGENCY, message={
        "DOI": "10.5281/zenodo.1234567", "agency": {"id": "datacite", "label": "DataCite"}})), "application/json")
    c = only(check(DEEP_WITH.format(doi="10.5281/zenodo.1234567"), sources=cfg({"crossref": fake.url})))
    assert c.outcome == "unknown" and c.evidence["status"] == "PARTIALLY_VERIFIED", c.note
    assert "DataCite" in c.evidence["sources"]["crossref"]["doi"]
    assert "/works/10.5281/zenodo.1234567/agency" in {h["path"] for h in fake.hits}


def test_doi_that_no_agency_knows_is_conflict(fake):
    fake.routes["/works"] = json_file("crossref_works_query.json")
    c = only(check(DEEP_WITH.format(doi="10.1038/nature99999"), sources=cfg({"crossref": fake.url})))
    assert c.evidence["status"] == "CONFLICT" and c.outcome == "fail"
    # the agency was asked and said 404 (the fake's default for an unknown path)
    assert "/works/10.1038/nature99999/agency" in {h["path"] for h in fake.hits}


def test_agency_lookup_failing_is_unknown_not_conflict(fake):
    fake.routes["/works"] = json_file("crossref_works_query.json")
    fake.routes["/works/10.1038/nature99999/agency"] = status(503, "busy")
    c = only(check(DEEP_WITH.format(doi="10.1038/nature99999"), sources=cfg({"crossref": fake.url})))
    assert c.outcome == "unknown" and c.evidence["status"] == "PARTIALLY_VERIFIED", c.note


def test_doi_missing_only_from_openalex_is_not_a_conflict(fake):
    """OpenAlex (like S2) lacks many real DOIs of other agencies: its 404 is no registry's "no"."""
    fake.routes["/works"] = json_file("openalex_works_search.json")
    c = only(check(DEEP_WITH.format(doi="10.1038/nature99999"), sources=cfg({"openalex": fake.url})))
    assert c.outcome == "unknown" and c.evidence["status"] == "PARTIALLY_VERIFIED", c.note
    assert c.evidence["sources"]["openalex"]["doi"] == "not_found"


def test_arxiv_doi_with_a_version_is_looked_up_as_registered(fake):
    """arXiv DOIs carry no version; citations often add one (HALLMARK's real entries do)."""
    fake.routes["/works/10.48550/arxiv.2010.11929/agency"] = status(200, dumps(dict(AGENCY, message={
        "DOI": "10.48550/arxiv.2010.11929", "agency": {"id": "datacite", "label": "DataCite"}})), "application/json")
    ans = ("1. Dosovitskiy, A., Beyer, L., Kolesnikov, A., & Houlsby, N. (2020). An image is worth 16x16 words: "
           "Transformers for image recognition at scale. https://doi.org/10.48550/arXiv.2010.11929v2\n")
    c = only(check(ans, sources=cfg({"crossref": fake.url})))
    paths = {h["path"] for h in fake.hits}
    assert "/works/10.48550/arxiv.2010.11929" in paths and not any("11929v2" in p for p in paths)
    assert c.outcome != "fail" and c.evidence["status"] != "CONFLICT"


VIT_ARXIV = ("1. Dosovitskiy, A., Beyer, L., Kolesnikov, A., & Houlsby, N. (2020). An image is worth 16x16 words: "
             "Transformers for image recognition at scale. arXiv:2010.11929v2\n")


def test_openalex_looks_arxiv_ids_up_by_their_datacite_doi(fake):
    fake.routes["/works/doi:10.48550/arxiv.2010.11929"] = json_file("openalex_work_arxiv_vit.json")
    c = only(check(VIT_ARXIV, sources=cfg({"openalex": fake.url})))
    assert c.evidence["status"] == "VERIFIED" and c.outcome == "pass", c.note
    assert c.expected["source"] == "openalex" and c.expected["arxiv_id"] == "2010.11929"
    assert "/works/doi:10.48550/arxiv.2010.11929" in {h["path"] for h in fake.hits}


def test_openalex_missing_an_arxiv_preprint_abstains(fake):
    """OpenAlex lacks many (recent) preprints: its 404 neither confirms nor denies the ID."""
    with FakeAPI() as arxiv:
        arxiv.routes["/api/query"] = xml_file("arxiv_feed_vit.xml")
        fake.routes["/works"] = json_file("openalex_works_search.json")  # some other paper
        c = only(check(VIT_ARXIV, sources=cfg({"openalex": fake.url, "arxiv": arxiv.url})))
    # PARTIALLY_VERIFIED (cited as the preprint of a published record): not a failure, and not a
    # pass either (verifiers/citations/confidence_fit.json)
    assert c.outcome == "unknown" and c.expected["source"] == "arxiv", c.note
    assert "arxiv" not in c.evidence["sources"].get("openalex", {})
