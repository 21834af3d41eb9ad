"""The offline index: building from BibTeX / CSL-JSON / JSONL, lookups, the CLI, and checks against it."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifiers.citations import LocalIndex, build_index, check

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "citations"
FILES = [FIX / "library.bib", FIX / "library.csl.json", FIX / "library.jsonl"]


@pytest.fixture
def index(tmp_path) -> str:
    db = str(tmp_path / "lib.sqlite3")
    assert build_index(FILES, db) == 6
    return db


def local(db: str, **kw) -> dict:
    return {"use": [], "local_index": {"path": db, **kw}, "cache": {"backend": "none"}}


def test_build_reads_all_formats_and_skips_unlabelled_fabrications(index):
    li = LocalIndex(index)
    assert li.count() == 6
    assert li.search_sync("A Fabricated Paper That Must Never Be Indexed").records == [] or all(
        "Fabricated" not in r.title for r in li.search_sync("A Fabricated Paper That Must Never Be Indexed").records)
    (r,) = li.lookup_doi_sync("10.1038/nature14539").records
    assert r.title == "Deep learning" and r.venue == "Nature" and r.year == 2015
    (v,) = li.lookup_arxiv_sync("2010.11929").records
    assert v.venue == "ICLR"
    cjk = li.search_sync("机器学习").records[0]
    assert cjk.title == "机器学习" and cjk.authors == ["周, 志华"]
    jmlr = li.search_sync("On the theory of policy gradient methods").records[0]
    assert jmlr.venue == "J. Mach. Learn. Res." and jmlr.year == 2021


def test_rebuild_does_not_duplicate(index):
    assert build_index(FILES, index) == 0
    assert LocalIndex(index).count() == 6


def test_unknown_format_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("hello")
    with pytest.raises(ValueError, match="unknown record format"):
        build_index([bad], str(tmp_path / "i.sqlite3"))


def test_statuses_against_the_offline_index(index):
    ans = """References
1. Vaswani, A., Shazeer, N., Parmar, N., Uszkoreit, J., Jones, L., Gomez, A. N., Kaiser, L., & Polosukhin, I. (2017). Attention is all you need. *NeurIPS*.
2. LeCun, Y., Bengio, Y., & Hinton, G. (2015). Deep learning. *Nature*. https://doi.org/10.1109/CVPR.2016.90
3. He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learning for image recognition. *ICML*.
4. Agarwal, A., Kakade, S. M., Lee, J. D., & Mahajan, G. (2021). On the theory of policy gradient methods: Optimality, approximation, and distribution shift. *Journal of Machine Learning Research*, 22, 1-76.
5. Smith, J. (2019). A wholly invented study of transformer gravity. *Journal of Imaginary Results*.
6. He, K., & Sun, J. (2016). Deep residual learning for image recognition. *CVPR*.
7. Dosovitskiy, A., et al. (2022). An image is worth 16x16 words: Transformers for image recognition at scale. *ICLR*.
8. Vaswani, A., et al. (2017). Attention is all you needs. *NeurIPS*.
9. Vaswani, A., et al. (2017). Attention is all we need. *NeurIPS*.
"""
    cs = check(ans, sources=local(index))
    got = [(c.evidence["status"], c.outcome) for c in cs]
    assert got == [
        ("VERIFIED", "pass"),               # NeurIPS ~ Advances in Neural Information Processing Systems
        ("CONFLICT", "fail"),               # the DOI belongs to ResNet, not "Deep learning"
        ("LIKELY_HALLUCINATION", "fail"),   # right paper, wrong venue
        ("VERIFIED", "pass"),               # JMLR abbreviation, subtitle case
        ("NOT_FOUND", "fail"),              # the library is authoritative by default
        ("LIKELY_HALLUCINATION", "fail"),   # author list cut without "et al."
        ("PARTIALLY_VERIFIED", "unknown"),  # year off by one: preprint vs published, or a changed year -- not VERIFIED
        ("PARTIALLY_VERIFIED", "unknown"),     # near-identical title (a typo)
        ("LIKELY_HALLUCINATION", "fail"),   # a near-miss title under real authors
    ]
    assert "preprint and published" in cs[6].note
    assert cs[0].expected["venue"] == "Advances in Neural Information Processing Systems"
    assert cs[1].expected["doi"] == "10.1109/cvpr.2016.90" or "resolves to" in cs[1].note
    assert cs[7].evidence["fields"]["title_similarity"] >= 90


def test_non_authoritative_index_turns_misses_into_unknown(index):
    ans = "1. Smith, J. (2019). A wholly invented study of transformer gravity. *Journal of Imaginary Results*.\n"
    (c,) = check(ans, sources=local(index, authoritative=False))
    assert c.evidence["status"] == "NOT_FOUND" and c.outcome == "unknown"


def test_missing_index_file_is_unknown_not_crash(tmp_path):
    (c,) = check("1. Smith, J. (2019). Some plausible paper title here. *Nature*.\n",
                 sources=local(str(tmp_path / "missing.sqlite3")))
    assert c.outcome == "unknown" and "citation index not found" in c.note


def test_title_only_claims_are_never_failed(index):
    (c,) = check('The classic "A Wholly Invented Study of Transformer Gravity" is often cited.', sources=local(index))
    assert c.evidence["status"] == "NOT_FOUND" and c.outcome == "unknown"


def test_check_shape_is_json_ready(index):
    import json

    (c,) = check("1. LeCun, Y., Bengio, Y., & Hinton, G. (2015). Deep learning. *Nature*.\n", sources=local(index))
    d = json.loads(json.dumps(c.to_dict()))
    assert d["verifier"] == "citations" and d["outcome"] == "pass"
    assert set(d["expected"]) >= {"title", "authors", "year", "venue", "doi", "source", "url"}
    assert d["evidence"]["status"] == "VERIFIED" and d["evidence"]["fields"]["authors"]["verdict"] == "match"
    assert d["found"]["title"] == "Deep learning" and d["span"][0] < d["span"][1]


def test_cli_index_build(tmp_path, capsys):
    from proxy.cli.main import main

    db = tmp_path / "cli.sqlite3"
    assert main(["index", "build", *map(str, FILES), "--db", str(db)]) == 0
    assert "6 records added" in capsys.readouterr().out
    assert LocalIndex(db).count() == 6
    assert main(["index", "build", str(tmp_path / "nope.bib"), "--db", str(db)]) == 2


def test_unconfirmed_doi_offline(index):
    ans = """1. LeCun, Y., Bengio, Y., & Hinton, G. (2015). Deep learning. *Nature*. https://doi.org/10.1038/nature99999
