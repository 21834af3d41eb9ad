"""No shared mutable numeric state (docs/design.md "No CPU-heavy work on the event loop": "No
process-global numeric state (mpmath precision): requests run concurrently"). mpmath's module-level
precision is one per process; the equivalence test used to set it (``workdps``) inside worker
threads, so a true identity such as ``(a+b+c+d+e+f)^{60}`` against the same sum reordered was judged
``fail`` in some concurrent runs. The verdicts of concurrent runs (threads, asyncio tasks) must
equal those of a sequential run. A tiny thread switch interval makes the interleavings that broke it
happen in every run instead of now and then."""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import mpmath
import pytest

from verifiers.arithmetic import check, equivalent

PAIRS = [
    ("(a+b+c+d+e+f)^{60}", "(f+e+d+c+b+a)^{60}"),   # true: too large for SymPy's expansion, numeric path
    ("(a+b+c+d+e+f)^{60}", "(b+a+c+d+f+e)^{60}"),   # true
    ("(x+1)^{45}", "(1+x)^{45}"),                   # true
    ("(x+1)^{45}", "(1+x)^{45} + 10^{-30}"),        # false by a hair: needs the full working precision
    ("sqrt(4x^2)", "2x"),                           # false for x < 0
    ("(a+b)^2", "a^2 + 2ab + b^2"),                 # true, symbolically
]
TEXTS = [
    "\\[ (x+1)^3 = x^3 + 3x^2 + 3x + 1 \\]",
    "A = 10000 * (1 + 0.05/4) ** (4*3) = 11607.55",
    "2 ** 10 = 1000",
]


def _verdicts() -> list[str]:
    return [equivalent(a, b).outcome for a, b in PAIRS] + [
        ",".join(c.outcome for c in check(t, budget_ms=60_000)) for t in TEXTS]


def _one(k: int) -> str:
    n = len(PAIRS)
    if k < n:
        return equivalent(*PAIRS[k]).outcome
    return ",".join(c.outcome for c in check(TEXTS[k - n], budget_ms=60_000))


@pytest.fixture
def busy_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def test_sequential_verdicts_are_the_expected_ones():
    assert _verdicts() == ["pass", "pass", "pass", "fail", "fail", "pass", "pass", "pass", "fail"]


def test_threads_give_the_sequential_verdicts(busy_switching):
    expected = _verdicts()
    jobs = list(range(len(expected))) * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(_one, jobs))
    assert got == [expected[k] for k in jobs]


def test_asyncio_tasks_give_the_sequential_verdicts(busy_switching):
    expected = _verdicts()
    jobs = list(range(len(expected))) * 4

    async def main() -> list[str]:
        return list(await asyncio.gather(*(asyncio.to_thread(_one, k) for k in jobs)))

    assert asyncio.run(main()) == [expected[k] for k in jobs]


def test_other_code_changing_mpmath_precision_does_not_change_verdicts(busy_switching):
    # another library in the process (SymPy's evalf uses mpmath.workprec) moves the global
    # precision while the verifier runs: its verdicts must not move with it
    expected = _verdicts()
    stop = threading.Event()

    def meddle() -> None:
        while not stop.is_set():
            mpmath.mp.dps = 8

    t = threading.Thread(target=meddle)
    t.start()
    try:
        got = _verdicts()
    finally:
        stop.set()
        t.join()
        mpmath.mp.dps = 15
    assert got == expected
