"""Citation relevance: does the cited work's abstract support the sentence that cites it?

Abstracts in the sources' real shapes (OpenAlex inverted index with repeated words, Crossref JATS,
Semantic Scholar abstract/tldr, arXiv summary, the local index), the deterministic tier and the
model tier (ScriptedModel), and the integration in ``acheck``: recorded, never a failure unless
``fail_unsupported``, and a missing abstract is its own state.
"""

from __future__ import annotations

import json

import pytest

from tests.fixtures.citations.fakes import FakeAPI, cfg, fixture, json_file
from verifiers.citations import acheck, aclose_all, build_index, check, extract, judge_relevance
from verifiers.citations._relevance import citing_sentences, judge_deterministic
from verifiers.citations.sources._abstract import from_inverted_index, from_jats, from_s2
from verifiers.citations.sources.arxiv import parse_feed
from verifiers.citations.sources.crossref import work_to_record as crossref_record
from verifiers.model import ModelUnavailable, ScriptedModel

ABSTRACT = ("Deep learning allows computational models that are composed of multiple processing layers to learn "
            "representations of data with multiple levels of abstraction. These methods have dramatically improved the "
            "state-of-the-art in speech recognition, visual object recognition, object detection and many other domains "
            "such as drug discovery and genomics. Deep learning discovers intricate structure in large data sets by using "
            "the backpropagation algorithm to indicate how a machine should change its internal parameters.")
REFS = ("\n\nReferences\n\n[1] LeCun, Y., Bengio, Y., & Hinton, G. (2015). Deep learning. *Nature*, 521(7553), 436-444. "
        "https://doi.org/10.1038/nature14539\n")
SUPPORTED = "These methods have dramatically improved the state of the art in speech recognition and visual object recognition [1]."
UNSUPPORTED = "Transformers cut hospital readmission rates among elderly cardiac outpatients by half [1]."


def inverted(text: str) -> dict[str, list[int]]:
    idx: dict[str, list[int]] = {}
    for i, w in enumerate(text.split()):
        idx.setdefault(w, []).append(i)
    return idx


def openalex_work(abstract: str | None) -> str:
    w = json.loads(fixture("openalex_work.json"))
    w["abstract_inverted_index"] = inverted(abstract) if abstract else None
    return json.dumps(w)


@pytest.fixture
def fake():
    with FakeAPI() as f:
        yield f


def serve_openalex(fake: FakeAPI, abstract: str | None) -> dict:
    body = openalex_work(abstract)
    fake.routes["/works/doi:10.1038/nature14539"] = lambda p, q, h: (200, "application/json", body, {})
    fake.routes["/works"] = json_file("openalex_works_search.json")
    return cfg({"openalex": fake.url})


def only(checks):
    assert len(checks) == 1, [c.claim for c in checks]
    return checks[0]


# --------------------------------------------------------------------------- abstracts in the sources' shapes


def test_inverted_index_rebuilt_with_every_position_of_repeated_words():
    idx = {"the": [0, 4, 8], "cat": [1], "sat": [2], "on": [3], "mat": [5], "and": [6], "saw": [7], "dog.": [9]}
    assert from_inverted_index(idx) == "the cat sat on the mat and saw the dog."
    assert from_inverted_index(inverted(ABSTRACT)) == ABSTRACT
    assert from_inverted_index(None) is None and from_inverted_index({}) is None
    assert from_inverted_index({"x": "not a list", "y": [10**9]}) is None  # malformed: no abstract, no crash


def test_jats_abstract_becomes_text():
    jats = ("<jats:title>Abstract</jats:title><jats:sec><jats:title>Background</jats:title><jats:p>Aspirin &amp; "
            "<jats:italic>low-dose</jats:italic> statins reduce risk&nbsp;by 24%.</jats:p></jats:sec>"
            "<jats:p>Second paragraph.</jats:p>")
    assert from_jats(jats) == "Background Aspirin & low-dose statins reduce risk by 24%. Second paragraph."
    w = json.loads(fixture("crossref_work_deep_learning.json"))["message"]
    w["abstract"] = "<jats:p>" + ABSTRACT + "</jats:p>"
    rec = crossref_record(w)
    assert rec.abstract == ABSTRACT and rec.abstract_kind == "abstract"
    assert "abstract" not in rec.to_dict()  # Check.expected stays small
    assert rec.to_cache_dict()["abstract"] == ABSTRACT  # ... but the cache keeps it