2. Vaswani, A., Shazeer, N., Parmar, N., Uszkoreit, J., Jones, L., Gomez, A. N., Kaiser, L., & Polosukhin, I. (2017). Attention is all you need. *NeurIPS*. doi:10.5555/3295222.3295349
3. LeCun, Y., Bengio, Y., & Hinton, G. (2015). Deep learning. *Nature*. https://doi.org/10.48550/arXiv.1505.00001
"""
    a, b, c = check(ans, sources=local(index))
    assert (a.evidence["status"], a.outcome) == ("CONFLICT", "fail") and "differs from the record's" in a.note
    assert (b.evidence["status"], b.outcome) == ("PARTIALLY_VERIFIED", "unknown") and "could not be confirmed" in b.note
    assert c.outcome != "fail"  # a preprint DOI next to the publisher's is not a contradiction


async def test_index_built_after_first_use_is_picked_up(tmp_path):
    from verifiers.citations import Sources, aclose_all, acheck

    db = tmp_path / "late.sqlite3"
    cfg = Sources.from_dict(local(str(db)))
    ans = "1. LeCun, Y., Bengio, Y., & Hinton, G. (2015). Deep learning. *Nature*.\n"
    (c,) = await acheck(ans, sources=cfg)
    assert c.outcome == "unknown"
    build_index(FILES, db)
    (c,) = await acheck(ans, sources=cfg)
    assert c.evidence["status"] == "VERIFIED"
    await aclose_all()


def test_records_given_as_objects_are_looked_up_by_identifier_like_file_records(tmp_path):
    """`build_index(records=[Record(...)])` with a DOI in publisher case (as `make demo`'s
    shipped record) must match a citation of that DOI: it was stored unnormalised and the
    correct ResNet reference came out CONFLICT ("stated DOI ... differs from the record's")."""
    from verifiers.citations._records import Record

    db = str(tmp_path / "objs.sqlite3")
    build_index([], db, records=[Record(
        title="Deep Residual Learning for Image Recognition",
        authors=["Kaiming He", "Xiangyu Zhang", "Shaoqing Ren", "Jian Sun"], year=2016,
        venue="IEEE Conference on Computer Vision and Pattern Recognition", doi="10.1109/CVPR.2016.90",
        arxiv_id="arXiv:1512.03385v1")])
    ref = ("References\n\n1. He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep Residual Learning for Image "
           "Recognition. Proceedings of the IEEE Conference on Computer Vision and Pattern Recognition. "
           "https://doi.org/10.1109/CVPR.2016.90\n")
    [c] = check(ref, sources=local(db))
    assert c.outcome == "pass" and c.evidence["status"] == "VERIFIED", c.note
    assert LocalIndex(db).lookup_arxiv_sync("1512.03385").records
