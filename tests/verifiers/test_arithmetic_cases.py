"""Real-data floors of the arithmetic verifier (bench/RESULTS.md), on ``$VERACITY_CASES/math``.

Fails when a floor is broken; skips when the case files are absent. The numbers themselves
are printed by ``bench/arithmetic_bench.py`` (and kept in ``bench/results/arithmetic.md``);
speed is measured there, not asserted here.
"""

from __future__ import annotations

import pytest

from bench.arithmetic_bench import (
    FLOOR_PROCESSBENCH_FALSE_ALARM,
    FLOOR_REFERENCE_FLAGS,
    Results,
    cases_dir,
    false_alarms,
    false_as_written,
    note_disagrees,
    run_model_solutions,
    run_processbench,
    run_reference,
)

pytestmark = [pytest.mark.slow, pytest.mark.cases, pytest.mark.timeout(600)]

BASE = cases_dir()
needs_cases = pytest.mark.skipif(not (BASE / "test.jsonl").is_file(), reason=f"no case files at {BASE}")


@pytest.fixture(scope="module")
def results() -> Results:
    res = Results()
    run_reference(res, BASE)
    run_model_solutions(res, BASE, model_text=False)
    run_processbench(res, BASE)
    return res


@needs_cases
def test_gsm8k_references_false_alarms(results: Results) -> None:
    for mode in ("kept", "stripped"):
        flagged = results.reference[mode]["flagged"]
        assert len(false_alarms(flagged)) <= FLOOR_REFERENCE_FLAGS, (mode, false_alarms(flagged))
        # a reference line that is wrong as written is rare: a surge means the judge is too lax
        assert len(flagged) <= FLOOR_REFERENCE_FLAGS + 2, (mode, flagged)
        assert results.reference[mode]["checked_claims"] > 3000  # the verifier actually checks


@needs_cases
def test_every_disagreeing_calculator_note_is_found(results: Results) -> None:
    notes = results.notes
    assert notes["disagreeing"] > 0
    assert notes["missed"] == 0, notes["missed_list"]
    assert notes["false_flags"] == 0, notes["false_list"]


@needs_cases
def test_processbench_false_alarm_rate(results: Results) -> None:
    pb = results.processbench
    assert pb["correct_solutions"] > 100
    assert pb["false_alarm_rate"] <= FLOOR_PROCESSBENCH_FALSE_ALARM, pb["false_alarm_list"]
    assert pb["flagged"] > 0  # some labelled arithmetic errors are caught


def test_note_ground_truth_is_independent_and_sane() -> None:
    assert note_disagrees("10*(2/3)=8") is True
    assert note_disagrees("10/3=3.33") is False
    assert note_disagrees("2+0.6+0.7+0.15=3.4499999999999997") is False
    assert note_disagrees("12*20,000=240,000") is False
    assert note_disagrees("x+56=86") is None
    assert false_as_written("$32 - $20 = $300") and not false_as_written("$320 - $20 = $300")
    assert not false_as_written("25 classmates + 1 teacher = 27")
    assert not false_as_written("3 + 4 = 11", before="10 - ")  # a cut expression is no excuse