def test_semantic_scholar_abstract_then_tldr_and_arxiv_summary():
    assert from_s2({"abstract": "  An   abstract. "}) == ("An abstract.", "abstract")
    assert from_s2({"abstract": None, "tldr": {"model": "tldr@v2.0.0", "text": "A short summary."}}) == (
        "A short summary.", "tldr")
    assert from_s2({"abstract": None, "tldr": None}) == (None, None)
    recs, _ = parse_feed(fixture("arxiv_feed_vit.xml"))
    assert recs[0].abstract and recs[0].abstract.startswith("While the Transformer architecture")


def test_semantic_scholar_asks_for_abstract_and_tldr(fake):
    paper = json.loads(fixture("s2_paper_vit.json"))
    paper.update(abstract=None, tldr={"model": "tldr@v2.0.0", "text": "Vision Transformer matches CNNs on image "
                                      "classification when pre-trained on large datasets."})
    body = json.dumps(paper)
    fake.routes["/graph/v1/paper/ARXIV:2010.11929"] = lambda p, q, h: (200, "application/json", body, {})
    fake.routes["/graph/v1/paper/search/match"] = json_file("s2_search_match.json")
    ans = ("Pure transformers applied to image patches match convolutional networks on image classification when "
           "pre-trained on large datasets (Dosovitskiy et al., 2021).\n\n"
           "- Dosovitskiy, A., Beyer, L., Kolesnikov, A., & Weissenborn, D. (2021). An image is worth 16x16 words: "
           "Transformers for image recognition at scale. *International Conference on Learning Representations*. "
           "arXiv:2010.11929\n")
    c = only(check(ans, sources=cfg({"semantic_scholar": fake.url}), relevance=True))
    paper_hits = [h for h in fake.hits if h["path"] == "/graph/v1/paper/ARXIV:2010.11929"]
    assert paper_hits and set(paper_hits[0]["query"]["fields"][0].split(",")) >= {"abstract", "tldr"}
    rel = c.evidence["relevance"]
    assert rel["abstract_source"] == "semantic_scholar:tldr"
    assert rel["sentences"][0]["sentence"].startswith("Pure transformers applied to image patches")
    assert "Dosovitskiy" not in rel["sentences"][0]["sentence"]  # the citation itself is not judged


def test_local_index_keeps_abstracts(tmp_path):
    src = tmp_path / "lib.jsonl"
    src.write_text(json.dumps({"title": "Deep learning", "author": "LeCun, Yann and Bengio, Yoshua and Hinton, Geoffrey",
                               "year": 2015, "journal": "Nature", "doi": "10.1038/nature14539",
                               "abstract": ABSTRACT}) + "\n")
    db = str(tmp_path / "i.sqlite3")
    assert build_index([src], db) == 1
    srcs = {"use": ["local"], "local_index": {"path": db}, "cache": {"backend": "none"}}
    c = only(check(SUPPORTED + REFS, sources=srcs, relevance=True))
    assert c.outcome == "pass"
    assert c.evidence["relevance"]["status"] == "supported"
    assert c.evidence["relevance"]["abstract_source"] == "local:abstract"


# --------------------------------------------------------------------------- the deterministic tier


def test_deterministic_tier_supported_unsupported_unavailable():
    s = judge_deterministic(SUPPORTED.replace(" [1]", ""), ABSTRACT)
    assert s.status == "supported" and s.method == "deterministic" and "speech recognition" in s.quote
    u = judge_deterministic(UNSUPPORTED.replace(" [1]", ""), ABSTRACT)
    assert u.status == "unsupported" and "key terms" in u.note
    assert judge_deterministic("Anything at all here.", None).status == "abstract_unavailable"
    assert judge_deterministic("Anything at all here.", "   ").status == "abstract_unavailable"


