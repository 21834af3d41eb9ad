"""Long differential run of the arithmetic verifier against independent oracles.

The generator and the oracle are those of ``tests/verifiers/test_arithmetic_oracle.py``
(``tests/arith_oracle_gen.py``: expression trees rendered in every notation inside prose,
display math, tables and code comments; the oracle evaluates the tree with ``Fraction``),
here with a seeded ``random.Random`` instead of hypothesis, for as many statements as asked.

Counts per notation, for right statements (the right value, correctly rounded) and wrong ones
(two or more units of the last stated place off):

* false alarms: a right statement judged ``fail`` (must be 0);
* wrong passed: a wrong statement judged ``pass`` (must be 0);
* wrong expected: a ``fail`` whose ``expected`` is not the oracle rounded to its places (must be 0);
* misses: a wrong statement not failed (``unknown`` or not read as a claim): the cost of caution;
* unread: no check at all.

Also ``equivalent()`` on generated identities / near-identities (oracle: exact evaluation at
random rational points), unit conversions (oracle: pint) and the planner's ``calculate``.

Run: ``.venv/bin/python bench/arithmetic_oracle_bench.py [--statements N] [--seed S]
[--chunk K] [--write]``; ``--write`` writes ``bench/results/arithmetic_oracle.md``.
Defaults: 100,000 statements, seed 20261206, in chunks of 10,000 (progress on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import arith_oracle_gen as gen  # noqa: E402
from tests.verifiers.test_arithmetic_oracle import expected_matches  # noqa: E402
from verifiers.arithmetic import check, equivalent, warm_up  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "arithmetic_oracle.md"


def run_statements(n: int, seed: int, chunk: int, examples: dict[str, list[str]]) -> dict[str, Counter]:
    """``n`` statements, notations and right/wrong in turn; per-notation counters."""
    rng = random.Random(seed)
    counts: dict[str, Counter] = {k: Counter() for k in gen.NOTATIONS}
    done = 0
    t0 = time.perf_counter()
    while done < n:
        notation = gen.NOTATIONS[done % len(gen.NOTATIONS)]
        right = (done // len(gen.NOTATIONS)) % 2 == 0
        try:
            stmt = gen.statement(rng, notation, right)
        except gen.NoValue:
            continue
        done += 1
        c = counts[notation]
        kind = "right" if right else "wrong"
        c[kind] += 1
        checks = check(stmt.text, budget_ms=10_000)
        outcomes = {x.outcome for x in checks}
        if not checks:
            c[f"{kind} unread"] += 1
        for x in checks:
            if x.outcome == "fail" and not expected_matches(x.expected, stmt.oracle):
                c["wrong expected"] += 1
                _example(examples, "wrong expected", f"{stmt.text!r}: expected {x.expected}, oracle {float(stmt.oracle)!r}")
        if right and "fail" in outcomes:
            c["false alarm"] += 1
            _example(examples, "false alarm", f"{stmt.text!r}: " + "; ".join(
                f"{x.claim!r} expected {x.expected}" for x in checks if x.outcome == "fail"))
        if right and outcomes == {"pass"}:
            c["right passed"] += 1
        if not right and "pass" in outcomes:
            c["wrong passed"] += 1
            _example(examples, "wrong passed", repr(stmt.text))
        if not right and "fail" in outcomes:
            c["wrong caught"] += 1
        if not right and checks and "fail" not in outcomes:
            c["wrong unknown"] += 1
            notes = " ".join(x.note for x in checks)
            why = ("second evaluation disagreed" if "disagree" in notes else
                   "second evaluation could not read" if "not confirmed" in notes else
                   "consistent with rounded inputs" if "rounded intermediate" in notes else
                   "truncated / double rounding" if ("truncat" in notes or "rounding" in notes) else "other")
            c[f"unknown: {why}"] += 1
            _example(examples, f"miss ({notation})", f"{stmt.text!r}: " + "; ".join(
                f"{x.outcome} {x.note}" for x in checks), limit=3)
        if done % chunk == 0:
            print(f"{done} statements, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return counts


def _example(examples: dict[str, list[str]], key: str, text: str, limit: int = 10) -> None:
    lst = examples.setdefault(key, [])
    if len(lst) < limit:
        lst.append(text)


def run_equivalence(n: int, seed: int, examples: dict[str, list[str]]) -> Counter:
    rng = random.Random(seed + 1)
    c: Counter = Counter()
    while c["identities"] + c["near"] < n:
        a = gen.sym_tree(rng)
        identity = rng.random() < 0.5
        b = gen.rewrite(a, rng) if identity else gen.perturb(a, rng)
        d = gen.differs(a, b, rng)
        if d is None or (not identity and not d):
            continue
        style = gen.FORMULA_STYLES[rng.choice(sorted(gen.FORMULA_STYLES))]
        ra, rb = gen.render(a, style), gen.render(b, style)
        out = equivalent(ra, rb).outcome
        key = "identities" if identity else "near"
        c[key] += 1
        c[f"{key} {out}"] += 1
        if (identity and out == "fail") or (not identity and out == "pass"):
            _example(examples, "equivalence wrong verdict", f"{ra!r} vs {rb!r}: {out}")
    return c


def run_units(n: int, seed: int, examples: dict[str, list[str]]) -> Counter:
    import pint
    from fractions import Fraction

    ureg = pint.UnitRegistry()
    rng = random.Random(seed + 2)
    c: Counter = Counter()
    while c["right"] + c["wrong"] < n:
        right = rng.random() < 0.5
        text, oracle, d, _ = gen.conversion(rng, right, ureg)
        frac = oracle * 10**d - round(oracle * 10**d)
        if abs(abs(frac) - Fraction(1, 2)) <= Fraction(1, 10**6):
            continue  # a rounding tie: either neighbour is right
        kind = "right" if right else "wrong"
        c[kind] += 1
        conv = [x for x in check(text) if x.evidence.get("kind") == "unit_conversion"]
        outs = {x.outcome for x in conv}
        c[f"{kind} " + ("/".join(sorted(outs)) if outs else "unread")] += 1
        if right and "fail" in outs:
            _example(examples, "unit false alarm", repr(text))
        if not right and "pass" in outs:
            _example(examples, "unit wrong passed", repr(text))
        for x in conv:
            if x.outcome == "fail" and not expected_matches(x.expected, oracle):
                c["wrong expected"] += 1
                _example(examples, "unit wrong expected", f"{text!r}: {x.expected} vs {float(oracle)!r}")
    return c


def run_calculate(n: int, seed: int, examples: dict[str, list[str]]) -> Counter:
    from decimal import Decimal
    from fractions import Fraction

    from verifiers.planner import Toolbox
    from verifiers.planner._tools import CalculateIn

    tool = Toolbox().get("calculate")
    rng = random.Random(seed + 3)
    c: Counter = Counter()
    notations = [k for k in gen.STYLES]

    async def main() -> None:
        while c["expressions"] < n:
            t = gen.tree(rng)
            try:
                v = gen.value(t)
            except gen.NoValue:
                continue
            expr = gen.render(t, gen.STYLES[rng.choice(notations)])
            c["expressions"] += 1
            out = await tool.run(CalculateIn(expression=expr))
            if out.error is not None:
                c["refused"] += 1
                _example(examples, "calculate refused", f"{expr!r}: {out.error}", limit=5)
                continue
            # no "exact" key: the value is written exactly; "exact": None: 10 significant digits
            got = Fraction(out.data["exact"]) if out.data.get("exact") else Fraction(Decimal(out.data["value"]))
            exact = bool(out.data.get("exact")) or "exact" not in out.data
            ok = got == v if exact else abs(got - v) <= abs(v) / 10**9
            c["right" if ok else "wrong value"] += 1
            if not ok:
                _example(examples, "calculate wrong value", f"{expr!r}: {out.data} vs {v}")

    asyncio.run(main())
    return c


def report(counts: dict[str, Counter], eq: Counter, units: Counter, calc: Counter, examples: dict[str, list[str]],
           seconds: float, seed: int) -> str:
    total = Counter()
    for c in counts.values():
        total.update(c)
    lines = [
        "# Arithmetic verifier against independent oracles (long run)",
        "",
        f"Command: `.venv/bin/python bench/arithmetic_oracle_bench.py --statements {total['right'] + total['wrong']} "
        f"--seed {seed} --write` ({seconds:.0f} s on the shared machine). Generator and oracle: "
        "`tests/arith_oracle_gen.py` (expression trees of whole numbers, decimals and fractions with + - × ÷ "
        "and small powers, rendered per notation inside prose, display math, Markdown tables and code "
        "comments; the oracle is exact `Fraction` evaluation of the tree). The bounded, fixed-seed version "
        "runs in `tests/verifiers/test_arithmetic_oracle.py`.",
        "",
        "| notation | right | false alarms | right passed | wrong | wrong passed | wrong caught | wrong unknown | wrong unread | fail with wrong `expected` |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, c in [*counts.items(), ("**all**", total)]:
        lines.append(f"| {name} | {c['right']} | {c['false alarm']} | {c['right passed']} | {c['wrong']} | "
                     f"{c['wrong passed']} | {c['wrong caught']} | {c['wrong unknown']} | {c['wrong unread']} | "
                     f"{c['wrong expected']} |")
    lines += [
        "",
        "Why wrong statements were left `unknown`: " + ", ".join(
            f"{k[9:]} {v}" for k, v in sorted(total.items()) if k.startswith("unknown: ")) + ".",
        "",
        "*right passed*: every check of the statement passed (the rest are `unknown` or unread: never a false "
        "alarm). *wrong caught*: a `fail`; *wrong unknown*: read but left undecided (the second evaluation "
        "disagreed or could not read it, a rounding-consistent value...); *wrong unread*: no claim found.",
        "",
        f"**equivalent()**: {eq['identities']} generated identities -> pass {eq['identities pass']}, unknown "
        f"{eq['identities unknown']}, fail {eq['identities fail']}; {eq['near']} near-identities -> fail "
        f"{eq['near fail']}, unknown {eq['near unknown']}, pass {eq['near pass']} (oracle: exact evaluation at "
        "random rational points).",
        "",
        f"**unit conversions** (oracle: pint): right {units['right']} -> "
        + ", ".join(f"{k[6:]} {v}" for k, v in sorted(units.items()) if k.startswith("right "))
        + f"; wrong {units['wrong']} -> "
        + ", ".join(f"{k[6:]} {v}" for k, v in sorted(units.items()) if k.startswith("wrong ") and k != "wrong expected")
        + f"; fail with a wrong `expected`: {units['wrong expected']}.",
        "",
        f"**planner `calculate`**: {calc['expressions']} expressions -> oracle's value {calc['right']}, "
        f"wrong value {calc['wrong value']}, refused {calc['refused']}.",
        "",
    ]
    if examples:
        lines += ["## Examples", ""]
        for k, v in sorted(examples.items()):
            lines.append(f"- {k}:")
            lines += [f"  - `{x}`" for x in v]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--statements", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=20261206)
    ap.add_argument("--chunk", type=int, default=10_000)
    ap.add_argument("--formulas", type=int, default=2_000)
    ap.add_argument("--conversions", type=int, default=5_000)
    ap.add_argument("--calculations", type=int, default=5_000)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    warm_up()
    examples: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    counts = run_statements(a.statements, a.seed, a.chunk, examples)
    eq = run_equivalence(a.formulas, a.seed, examples)
    units = run_units(a.conversions, a.seed, examples)
    calc = run_calculate(a.calculations, a.seed, examples)
    text = report(counts, eq, units, calc, examples, time.perf_counter() - t0, a.seed)
    print(text)
    if a.write:
        RESULTS.write_text(text, encoding="utf-8")
    bad = sum(c["false alarm"] + c["wrong passed"] + c["wrong expected"] for c in counts.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
