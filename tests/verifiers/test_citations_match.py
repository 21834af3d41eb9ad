"""The matcher: title normalisation, authors (surname + initials, et al.), years, venue aliases, statuses."""

from __future__ import annotations

import datetime as dt

import pytest

from verifiers.citations._match import (
    PARTIALLY_VERIFIED,
    VERIFIED,
    STATUS_AUTHENTICITY,
    canonical_venue,
    compare,
    compare_authors,
    compare_venues,
    compare_years,
    title_similarity,
    titles_equal,
)
from verifiers.citations._records import CitationClaim, Record, parse_person

REC = Record(title="Deep Residual Learning for Image Recognition", authors=["Kaiming He", "Xiangyu Zhang", "Shaoqing Ren", "Jian Sun"],
             year=2016, venue="IEEE Conference on Computer Vision and Pattern Recognition (CVPR)", doi="10.1109/cvpr.2016.90",
             source="test")


def claim(**kw) -> CitationClaim:
    base = dict(raw="x", span=(0, 1), title=REC.title, authors=["He, K.", "Zhang, X.", "Ren, S.", "Sun, J."], year=2016, venue="CVPR")
    base.update(kw)
    return CitationClaim(**base)


def people(*names):
    return [parse_person(n) for n in names]


@pytest.mark.parametrize("name,surname,initials", [
    ("Vaswani, A.", "vaswani", "a"), ("A. N. Gomez", "gomez", "an"), ("Aidan N. Gomez", "gomez", "an"),
    ("Smith JA", "smith", "ja"), ("Rohit Agrawal 0002", "agrawal", "r"), ("Ludwig van Beethoven", "van beethoven", "l"),
    ("Boix-Adserà, Enric", "boix-adsera", "e"), ("张三", "张", "三"), ("Feng, J.-X.", "feng", "jx"),
])
def test_parse_person(name, surname, initials):
    p = parse_person(name)
    assert (p.surname, p.initials) == (surname, initials)


def test_titles_case_punctuation_accents_subtitle():
    assert titles_equal("Deep residual learning for image recognition.", REC.title)
    assert titles_equal("BERT: Pre-training of Deep Bidirectional Transformers", "BERT: Pre-Training of Deep Bidirectional Transformers")
    assert titles_equal("Attention Is All You Need: A Study", "Attention is all you need")
    assert titles_equal("Théorie des ensembles", "Theorie des Ensembles")
    assert not titles_equal("Characterizing risk of fairwashing", "Characterizing the risk of fairwashing")
    assert title_similarity("Characterizing risk of fairwashing", "Characterizing the risk of fairwashing") == 100
    assert title_similarity("Attention is all we need", "Attention is all you need") < 90
    assert title_similarity("A completely different paper", REC.title) < 50


def test_authors_et_al_requires_first_author():
    rec = people("Kaiming He", "Xiangyu Zhang", "Shaoqing Ren", "Jian Sun")
    assert compare_authors(people("He, K."), True, rec).verdict == "match"
    assert compare_authors(people("Zhang, X."), True, rec).verdict == "mismatch"
    assert compare_authors(people("He, K.", "Zhang, X."), False, rec).verdict == "incomplete"
    assert compare_authors(people("He, K.", "Zhang, X.", "Ren, S.", "Sun, J."), False, rec).verdict == "match"
    assert compare_authors(people("He, K.", "Li, Q.", "Wang, Z.", "Chen, T."), False, rec).verdict == "first_author"
    assert compare_authors(people("Hé, Kaiming"), True, rec).verdict == "match"        # accents
    assert compare_authors(people("He, J."), True, rec).verdict == "mismatch"           # initial differs
    assert compare_authors([], False, rec).verdict == "unknown"


def test_years():
    assert compare_years(2016, 2016) == "match"
    assert compare_years(2021, 2020) == "off_by_one"
    assert compare_years(2019, 2016) == "mismatch"
    assert compare_years(None, 2016) == "unknown"


@pytest.mark.parametrize("a,b", [
    ("NeurIPS", "Advances in Neural Information Processing Systems"),
    ("NIPS", "NeurIPS 2017"),
    ("Proc. NeurIPS", "Conference on Neural Information Processing Systems"),
    ("ICLR", "International Conference on Learning Representations"),
    ("J. Mach. Learn. Res.", "Journal of Machine Learning Research"),
    ("IEEE Trans. Pattern Anal. Mach. Intell.", "IEEE Transactions on Pattern Analysis and Machine Intelligence"),
    ("CVPR", "2016 IEEE Conference on Computer Vision and Pattern Recognition (CVPR)"),
    ("Proc. Natl. Acad. Sci. USA", "Proceedings of the National Academy of Sciences"),
    ("Lit. Linguist. Comput.", "Literary and Linguistic Computing"),
])
def test_venue_aliases_and_abbreviations(a, b):
    assert compare_venues(a, b) == "match"


def test_venue_mismatch_and_preprints():
    assert compare_venues("ICML", "NeurIPS") == "mismatch"
    assert compare_venues("Symposium on Neural Scaling Laws", "NeurIPS") == "mismatch"
    assert compare_venues("arXiv preprint arXiv:2010.11929", "ICLR") == "preprint"
    assert compare_venues("CVPR", "CoRR") == "published_vs_preprint"
    assert compare_venues(None, "CVPR") == "unknown"
    assert canonical_venue("Advances in Neural Information Processing Systems 30") == "neurips"


