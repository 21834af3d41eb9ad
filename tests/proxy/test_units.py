"""The unit splitter of verified streams (:mod:`proxy.pipeline.units`): where units end, for
any cut of the text into deltas (every cut point is tried), and what may flow early."""

from __future__ import annotations

import pytest

from proxy.pipeline.units import MAX_PROSE_CHARS, UnitSplitter, split_units


def units_of(pieces: list[str]) -> list[tuple[str, str]]:
    s = UnitSplitter()
    out = []
    for p in pieces:
        out += [(u.kind, u.text) for u in s.feed(p)]
    out += [(u.kind, u.text) for u in s.finish()]
    assert "".join(t for _, t in out) == "".join(pieces)  # nothing lost, nothing added
    return out


def every_cut(text: str) -> list[list[tuple[str, str]]]:
    """The units for every way of cutting ``text`` in two, plus one character at a time."""
    outs = [units_of([text[:i], text[i:]]) for i in range(len(text) + 1)]
    outs.append(units_of(list(text)))
    return outs


CASES = {
    "sentences": ("Let me compute it. 1234 × 5678 = 7,006,552. Pi is 3.14 ok!",
                  [("sentence", "Let me compute it."), ("sentence", " 1234 × 5678 = 7,006,552."),
                   ("sentence", " Pi is 3.14 ok!")]),
    "abbreviations": ("See e.g. the note by Dr. Smith et al. on it. Next.",
                      [("sentence", "See e.g. the note by Dr. Smith et al. on it."), ("sentence", " Next.")]),
    "chinese": ("北京是中国的首都。上海是最大的城市！对吗？",
                [("sentence", "北京是中国的首都。"), ("sentence", "上海是最大的城市！"), ("sentence", "对吗？")]),
    "fence": ("Run this:\n\n```python\nx = 1. \nprint(x)\n```\nDone.",
              [("sentence", "Run this:\n"), ("blank", "\n"), ("code", "```python\nx = 1. \nprint(x)\n```\n"),
               ("sentence", "Done.")]),
    "tilde fence with a shorter inner fence": ("~~~~\n~~~\nstill code\n~~~~\n",
                                               [("code", "~~~~\n~~~\nstill code\n~~~~\n")]),
    "list": ("Products:\n- 2 × 3 = 6. Yes.\n- 3 × 7 = 21\n1. one. two\n",
             [("sentence", "Products:\n"), ("line", "- 2 × 3 = 6. Yes.\n"), ("line", "- 3 × 7 = 21\n"),
              ("line", "1. one. two\n")]),
    "references": ("Vaswani, A., Shazeer, N. (2017). Attention Is All You Need. NeurIPS.\n"
                   "[2] Smith, J. (2019). A title. A journal.\n",
                   [("line", "Vaswani, A., Shazeer, N. (2017). Attention Is All You Need. NeurIPS.\n"),
                    ("line", "[2] Smith, J. (2019). A title. A journal.\n")]),
    "not a reference": ("Sure, I can. Smith, John said hi.",
                        [("sentence", "Sure, I can."), ("sentence", " Smith, John said hi.")]),
    "closers stay": ('He said "stop." Then (it ended.) Fine',
                     [("sentence", 'He said "stop."'), ("sentence", " Then (it ended.)"), ("sentence", " Fine")]),
}


@pytest.mark.parametrize("name", CASES)
def test_units_do_not_depend_on_where_the_deltas_were_cut(name):
    text, want = CASES[name]
    for got in every_cut(text):
        assert got == want


def test_a_mark_at_the_end_of_what_arrived_waits_for_the_next_character():
    s = UnitSplitter()
    assert s.feed("It is 3.") == []          # 3.14 or a sentence end: the next character decides
    assert [u.text for u in s.feed("14 ok. ")] == ["It is 3.14 ok."]
    assert s.pending == " "


def test_an_unclosed_fence_is_one_code_unit_at_the_end():
    assert split_units("```python\nprint(1)\n") == [u for u in split_units("```python\nprint(1)\n")]
    assert [(u.kind, u.text) for u in split_units("```python\nprint(1)\n")] == [("code", "```python\nprint(1)\n")]


def test_a_long_run_without_a_sentence_end_is_cut_at_a_space():
    text = "word " * (MAX_PROSE_CHARS // 5 + 50)
    units = UnitSplitter().feed(text)
    assert units and len(units[0].text) <= MAX_PROSE_CHARS and units[0].text.endswith(" ")


def test_blank_units_are_not_checkable():
    units = split_units("A.\n\nB.")
    assert [(u.kind, u.checkable) for u in units] == [("sentence", True), ("blank", False), ("sentence", True)]


def test_flowable_prose_keeps_the_possible_sentence_end():
    s = UnitSplitter()
    s.feed("Paris is the capital of France.")
    n = s.flowable()
    assert s.release(n) == "Paris is the capital of France"
    assert [u.text for u in s.feed(" It")] == ["."]       # the boundary is still seen
    assert s.flowable() == len(" It")


@pytest.mark.parametrize("start", ["``", "`", "- ", "1. x", "12", "[3", "# T", "| a", "Vaswani, A", "Smith,",
                                   "```py"])
def test_nothing_flows_on_a_line_that_is_or_may_become_a_line_unit_or_fence(start):
    s = UnitSplitter()
    s.feed(start)
    assert s.flowable() == 0


def test_nothing_flows_inside_a_code_block():
    s = UnitSplitter()
    s.feed("```python\nprint(")
    assert s.flowable() == 0