def test_deterministic_tier_does_not_call_a_negation_or_a_new_number_supported():
    neg = "Deep learning has not improved the state of the art in speech recognition and visual object recognition."
    assert judge_deterministic(neg, ABSTRACT).status == "unknown"
    num = "Deep learning improved the state of the art in speech recognition and visual object recognition by 40%."
    assert judge_deterministic(num, ABSTRACT).status == "unknown"
    dep = "Thermogenesis in beige fat is a UCP1-dependent mechanism of calcium cycling."
    ab = "Here we report a UCP1-independent thermogenic mechanism of calcium cycling in beige fat thermogenesis."
    assert judge_deterministic(dep, ab).status != "supported"


# --------------------------------------------------------------------------- the model tier


async def test_model_tier_supported_needs_a_real_quote():
    loose = "Layered neural networks learn abstract features from raw data."
    quote = "Deep learning allows computational models that are composed of multiple processing layers"
    m = ScriptedModel([(r"Layered neural", {"verdict": "supported", "quote": quote, "confidence": 0.8})])
    r = await judge_relevance(loose, ABSTRACT, model=m)
    assert r.status == "supported" and r.method == "model" and r.quote == quote
    # the gateway's metrics label this purpose; one it does not know is counted as `other`
    from proxy.pipeline.verifier_model import PURPOSES
    assert m.calls[0].purpose == "relevance" and m.calls[0].purpose in PURPOSES
    invented = ScriptedModel([(r"Layered neural", {"verdict": "supported", "quote": "Deep nets learn features from raw "
                                                   "pixels without any labels at all.", "confidence": 0.9})])
    r = await judge_relevance(loose, ABSTRACT, model=invented)
    assert r.status == "unknown" and "quote" in r.note


async def test_model_tier_unsupported_and_failures_keep_the_deterministic_result():
    m = ScriptedModel([(r"Sentence", {"verdict": "unsupported", "quote": "", "confidence": 0.85})])
    r = await judge_relevance("Deep learning models rarely help drug discovery in practice.", ABSTRACT, model=m)
    assert r.status == "unsupported" and r.method == "model" and r.confidence == 0.85
    # a model past its budget: the deterministic verdict stands, with a note
    spent = ScriptedModel([(r".", ModelUnavailable("budget:extra_calls"))])
    r = await judge_relevance(UNSUPPORTED.replace(" [1]", ""), ABSTRACT, model=spent)
    assert r.status == "unsupported" and r.method == "deterministic" and "unavailable" in r.note
    # no abstract: no model call at all
    m2 = ScriptedModel(default={"verdict": "supported", "quote": "x", "confidence": 1})
    assert (await judge_relevance("Anything here at all.", None, model=m2)).status == "abstract_unavailable"
    assert not m2.calls
    # the deterministic tier's support needs no model call
    m3 = ScriptedModel()
    assert (await judge_relevance(SUPPORTED.replace(" [1]", ""), ABSTRACT, model=m3)).status == "supported"
    assert not m3.calls


# --------------------------------------------------------------------------- citing sentences


def test_citing_sentences_numeric_author_year_and_narrative():
    text = ("Deep nets changed vision [1]. Unrelated claim here [2]. Ranges count too [1-3]. "
            "LeCun et al. (2015) showed that depth helps. Others agree (LeCun et al., 2015).\n\n"
            "References\n\n[1] LeCun, Y., Bengio, Y., & Hinton, G. (2015). Deep learning. *Nature*, 521, 436-444.\n"
            "[2] Vaswani, A., Shazeer, N., & Parmar, N. (2017). Attention is all you need. *NeurIPS*.\n")
    claims = extract(text)
    lecun = next(c for c in claims if c.title == "Deep learning")
    got = citing_sentences(text, lecun, claims)
    assert got == ["Deep nets changed vision.", "Ranges count too.", "showed that depth helps.", "Others agree."]
    vaswani = next(c for c in claims if c.title and c.title.startswith("Attention"))
    assert citing_sentences(text, vaswani, claims) == ["Unrelated claim here.", "Ranges count too."]


