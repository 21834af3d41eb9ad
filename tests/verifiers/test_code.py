"""Code verifier: claims, tiers 1-2 (no execution) and tier 3 in a real sandbox.

Tier-3 tests use the docker backend when available, else bwrap; they are skipped when neither
can run here (unless VERACITY_REQUIRE_SANDBOX names one), and the pandas ones when the sandbox
has no pandas (bwrap without VERACITY_SANDBOX_ROOTFS).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.fixtures.sandboxes import FAST, first_box, require_pandas
from verifiers import code, sandbox

SHORT = sandbox.Limits(timeout_s=6, cpu_s=6)


#: starts sandboxes, servers or sweeps the case files: left out of `make test-fast`
pytestmark = pytest.mark.slow


def fence(src: str, lang: str = "python") -> str:
    return f"```{lang}\n{src.strip(chr(10))}\n```"


def outcomes(checks) -> list[str]:
    return [c.outcome for c in checks]


@pytest.fixture(scope="module")
def box():
    yield from first_box(FAST)


@pytest.fixture(scope="module")
def pandas_box(box):
    return require_pandas(box)


NONE = sandbox.get("none")


# --- tiers 1 and 2: no execution ---------------------------------------------------------------

def test_syntax_error_is_fail_with_answer_line_and_column():
    answer = "Try this:\n\n" + fence("def f(x)\n    return x")
    [c] = code.check(answer, sandbox=NONE)
    assert c.outcome == "fail" and c.evidence["tier"] == 1
    assert c.evidence["line"] == 4 and c.evidence["column"] == 9  # answer line of `def f(x)`
    # the note counts lines as the reader sees them in the block, and names the block
    assert c.evidence["block_line"] == 1 and "block 1, line 1" in c.note
    assert c.evidence["exception"]["type"] == "SyntaxError"
    assert c.span == (answer.index("```"), len(answer))


def test_template_placeholder_is_unknown_not_fail():
    [c] = code.check(fence("client = Client(api_key=<YOUR_API_KEY>)"), sandbox=NONE)
    assert c.outcome == "unknown"


def test_misspelled_builtin_is_static_fail():
    [c] = code.check(fence("total = 3\npritn(total)"), sandbox=NONE)
    assert c.outcome == "fail" and c.evidence["tier"] == 2
    assert "did you mean 'print'" in c.note and c.evidence["line"] == 3
    assert c.evidence["block_line"] == 2 and "block 1, line 2" in c.note


def test_a_runtime_failure_in_the_second_block_names_that_block_and_its_own_line(box):
    answer = ("Setup:\n" + fence("data = [1, 2, 3]\nlimit = 2") + "\nThen:\n"
              + fence("total = sum(data)\nratio = total / (limit - 2)\nprint(ratio)"))
    failing = [c for c in code.check(answer, sandbox=box) if c.outcome == "fail"]
    assert failing, "the division by zero in block 2 is a failure"
    c = failing[0]
    assert c.evidence["exception"]["type"] == "ZeroDivisionError"
    assert (c.evidence["error_block"], c.evidence["block_line"]) == (2, 2) and "block 2, line 2" in c.note
    assert c.evidence["line"] == answer.split("\n").index("ratio = total / (limit - 2)") + 1


def test_missing_conventional_import_is_fail():
    [c] = code.check(fence("import math\nx = np.array([1, 2])"), sandbox=NONE)
    assert c.outcome == "fail" and "import numpy as np" in c.note


def test_notebook_fragments_are_not_false_alarms():
    answer = "\n".join([
        fence("df['total'] = df['price'] * df['qty']"),  # the user's df
        fence("from math import *\nprint(sqrt(16))"),  # star import
        fence("result = helper(2)"),  # defined in a later block
        fence("def helper(x):\n    return x * 2"),
        fence("%matplotlib inline\nimport math\nprint(math.pi)"),  # IPython magic
        fence("    def method(self):\n        return self.x"),  # indented excerpt
        fence("display(42)"),
    ])
    checks = code.check(answer, sandbox=NONE)
    assert "fail" not in outcomes(checks)
    assert len(checks) == 7


def test_other_languages_are_reported_not_checked():
    [c] = code.check(fence("console.log(1 +)", "javascript"), sandbox=NONE)
    assert c.outcome == "unknown" and "not checked" in c.note


def test_output_blocks_are_not_code():
    answer = fence("print(6 * 7)") + "\nOutput:\n" + fence("42", "") + "\n" + fence("[1, 2, 3]", "")
    checks = code.check(answer, sandbox=NONE)
    assert all("block 2" not in c.claim and "block 3" not in c.claim for c in checks if c.claim.startswith("block"))


def test_none_sandbox_makes_tier3_unknown_with_reason():
    checks = code.check(fence("def f(x):\n    return x + 1\n\nprint(f(1))  # Output: 2"), sandbox=NONE)
    assert outcomes(checks) == ["unknown", "unknown"]
    assert "never executes" in checks[0].note


@pytest.mark.parametrize("answer", ["", "no code here", "```python\n", "```\n" + "(" * 500 + "\n```",
                                    "```python\n\x00\n```", "~~~py\nprint(1\n~~~", "````python\n```\n````"])
def test_bad_input_never_crashes(answer):
    checks = code.check(answer, sandbox=NONE)
    assert all(c.outcome in ("pass", "fail", "unknown") for c in checks)


def test_question_examples_parsing_is_conservative():
    from verifiers.code._extract import question_examples

    q = '''def tri(n):
    """tri(1) = 3
    tri(n) = 1 + n / 2, if n is even.
    For example:
    tri(4) = 3
    Examples:
    tri(3) = [1, 3, 2, 8]
    is_happy(a) => False
    bf("Earth", "Mercury") ==> ("Venus")
    get_odd_collatz(5) returns [1, 5] # because ...
    f(2, 3) ==> 5
    """'''
    ex = {(e.source, e.want) for e in question_examples(q, {"tri", "is_happy", "bf", "get_odd_collatz", "f"})}
    assert ("f(2, 3)", "5") in ex and ("get_odd_collatz(5)", "[1, 5]") in ex
    assert ('bf("Earth", "Mercury")', '"Venus"') in ex  # compared leniently with a 1-tuple
    assert not any(s.startswith("tri(") for s, _ in ex)  # math notation, not examples
    assert not any(s.startswith("is_happy(") for s, _ in ex)  # non-literal argument


# --- tier 3: in the sandbox --------------------------------------------------------------------

def test_pandas_and_bug_is_caught(pandas_box):
    answer = "Filter like this:\n" + fence(
        "import pandas as pd\ndf = pd.DataFrame({'Age': [10, 150, 30]})\n"
        "adults = df[(df['Age'] > 0) and (df['Age'] < 120)]\nprint(adults)")
    [c] = code.check(answer, sandbox=pandas_box)
    assert c.outcome == "fail" and c.evidence["tier"] == 3
    assert c.evidence["exception"]["type"] == "ValueError"
    assert "truth value of a Series is ambiguous" in c.evidence["exception"]["message"]
    assert any("and (df['Age'] < 120)" in ln for ln in c.evidence["traceback"])
    assert c.evidence["line"] == 5 and c.evidence["block_line"] == 3
    assert any(ln.startswith("block 1, line 3") for ln in c.evidence["traceback"])


def test_pandas_fixed_version_passes(pandas_box):
    [c] = code.check(fence("import pandas as pd\ndf = pd.DataFrame({'Age': [10, 150, 30]})\n"
                           "print(len(df[(df['Age'] > 0) & (df['Age'] < 120)]))  # Output: 2"), sandbox=pandas_box)[:1]
    assert c.outcome == "pass"


def test_misspelled_imports(box):
    [c] = code.check(fence("import colections\nprint(colections.Counter('aab'))"), sandbox=box)
    assert c.outcome == "fail" and "did you mean 'collections'" in c.note
    [c] = code.check(fence("from collections import Countr\nprint(Countr('aab'))"), sandbox=box)
    assert c.outcome == "fail" and c.evidence["exception"]["type"] == "ImportError"
    [c] = code.check(fence("import requests\nprint(requests.get('https://example.com'))"), sandbox=box)
    assert c.outcome == "unknown"  # a real package the sandbox lacks: not a misspelling


def test_answer_asserts_and_docstring_examples(box):
    checks = code.check(fence('''
def square(x):
    """
    >>> square(3)
    9
    >>> square(4)
    15
    """
    return x * x

assert square(2) == 4
'''), sandbox=box)
    assert outcomes(checks) == ["pass", "pass", "fail"]
    assert checks[2].expected == "15" and checks[2].found == "16"
    bad = code.check(fence("def inc(x):\n    return x + 2\n\nassert inc(1) == 2"), sandbox=box)
    assert bad[0].outcome == "fail" and bad[0].evidence["exception"]["type"] == "AssertionError"


def test_stated_outputs(box):
    wrong = code.check(fence("def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # Output: 6"), sandbox=box)
    assert outcomes(wrong) == ["pass", "fail"] and wrong[1].found == "5"
    right = code.check(fence("nums = [3, 1, 2]\nprint(sorted(nums))  # prints [1, 2, 3]\nsum(nums)  # -> 6")
                       + "\n\nOutput:\n" + fence("[1, 2, 3]", ""), sandbox=box)
    assert outcomes(right) == ["pass", "pass", "pass", "pass"]
    prose = code.check(fence("print(sum(range(4)))") + "\nThis prints `7`.", sandbox=box)
    assert outcomes(prose) == ["pass", "fail"]
    rounded = code.check(fence("import math\nprint(math.pi)  # Output: 3.14"), sandbox=box)
    assert outcomes(rounded) == ["pass", "pass"]


def test_question_examples_run_against_answer_functions(box):
    question = ("Write `def middle(xs)` returning the median.\n"
                "Examples:\n    middle([1, 2, 3]) -> 2\n    >>> middle([1, 2, 3, 4])\n    2.5\n"
                "    middle([5]) ==> 5")
    wrong = fence("def middle(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2]")
    checks = code.check(wrong, question, sandbox=box)
    ex = [c for c in checks if c.evidence.get("origin") == "question"]
    assert sorted(c.outcome for c in ex) == ["fail", "pass", "pass"]
    failed = next(c for c in ex if c.outcome == "fail")
    assert failed.evidence["inputs"] == "middle([1, 2, 3, 4])" and failed.found == "3"
    right = fence("import statistics\n\ndef middle(xs):\n    return statistics.median(xs)")
    assert "fail" not in outcomes(code.check(right, question, sandbox=box))
    prose_q = "Write fact(n). For input 5 the output is 120."
    assert outcomes(code.check(fence("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)"), prose_q,
                               sandbox=box))[-1] == "pass"


def test_a_none_result_matches_a_stated_none(box):
    """The value is compared in the gateway from its repr: a function returning None (which a
    REPL does not print) still matches ``-> None`` (HumanEval/90 and /137 became false alarms
    when the value travelled only as printed text)."""
    question = "Write `def second(xs)`.\nExamples:\n    second([]) -> None\n    second([3, 1, 2]) -> 2"
    answer = fence("def second(xs):\n    s = sorted(set(xs))\n    return s[1] if len(s) > 1 else None")
    ex = [c for c in code.check(answer, question, sandbox=box) if c.evidence.get("origin") == "question"]
    assert [c.outcome for c in ex] == ["pass", "pass"], [(c.claim, c.note) for c in ex]
    wrong = fence("def second(xs):\n    s = sorted(set(xs))\n    return s[1] if len(s) > 1 else 0")
    ex = [c for c in code.check(wrong, question, sandbox=box) if c.evidence.get("origin") == "question"]
    assert [c.outcome for c in ex] == ["fail", "pass"], [(c.claim, c.note) for c in ex]


def test_runtime_crash_on_question_example_is_fail(box):
    question = "first_word('hello world') -> 'hello'\nfirst_word('') -> ''"
    checks = code.check(fence("def first_word(s):\n    return s.split()[0]"), question, sandbox=box)
    crash = [c for c in checks if c.outcome == "fail"]
    assert len(crash) == 1 and crash[0].evidence["exception"]["type"] == "IndexError"
    assert any("return s.split()[0]" in ln for ln in crash[0].evidence["traceback"])


def test_environment_dependent_code_is_unknown(box):
    for src in ["name = input('name? ')\nprint('hi', name)",
                "with open('data.csv') as f:\n    print(f.read())",
                "import os\nprint(os.environ['OPENAI_API_KEY'])",
                "import urllib.request\nprint(urllib.request.urlopen('http://example.com').read())",
                "import socket\nsocket.create_connection(('10.0.0.1', 5432), timeout=1)",
                "import time\nwhile True:\n    time.sleep(1)"]:
        checks = code.check(fence(src), sandbox=box, limits=SHORT if "while True" in src else None)
        assert outcomes(checks) == ["unknown"], (src, checks)


def test_random_output_mismatch_is_unknown(box):
    checks = code.check(fence("import random\nprint(random.randint(1, 6))  # Output: 4"), sandbox=box)
    assert "fail" not in outcomes(checks)


def test_blocks_share_a_namespace_in_order(box):
    answer = "First:\n" + fence("import math\nr = 2") + "\nThen:\n" + fence("area = math.pi * r ** 2\nprint(round(area, 2))  # Output: 12.57")
    assert outcomes(code.check(answer, sandbox=box)) == ["pass", "pass", "pass"]


def test_hostile_answer_is_contained_and_unknown(box):
    checks = code.check(fence("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"),
                        sandbox=box, limits=sandbox.Limits(timeout_s=3, cpu_s=2))
    assert outcomes(checks) == ["unknown"]


def test_acheck_matches_check(box):
    answer = fence("def f(x):\n    return x * 3\n\nprint(f(2))  # Output: 6")
    sync = code.check(answer, "f(1) -> 3", sandbox=box)
    asyn = asyncio.run(code.acheck(answer, "f(1) -> 3", sandbox=box))
    assert outcomes(sync) == outcomes(asyn) == ["pass", "pass", "pass"]
    assert [c.claim for c in sync] == [c.claim for c in asyn]


def test_code_the_answer_calls_wrong_is_not_a_false_alarm(box):
    answer = ("Your code fails because `and` needs single booleans:\n"
              + fence("import math\nvals = [4, -1]\nroots = [math.sqrt(v) for v in vals]")
              + "\nFilter the negatives first:\n"
              + fence("roots = [math.sqrt(v) for v in vals if v >= 0]\nprint(roots)  # Output: [2.0]"))
    checks = code.check(answer, sandbox=box)
    assert outcomes(checks) == ["unknown", "pass", "pass"]
    assert "ValueError" in checks[0].note
    demo = code.check("This raises a ZeroDivisionError:\n" + fence("print(1 / 0)"), sandbox=box)
    assert outcomes(demo) == ["unknown"]
    py2 = code.check("That is Python 2 syntax, invalid in Python 3:\n" + fence("print 'hi'"), sandbox=NONE)
    assert outcomes(py2) == ["unknown"]
    # without such wording the same failure is a fail
    assert outcomes(code.check("Compute it:\n" + fence("print(1 / 0)"), sandbox=box)) == ["fail"]


def test_stated_output_formatting_leniency(pandas_box):
    answer = fence("import numpy as np\narr = np.array([1, 2, 3])\nprint(arr * 2)  # Output: [2, 4, 6]\n"
                   "print(arr.sum() > 5)  # Output: true\nprint({'b': 1, 'a': 2})  # Output: {'a': 2, 'b': 1}\n"
                   "print(0.1 + 0.2)  # Output: 0.3\nprint(arr.mean())  # Output: 2.0")
    checks = code.check(answer, sandbox=pandas_box)
    assert outcomes(checks) == ["pass"] * 6
    wrong = code.check(fence("import numpy as np\nprint(np.array([1, 2]) * 3)  # Output: [3, 7]"), sandbox=pandas_box)
    assert outcomes(wrong) == ["pass", "fail"]


def test_programs_reading_stdin_run_on_the_questions_io_examples(box):
    question = ("Read n, then n integers, and print their sum.\n\nExample input:\n```\n3\n1 2 3\n```\n"
                "Expected output:\n```\n6\n```\nAlso: Input: 1 5  Output: 5\n")
    right = fence("n = int(input())\nnums = list(map(int, input().split()))\nprint(sum(nums[:n]))")
    checks = code.check(right, question, sandbox=box)
    assert outcomes(checks) == ["pass", "pass"]
    assert checks[1].evidence["inputs"] == "3\n1 2 3\n" and checks[1].found.strip() == "6"
    wrong = fence("n = int(input())\nnums = list(map(int, input().split()))\nprint(sum(nums[:n - 1]))")
    checks = code.check(wrong, question, sandbox=box)
    assert outcomes(checks)[-1] == "fail" and checks[-1].found.strip() == "3"
    crash = fence("n = int(input())\nnums = input().split()\nprint(sum(nums))")
    checks = asyncio.run(code.acheck(crash, question, sandbox=box))
    assert checks[-1].outcome == "fail" and checks[-1].evidence["exception"]["type"] == "TypeError"


def test_string_case_differences_are_real_mismatches(box):
    checks = code.check(fence("def shout(s):\n    return s.capitalize()\n\nshout('abc')  # -> 'ABC'"), sandbox=box)
    assert outcomes(checks) == ["pass", "fail"]


# --- the bwrap sandbox's seccomp filter seen through the verifier ------------------------------

@pytest.fixture(scope="module")
def bwrap_box():
    b = sandbox.get("bwrap", FAST)
    reason = b.unavailable_reason()
    if reason is not None:
        if os.environ.get("VERACITY_CI") == "1" or "bwrap" in os.environ.get("VERACITY_REQUIRE_SANDBOX", ""):
            pytest.fail(f"bwrap required but unavailable: {reason}")
        pytest.skip(f"bwrap unavailable: {reason}")
    return b


@pytest.mark.bwrap
def test_denied_syscall_is_the_programs_own_error(bwrap_box):
    """A clock change refused by the filter (and by the missing capability) surfaces as the
    program's PermissionError (evidence names the filter), not as a verifier or sandbox crash.
    (ctypes, which reached ptrace here before, is refused by the harness itself now: docs/security.md.)"""
    if not bwrap_box.filtered and os.environ.get("VERACITY_CI") != "1":
        pytest.skip(bwrap_box.isolation()["seccomp"])
    answer = fence("import time\ntime.clock_settime(time.CLOCK_REALTIME, 0)\nprint('time travel')")
    [c] = code.check(answer, sandbox=bwrap_box)
    assert c.evidence["exception"]["type"] == "PermissionError"
    assert "Operation not permitted" in c.evidence["exception"]["message"]
    assert c.evidence["seccomp"].startswith("libseccomp deny list")
    assert c.outcome == "unknown"  # a permission problem is the environment's, never a false alarm


@pytest.mark.bwrap
def test_network_code_under_the_filter_stays_unknown(bwrap_box):
    """The filter refuses AF_INET sockets (EAFNOSUPPORT): network code is still `unknown`."""
    answer = fence("import socket\ns = socket.create_connection(('example.com', 80), timeout=2)\nprint(s)")
    [c] = code.check(answer, sandbox=bwrap_box)
    assert c.outcome == "unknown"
    assert c.evidence["exception"]["type"] in ("OSError", "gaierror")


@pytest.mark.bwrap
def test_self_kill_is_reported_as_a_signal_not_a_limit(bwrap_box):
    [c] = code.check(fence("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"), sandbox=bwrap_box)
    assert c.outcome == "unknown" and c.evidence["killed_by"] == "none"
    assert "killed by SIGKILL" in c.note and "not a sandbox limit" in c.note


@pytest.mark.bwrap
def test_evidence_says_when_there_is_no_seccomp_filter(bwrap_box):
    plain = sandbox.get("bwrap", FAST, seccomp=False)
    checks = code.check(fence("print(6 * 7)  # Output: 42"), sandbox=plain)
    assert outcomes(checks) == ["pass", "pass"]
    for c in checks:
        assert c.evidence["seccomp"].startswith("no seccomp") and c.evidence["memory_limit"].startswith("RLIMIT_AS")


def test_spinning_example_is_stopped_by_its_cpu_budget_and_the_others_still_run(box):
    """The per-step budget is CPU time (SIGPROF): a busy loop in one example ends as that
    example's `unknown`, and the next example still runs and passes."""
    answer = fence("def add(a, b):\n    return a + b\n\ndef spin(n):\n    while True:\n        n += 1")
    question = "spin(1) -> 2\nadd(1, 2) -> 3"
    checks = code.check(answer, question, sandbox=box,
                        limits=sandbox.Limits(timeout_s=60, cpu_s=20, memory_mb=256, pids=32))
    by_claim = {c.claim: c.outcome for c in checks}
    assert by_claim.get("add(1, 2) -> 3") == "pass", checks
    spin = [c for c in checks if c.claim.startswith("spin(1)")]
    assert spin and spin[0].outcome == "unknown", checks


