"""Reference extraction: identifiers, styles, BibTeX, in-text linking, Chinese, and non-references."""

from __future__ import annotations

import pytest

from verifiers.citations import extract
from verifiers.citations._records import normalize_arxiv, normalize_doi, parse_person
from verifiers.citations._styles import STYLES, render

VIT = {"title": "An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale",
       "author": "Alexey Dosovitskiy and Lucas Beyer and Alexander Kolesnikov and Dirk Weissenborn",
       "year": "2021", "booktitle": "ICLR", "doi": "10.48550/arXiv.2010.11929"}


def kinds(claims):
    return [c.kind for c in claims]


# --------------------------------------------------------------------------- identifiers


@pytest.mark.parametrize("raw,doi", [
    ("see https://doi.org/10.1038/nature14539.", "10.1038/nature14539"),
    ("(doi:10.1145/3442188.3445922)", "10.1145/3442188.3445922"),
    ("DOI: 10.1016/S0140-6736(97)11096-0.", "10.1016/s0140-6736(97)11096-0"),
    ("http://dx.doi.org/10.1000/xyz123,", "10.1000/xyz123"),
    ("“10.1109/CVPR.2016.90”", "10.1109/cvpr.2016.90"),
])
def test_doi_forms_and_trailing_punctuation(raw, doi):
    cs = [c for c in extract(raw) if c.doi]
    assert [c.doi for c in cs] == [doi]


def test_doi_path_traversal_is_refused():
    assert normalize_doi("10.1234/../../admin") is None


@pytest.mark.parametrize("raw,arx", [
    ("arXiv:2010.11929v2", "2010.11929"),
    ("https://arxiv.org/abs/1706.03762", "1706.03762"),
    ("https://arxiv.org/pdf/2303.08774v6.pdf", "2303.08774"),
    ("arXiv preprint arXiv:1810.04805", "1810.04805"),
    ("arXiv:hep-th/9901001v1", "hep-th/9901001"),
    ("https://arxiv.org/abs/math.GT/0309136", "math.GT/0309136"),
    ("10.48550/arXiv.2106.09685", "2106.09685"),
])
def test_arxiv_forms(raw, arx):
    cs = extract(f"See {raw} for details.")
    assert [c.arxiv_id for c in cs] == [arx]


def test_bare_numbers_are_not_arxiv_ids():
    assert extract("We measured 2010.11929 units and 1706.0376 more.") == []
    assert normalize_arxiv("1713.12345") is None  # month 13


def test_isbn_checksum():
    cs = extract("周志华.《机器学习》. ISBN 978-7-302-42328-7. Also ISBN 978-7-302-42328-8 (bad).")
    assert [c.isbn for c in cs if c.isbn] == ["9787302423287"]


# --------------------------------------------------------------------------- styles


@pytest.mark.parametrize("style", [s for s in STYLES])
def test_every_rendered_style_round_trips(style):
    ref = render(VIT, style)
    text = f"```bibtex\n{ref}\n```" if style == "bibtex" else f"Sources:\n\n1. {ref}\n"
    cs = [c for c in extract(text) if c.kind in ("entry", "bibtex")]
    assert len(cs) == 1, (style, ref, cs)
    c = cs[0]
    assert c.title and c.title.lower().startswith("an image is worth 16x16 words"), (style, c.title)
    assert c.year == 2021
    assert c.people and c.people[0].key == "dosovitskiy"
    assert c.venue and "ICLR" in c.venue
    if style not in ("mla",):
        assert c.arxiv_id == "2010.11929"


def test_apa_fields_and_span():
    text = ("Intro text.\n\nReferences\n"
            "Vaswani, A., Shazeer, N., & Parmar, N. (2017). Attention is all you need. In *Advances in Neural "
            "Information Processing Systems* (pp. 5998-6008).\n")
    (c,) = extract(text)
    assert c.kind == "entry" and c.style == "apa"
    assert c.title == "Attention is all you need"
    assert c.authors == ["Vaswani, A.", "Shazeer, N.", "Parmar, N"]
    assert c.venue == "Advances in Neural Information Processing Systems"
    assert c.pages == "5998-6008"
    assert text[c.span[0]:c.span[1]].startswith("Vaswani, A.")


def test_ieee_et_al_and_mla_inverted_first_author():
    (c,) = extract('[3] K. He et al., "Deep residual learning for image recognition," in Proc. CVPR, 2016, pp. 770-778.')
    assert c.et_al and c.people[0] == parse_person("K. He") and c.venue == "CVPR" and c.year == 2016
    (m,) = extract('- Jockers, Matthew, and Daniela Witten. "A Comparative Study of Machine Learning Methods for '
                   'Authorship Attribution." *Literary and Linguistic Computing*, vol. 25, no. 2, 2010, pp. 215-223.')
    assert [p.key for p in m.people] == ["jockers", "witten"]
    assert m.venue == "Literary and Linguistic Computing" and m.year == 2010


