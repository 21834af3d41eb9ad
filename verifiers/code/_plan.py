"""Planning a code check (tiers 1 and 2, no execution): the answer's fenced blocks, their syntax
(``ast``) and static findings (pyflakes), the examples to compare, whether the code depends on
the environment or on chance, and the harness program (:mod:`verifiers.code._harness`) that
tier 3 runs in the sandbox.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from verifiers._types import Check
from verifiers.code._evidence import VERIFIER, _first_line, _where
from verifiers.code._extract import (
    Block,
    classify,
    comment_outputs,
    docstring_examples,
    fenced_blocks,
    parse_python,
    presented_as_failing,
    prose_outputs,
    question_examples,
    session_examples,
    stdin_examples,
)
from verifiers.code._harness import build
from verifiers.code._state import _Plan
from verifiers.code._static import defined_names, has_import, has_star_import, static_findings, syntax_finding
from verifiers.sandbox import Limits


#: sandbox limits of a check that names none (:class:`verifiers.sandbox.Limits` defaults)
DEFAULT_LIMITS = Limits()

#: Fenced blocks checked per answer; later ones get one ``unknown`` check. Tiers 1-2 cost
#: ~1.5 ms per block (pyflakes builds its builtins scope each time), so an answer of 10,000
#: fences took 15 s; real answers have a handful.
MAX_BLOCKS = 100

# Code that touches the outside world or is nondeterministic: its failures/outputs are unknown.
_ENV_USE = re.compile(
    r"\b(open|input|urlopen|getpass|read_csv|read_excel|read_json|read_parquet|read_sql|read_table|loadtxt|genfromtxt|"
    r"load_workbook|imread|connect|getenv|environ|argv|argparse|socket|requests|httpx|aiohttp|urllib|subprocess|"
    r"boto3|openai|sqlite3|psycopg2|pymysql|sqlalchemy|smtplib|ftplib|paramiko|selenium|webdriver|Path|listdir|"
    r"walk|glob|scandir|os\.system|Popen|tkinter|pygame|cv2|serial|flask|django|fastapi|uvicorn|asyncio\.run|"
    r"threading|multiprocessing|mainloop|serve_forever|run_forever)\b"
)
_READS_STDIN = re.compile(r"\binput\s*\(|\bsys\.stdin\b|\bfileinput\b|\bopen\(\s*0\s*[,)]")
_NONDETERMINISTIC = re.compile(r"\b(random|randint|randn|rand|shuffle|choice|sample|uuid|secrets|time|datetime|date\.today|now|perf_counter|id|hash|urandom|getpid|os\.times)\b")


def _block_check(b: Block, outcome: str, note: str, **evidence: Any) -> Check:
    ev = {"tier": evidence.pop("tier", 0), "block": b.index + 1, "language": b.lang or "unlabeled",
          "line": b.line, **evidence}
    conf = 0.9 if outcome == "fail" else (0.9 if outcome == "pass" else 0.0)
    return Check(verifier=VERIFIER, claim=f"block {b.index + 1}: {_first_line(b.code or b.raw)}",
                 outcome=outcome, evidence=ev, confidence=conf, span=b.span, note=note)  # type: ignore[arg-type]


def plan(answer: str, question: str | None = None, limits: Limits = DEFAULT_LIMITS) -> _Plan:
    """Extract claims, run tiers 1-2, and build the sandbox program for tier 3 (pure; no
    execution). Exposed for tests and benchmarks."""
    blocks = fenced_blocks(answer or "")
    rest, blocks = blocks[MAX_BLOCKS:], blocks[:MAX_BLOCKS]
    classify(blocks)
    p = _Plan(answer=answer or "", blocks=blocks)
    if rest:
        p.checks.append(Check(verifier=VERIFIER, claim=f"blocks {MAX_BLOCKS + 1}-{MAX_BLOCKS + len(rest)}",
                              outcome="unknown", confidence=0.0, span=(rest[0].span[0], rest[-1].span[1]),
                              evidence={"reason": "too many code blocks", "unchecked_blocks": len(rest), "kind": "truncated",
                                        "limit": "MAX_BLOCKS", "limit_value": MAX_BLOCKS, "checked": MAX_BLOCKS,
                                        "total": len(blocks) + len(rest), "unit": "code blocks"},
                              note=f"not checked: only the first {MAX_BLOCKS} code blocks of an answer are checked"))
    py = [b for b in blocks if b.kind in ("python", "pycon")]
    trees = [b.tree for b in py if b.tree is not None]
    names: set[str] = set()
    star = imports = False
    for t in trees:
        names |= defined_names(t)
        star = star or has_star_import(t)
        imports = imports or has_import(t)
    # names bound in >>> sessions count too
    for b in py:
        if b.kind == "pycon":
            for ex in session_examples(b):
                try:
                    names |= defined_names(parse_python(ex.source))
                except SyntaxError:
                    pass

    blocked = False  # a block that cannot run stops the later ones (they may depend on it)
    for b in blocks:
        if b.kind == "other":
            p.checks.append(_block_check(b, "unknown", f"{b.lang or 'unlabeled'} code is not checked",
                                         reason="language not supported"))
            continue
        if b.kind == "output":
            continue
        if b.kind == "pycon":
            exs = session_examples(b)
            if exs and not blocked:
                p.runnable.append(b)
                p.examples.extend(exs)
            continue
        if b.syntax_error is not None:
            f = syntax_finding(b.code, b.syntax_error)
            if f.outcome == "fail" and presented_as_failing(b):
                f.outcome, f.kind = "unknown", "presented-as-wrong"
            line = b.line + (f.line or 1) - 1
            p.checks.append(_block_check(b, f.outcome, f"{f.message} at {_where(b, f.line or 1)}, column {f.col}",
                                         tier=1,
                                         exception={"type": type(b.syntax_error).__name__, "message": b.syntax_error.msg},
                                         line=line, block_line=f.line or 1, column=f.col,
                                         reason=f.kind if f.outcome == "unknown" else None))
            blocked = True
            continue
        findings = static_findings(b.tree, answer_names=names, answer_star=star, answer_imports=imports)  # type: ignore[arg-type]
        fails = [f for f in findings if f.outcome == "fail"]
        if fails and presented_as_failing(b):
            p.checks.append(_block_check(b, "unknown", f"{fails[0].message} — the answer presents this code as wrong",
                                         tier=2, reason="presented as failing", findings=[vars(x) for x in findings]))
            continue
        if fails:
            f = fails[0]
            line = b.line + (f.line or 1) - 1
            p.checks.append(_block_check(b, "fail", f"{f.message} at {_where(b, f.line or 1)}", tier=2,
                                         exception={"type": "NameError" if "name" in f.kind or "import" in f.kind else f.kind,
                                                    "message": f.message},
                                         line=line, block_line=f.line or 1, column=f.col,
                                         findings=[vars(x) for x in findings]))
            blocked = True
            continue
        p.context_names |= {f.name for f in findings if f.kind == "context-name" and f.name}
        if blocked:
            p.checks.append(_block_check(b, "unknown", "not run: an earlier block failed", tier=2,
                                         reason="earlier block failed"))
            continue
        p.runnable.append(b)
        if presented_as_failing(b):
            p.may_fail.add(b.index)
        p.block_checks[b.index] = _block_check(b, "unknown", "", tier=3, findings=[vars(x) for x in findings])
        p.examples.extend(docstring_examples(b))
        p.examples.extend(comment_outputs(b))
        p.examples.extend(prose_outputs(b))

    funcs = {n.name for t in trees for n in t.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if question:
        have = {(re.sub(r"\s+", "", e.source), re.sub(r"\s+", "", e.want)) for e in p.examples}
        for e in question_examples(question, funcs):
            if e.key not in have:
                p.examples.append(e)
    src = "\n".join(b.code for b in p.runnable)
    p.env_dependent = bool(_ENV_USE.search(src))
    p.env_beyond_stdin = bool(_ENV_USE.search(_READS_STDIN.sub(" ", src)))
    p.nondeterministic = bool(_NONDETERMINISTIC.search(src))
    if not p.runnable:
        return p

    ids = {id(e): i for i, e in enumerate(p.examples)}
    spec_blocks, spec_examples = [], []
    for b in p.runnable:
        if b.kind == "pycon":
            spec_blocks.append({"index": b.index, "code": "", "watch": [], "watch_want": {}})
            continue
        watch = {str(e.stmt_line): e.want for e in p.examples if e.mode == "stmt" and e.block == b.index}
        spec_blocks.append({"index": b.index, "code": b.code, "watch": [int(k) for k in watch], "watch_want": watch,
                            "may_fail": b.index in p.may_fail})
    for e in p.examples:
        if e.mode == "value":
            spec_examples.append({"id": ids[id(e)], "source": e.source, "want": e.want, "mode": e.mode, "block": e.block})
    step = max(1.0, min(5.0, limits.timeout_s / 2))
    p.program, p.nonce = build(spec_blocks, spec_examples, step_timeout=step)
    if question and _READS_STDIN.search(src):
        p.stdin_cases = stdin_examples(question)
        if p.stdin_cases:
            bare = [{**b, "watch": [], "watch_want": {}} for b in spec_blocks]
            p.stdin_program, p.stdin_nonce = build(bare, [], step_timeout=step)
    return p