def test_statuses_follow_the_framework():
    assert compare(claim(), REC).status == "VERIFIED"
    assert compare(claim(authors=["He, K."], et_al=True), REC).status == "VERIFIED"
    partial = compare(claim(authors=["He, K.", "Li, Q.", "Ren, S.", "Sun, J."]), REC)
    assert partial.status == "PARTIALLY_VERIFIED"
    assert compare(claim(title="Deep residual learnings for image recognition"), REC).status == "PARTIALLY_VERIFIED"
    assert compare(claim(authors=["Smith, J."]), REC).status == "LIKELY_HALLUCINATION"
    assert compare(claim(venue="ICML"), REC).status == "LIKELY_HALLUCINATION"
    assert compare(claim(year=2012), REC).status == "LIKELY_HALLUCINATION"
    assert compare(claim(year=2017), REC).status == "PARTIALLY_VERIFIED"  # off by one: never VERIFIED
    future = compare(claim(year=2031), REC, today=dt.date(2026, 11, 30))
    assert future.status == "LIKELY_HALLUCINATION" and any("future" in n for n in future.notes)
    assert compare(claim(title="Completely unrelated work on soil chemistry"), REC).status == "NOT_FOUND"
    assert compare(claim(title="Completely unrelated work on soil chemistry"), REC, via_identifier=True).status == "CONFLICT"
    # identifier-only claim resolved: authors contradict -> CONFLICT, else VERIFIED
    assert compare(claim(title=None, authors=["Smith, J."], venue=None), REC, via_identifier=True).status == "CONFLICT"
    assert compare(claim(title=None, authors=[], venue=None), REC, via_identifier=True).status == "VERIFIED"


def test_constants_in_one_place():
    assert STATUS_AUTHENTICITY["VERIFIED"] > STATUS_AUTHENTICITY["PARTIALLY_VERIFIED"] > STATUS_AUTHENTICITY["LIKELY_HALLUCINATION"]
    assert set(STATUS_AUTHENTICITY) == {"VERIFIED", "PARTIALLY_VERIFIED", "LIKELY_HALLUCINATION", "NOT_FOUND", "CONFLICT"}


def test_near_miss_titles_with_swapped_words_are_flagged():
    from verifiers.citations._match import title_substitutions

    assert title_substitutions("Comparative learning can find an optimal basis", "Contrastive learning can find an optimal basis") == [
        ("comparative", "contrastive")]
    assert title_substitutions("Deep residual learnings for image recognition", REC.title) == []   # inflection / typo
    assert title_substitutions("Towards optimisation of deep nets", "Towards optimization of deep nets") == []
    assert title_substitutions("Residual learning towards image recognition", "Residual learning for image recognition") == []
    swapped = compare(claim(title="Deep Residual Training for Image Recognition"), REC)
    assert swapped.status == "LIKELY_HALLUCINATION" and "'training' for 'learning'" in swapped.notes[-1]
    typo = compare(claim(title="Deep Residual Learnin for Image Recognition"), REC)
    assert typo.status == "PARTIALLY_VERIFIED"


def test_hyphenation_inside_a_word_is_the_same_title():
    assert titles_equal("BERT: Pre-training of Deep Bidirectional Transformers", "BERT: Pretraining of deep bidirectional transformers")
    assert titles_equal("Self-Supervised Learning", "Selfsupervised learning")
    assert titles_equal("Vision-Language Models: A Survey", "Vision-language models")  # subtitle dropped
    # a real HALLMARK entry's BibTeX braces next to a hyphen (dev_public aaefe29933ae)
    assert titles_equal("Flash{A}ttention: Fast and Memory-Efficient Exact Attention with {IO}-Awareness",
                        "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness")
    # a hyphen turned into a space or moved is not the same title (HALLMARK near-miss perturbations)
    assert not titles_equal("Schema Variable Structured Extraction", "Schema-Variable Structured Extraction")
    assert not titles_equal("Unified Multimodal Chain of-Thought", "Unified Multimodal Chain-of-Thought")
    c = compare(claim(title="Deep Residual-Learning for Image Recognition"), REC)
    assert c.status == PARTIALLY_VERIFIED and "hyphenation" in " ".join(c.notes)
    assert compare(claim(title="Deep Residual Learning for Image-Recognition"), REC).status == PARTIALLY_VERIFIED
    assert compare(claim(title="Deep residual learning for image recognition."), REC).status == VERIFIED


@pytest.mark.cases
def test_real_hyphen_near_miss_titles_are_partially_verified(tmp_path):
    """The two HALLMARK dev near-miss titles whose only change is a hyphen (as the records are),
    against the library holding the real works: a pass, but not VERIFIED."""
    import json

    from bench.citations_bench import RECORD_FILES, answer_for, cases_dir
    from verifiers.citations import build_index, check

    cases = cases_dir()
    if not (cases / "dev_public.jsonl").exists():
        pytest.skip(f"no citation cases at {cases}")
    entries = [e for e in map(json.loads, (cases / "dev_public.jsonl").open())
               if e["bibtex_key"] in ("cc3bac858db2", "1cc022db3273")]
    assert len(entries) == 2 and all(e["hallucination_type"] == "near_miss_title" for e in entries)
    db = str(tmp_path / "lib.sqlite3")
    build_index([cases / f for f in RECORD_FILES], db)
    for e in entries:
        for style in ("apa", "ieee", "mla", "harvard", "bibtex"):
            (c,) = check(answer_for(e, style), sources={"use": [], "local_index": {"path": db}, "cache": {"backend": "none"}})
            assert (c.evidence["status"], c.outcome) == ("PARTIALLY_VERIFIED", "unknown"), (style, c.note)
            assert "hyphenation" in c.note