def test_chicago_acm_vancouver():
    (c,) = extract('1. Jockers, Matthew L., and Daniela M. Witten. 2010. "A Comparative Study of Machine Learning '
                   'Methods for Authorship Attribution." Literary and Linguistic Computing 25 (2): 215-23.')
    assert c.year == 2010 and c.title.startswith("A Comparative Study") and [p.key for p in c.people] == ["jockers", "witten"]
    (a,) = extract("1. Kaiming He, Xiangyu Zhang, Shaoqing Ren, and Jian Sun. 2016. Deep Residual Learning for Image "
                   "Recognition. In Proceedings of the IEEE Conference on Computer Vision and Pattern Recognition. 770-778.")
    assert a.style == "acm" and a.title == "Deep Residual Learning for Image Recognition" and a.year == 2016
    assert len(a.people) == 4
    (v,) = extract("1. He K, Zhang X, Ren S, Sun J. Deep residual learning for image recognition. CVPR. 2016;770-8.")
    assert v.title == "Deep residual learning for image recognition" and v.people[0].key == "he"


def test_bibtex_block_with_macros_falls_back_to_bibtexparser():
    text = ('@string{nips = "Advances in Neural Information Processing Systems"}\n'
            "@inproceedings{v17, title={Attention is {All} you Need}, author={Vaswani, Ashish and others}, "
            "booktitle=nips, year=2017}")
    cs = [c for c in extract(text) if c.kind == "bibtex"]
    assert cs and cs[0].title == "Attention is All you Need" and cs[0].et_al and cs[0].year == 2017


def test_malformed_bibtex_does_not_crash():
    assert isinstance(extract("@article{broken, title={Unclosed"), list)


def test_chinese_gbt7714_and_title_marks():
    text = ("参考文献\n"
            "[1] 周志华, 王魏, 高尉. 机器学习中的稀疏表示方法研究[J]. 计算机学报, 2016, 39(4): 1-20.\n\n"
            "周志华的《机器学习》是经典教材。")
    cs = extract(text)
    entry = [c for c in cs if c.kind == "entry"][0]
    assert entry.style == "gbt7714" and entry.title == "机器学习中的稀疏表示方法研究"
    assert [p.surname for p in entry.people] == ["周", "王", "高"] and entry.year == 2016 and entry.venue == "计算机学报"
    titles = [c.title for c in cs if c.kind == "title"]
    assert titles == ["机器学习"]


# --------------------------------------------------------------------------- in-text citations


def test_in_text_citations_link_to_entries():
    text = ("Vision transformers (Dosovitskiy et al., 2021; Touvron & Cord, 2021) beat CNNs; He et al. (2016) "
            "introduced residual nets. Dosovitskiy et al. (ICLR 2021) scale well.\n\nReferences\n"
            "- Dosovitskiy, A., Beyer, L., & Kolesnikov, A. (2021). An image is worth 16x16 words. *ICLR*.\n"
            "- He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learning for image recognition. *CVPR*.\n")
    cs = extract(text)
    entries = {c.people[0].key: c for c in cs if c.kind == "entry"}
    assert len(entries["dosovitskiy"].in_text) == 2
    assert len(entries["he"].in_text) == 1
    orphans = [c for c in cs if c.kind == "in_text"]
    assert [(o.authors, o.year) for o in orphans] == [(["Touvron"], 2021)]


def test_quoted_title_with_author_year_in_same_sentence():
    cs = extract('As Vaswani et al. (2017) argue in "Attention Is All You Need", attention suffices.')
    (t,) = [c for c in cs if c.kind == "title"]
    assert t.title == "Attention Is All You Need" and t.year == 2017 and t.authors == ["Vaswani"] and t.et_al


# --------------------------------------------------------------------------- false positives


@pytest.mark.parametrize("text", [
    "1. Preheat the oven to 200 degrees.\n2. Mix the flour and eggs.\n",
    "- The model is fast (2x faster in 2023).\n- It uses less memory.\n",
    'He said "yes" and "no" and "maybe so".',
    "The year 2021 was good. In (2020) results were different.",
    "*Note*: this is *important* to remember.",
    "",
])
def test_ordinary_text_has_no_claims(text):
    assert [c for c in extract(text) if c.kind != "in_text"] == []


def test_non_string_input_is_a_clear_error():
    with pytest.raises(TypeError):
        extract(None)  # type: ignore[arg-type]


def test_huge_input_is_bounded():
    text = ("1. Smith, J. (2020). A plausible title for a paper. *Journal*.\n" * 20000)
    cs = extract(text)
    assert 0 < len(cs) <= 20000