# --------------------------------------------------------------------------- integration in acheck


def test_relevance_off_changes_nothing(fake):
    c = only(check(UNSUPPORTED + REFS, sources=serve_openalex(fake, ABSTRACT)))
    assert "relevance" not in c.evidence and c.outcome == "pass"


def test_supported_and_unsupported_recorded_without_failing(fake):
    srcs = serve_openalex(fake, ABSTRACT)
    c = only(check(SUPPORTED + REFS, sources=srcs, relevance=True))
    assert c.outcome == "pass" and c.evidence["relevance"]["status"] == "supported"
    assert c.evidence["relevance"]["abstract_source"] == "openalex:abstract"
    c = only(check(UNSUPPORTED + REFS, sources=srcs, relevance=True))
    assert c.evidence["status"] == "VERIFIED" and c.outcome == "pass"  # recorded, not failed
    assert c.evidence["relevance"]["status"] == "unsupported"
    assert c.evidence["relevance"]["sentences"][0]["sentence"] == UNSUPPORTED.replace(" [1]", "")


def test_fail_unsupported_fails_the_check(fake):
    c = only(check(UNSUPPORTED + REFS, sources=serve_openalex(fake, ABSTRACT), relevance={"fail_unsupported": True}))
    assert c.outcome == "fail" and c.evidence["status"] == "VERIFIED"
    assert c.note.startswith("cited for something its abstract does not say")
    c = only(check(SUPPORTED + REFS, sources=serve_openalex(fake, ABSTRACT), relevance={"fail_unsupported": True}))
    assert c.outcome == "pass"
    with pytest.raises(ValueError):
        check(SUPPORTED + REFS, sources=serve_openalex(fake, ABSTRACT), relevance={"fail_unsupportd": True})


def test_missing_abstract_is_its_own_state_and_never_fails(fake):
    c = only(check(UNSUPPORTED + REFS, sources=serve_openalex(fake, None), relevance={"fail_unsupported": True}))
    assert c.outcome == "pass"
    assert c.evidence["relevance"]["status"] == "abstract_unavailable"
    assert c.evidence["relevance"]["abstract_source"] is None


def test_reference_never_cited_in_the_text_is_unknown(fake):
    c = only(check(REFS, sources=serve_openalex(fake, ABSTRACT), relevance={"fail_unsupported": True}))
    assert c.outcome == "pass" and c.evidence["relevance"]["status"] == "unknown"


async def test_acheck_with_a_scripted_verifier_model(fake):
    srcs = serve_openalex(fake, ABSTRACT)
    loose = "Stacked processing layers let models learn representations at several levels of abstraction [1]."
    m = ScriptedModel([(r"Stacked processing", {"verdict": "supported", "confidence": 0.9,
                        "quote": "composed of multiple processing layers to learn representations of data"})])
    try:
        c = only(await acheck(loose + REFS, sources=srcs, relevance=True, model=m))
        rel = c.evidence["relevance"]
        assert c.outcome == "pass"
        assert rel["status"] == "supported" and rel["method"] in ("model", "deterministic")
        m2 = ScriptedModel([(r"Sentence", {"verdict": "unsupported", "quote": "", "confidence": 0.8})])
        wrong = "Deep learning rarely helps with drug discovery and genomics in practice [1]."
        c = only(await acheck(wrong + REFS, sources=srcs, relevance={"fail_unsupported": True}, model=m2))
        assert c.evidence["relevance"]["status"] == "unsupported" and c.evidence["relevance"]["method"] == "model"
        assert c.outcome == "fail"
    finally:
        await aclose_all()