# --- a run is not a behaviour check (docs/design.md "Asymmetric trust") -------------------------------

ADD_BUGGY = "def add(a, b):\n    return a - b"


def test_code_that_merely_runs_is_unknown_never_pass(box):
    # a wrong function with nothing about its behaviour compared: it runs, which says nothing
    [c] = code.check(fence(ADD_BUGGY), "Write a function add(a, b) that returns the sum.", sandbox=box)
    assert c.outcome == "unknown" and c.basis == "executed"
    assert c.note == "ran without errors; nothing about its behaviour was compared"
    assert c.evidence["reason"] == "nothing compared"


def test_code_with_its_own_asserts_passes_and_a_false_one_fails(box):
    [c] = code.check(fence("def add(a, b):\n    return a + b\n\nassert add(2, 3) == 5"), sandbox=box)
    assert (c.outcome, c.basis) == ("pass", "executed") and "assert" in c.evidence["compared"]
    [c] = code.check(fence(ADD_BUGGY + "\n\nassert add(2, 3) == 5"), sandbox=box)
    assert c.outcome == "fail"
    # an assert inside the function is a precondition, not a test of what it does
    [c] = code.check(fence("def add(a, b):\n    assert isinstance(a, int)\n    return a - b"), sandbox=box)
    assert c.outcome == "unknown"


def test_the_questions_examples_make_the_run_a_behaviour_check(box):
    q = "Write add(a, b) that returns the sum.\n>>> add(2, 3)\n5"
    right = code.check(fence("def add(a, b):\n    return a + b"), q, sandbox=box)
    assert outcomes(right) == ["pass", "pass"] and {c.basis for c in right} == {"executed"}
    wrong = code.check(fence(ADD_BUGGY), q, sandbox=box)
    assert outcomes(wrong) == ["pass", "fail"]
