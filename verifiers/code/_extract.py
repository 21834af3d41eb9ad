"""Claim extraction for the code verifier: fenced blocks, examples, stated outputs.

Pure text processing, no execution. Used by :mod:`verifiers.code`.
"""

from __future__ import annotations

import ast
import doctest
import re
import textwrap
from dataclasses import dataclass, field

from verifiers import _pyast


def parse_python(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(source, mode=mode)`` made thread-safe by :func:`verifiers._pyast.parse`
    (CPython 3.11's AST constructor is not: python/cpython#106905).
    Raises what ``ast.parse`` raises (SyntaxError, ValueError, RecursionError, MemoryError)."""
    return _pyast.parse(source, mode=mode)

PYTHON_LANGS = {"python", "py", "python3", "py3", "ipython", "jupyter", "pycon", "python-repl", "pyi", "sage"}
OUTPUT_LANGS = {"text", "txt", "output", "console", "plaintext", "out", "stdout", "shell-session"}

# CommonMark fences: ``` or ~~~ (3+), optional info string; closing fence of the same char and
# at least the same length (https://spec.commonmark.org/0.31.2/#fenced-code-blocks).
_FENCE = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.M)


@dataclass
class Block:
    """One fenced block of the answer.

    ``lang``: normalised info-string word (``""`` when unlabeled); ``code``: content (dedented,
    IPython magics blanked); ``span``: character offsets of the whole fence in the answer;
    ``line``: answer line number (1-based) of the block's first content line; ``kind``:
    ``python`` | ``pycon`` (a ``>>>`` session) | ``output`` | ``other``.
    """

    index: int
    lang: str
    raw: str
    code: str
    span: tuple[int, int]
    line: int
    kind: str = "other"
    tree: ast.Module | None = None
    syntax_error: SyntaxError | None = None
    after: str = ""  # prose between this block and the next one (for "prints 6")
    next_block: "Block | None" = None
    before: str = ""


def fenced_blocks(text: str) -> list[Block]:
    """All fenced blocks of ``text`` in order (unterminated last fence runs to the end)."""
    blocks: list[Block] = []
    pos = 0
    counted, line_no = 0, 1  # line numbers counted incrementally: one pass over the text, not one per block
    while True:
        m = _FENCE.search(text, pos)
        if not m:
            break
        fence = m.group("fence")
        info = m.group("info").strip()
        body_start = m.end() + 1
        close = re.compile(r"^[ \t]{0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$", re.M)
        c = close.search(text, body_start)
        body_end, end = (c.start(), c.end()) if c else (len(text), len(text))
        raw = text[body_start:body_end] if body_start <= body_end else ""
        lang = info.split()[0].lower().strip("{}.") if info else ""
        line_no += text.count("\n", counted, body_start)
        counted = max(counted, body_start)
        line = line_no
        blocks.append(Block(index=len(blocks), lang=lang, raw=raw, code=raw, span=(m.start(), end), line=line))
        pos = max(end, m.end() + 1)
    for i, b in enumerate(blocks):
        nxt = blocks[i + 1] if i + 1 < len(blocks) else None
        b.after = text[b.span[1]: nxt.span[0] if nxt else len(text)]
        b.next_block = nxt
        prev_end = blocks[i - 1].span[1] if i else 0
        b.before = text[prev_end: b.span[0]]
    return blocks


_MAGIC = re.compile(r"^[ \t]*([%!]|\?\?|\?[A-Za-z_])")


def prepare_code(raw: str) -> str:
    """Dedent and blank IPython magics / shell escapes (``%timeit``, ``!pip``) so line
    numbers stay those of the block."""
    lines = textwrap.dedent(raw).split("\n")
    return "\n".join("" if _MAGIC.match(ln) else ln for ln in lines)


def _is_trivial(tree: ast.Module) -> bool:
    """A module that is only literals/names (an output block like ``6`` or ``[1, 2]``)."""
    for node in tree.body:
        if not isinstance(node, ast.Expr):
            return False
        v = node.value
        if isinstance(v, ast.Name):
            continue
        try:
            ast.literal_eval(v)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            return False
    return True


def classify(blocks: list[Block]) -> None:
    """Set ``kind``, ``code``, ``tree``, ``syntax_error`` of each block in place."""
    for b in blocks:
        prev_text = b.before.rstrip()[-80:].lower()
        is_output_ctx = bool(re.search(r"(output|result|prints?|returns?|console|terminal)\s*(is|will be|would be)?\s*:?\s*$", prev_text))
        lines = [ln for ln in b.raw.strip("\n").split("\n") if ln.strip()]
        if b.lang in PYTHON_LANGS or b.lang == "":
            if lines and lines[0].lstrip().startswith(">>>"):
                b.kind = "pycon"
                continue
        if b.lang in PYTHON_LANGS:
            b.kind = "python"
        elif b.lang == "" or b.lang in OUTPUT_LANGS:
            if b.lang in OUTPUT_LANGS or is_output_ctx:
                b.kind = "output"
                continue
            code = prepare_code(b.raw)
            try:
                tree = parse_python(code)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                b.kind = "output" if b.lang else "other"
                continue
            if not tree.body or _is_trivial(tree):
                b.kind = "output"
                continue
            b.kind = "python"
        else:
            b.kind = "other"
            continue
        b.code = prepare_code(b.raw)
        try:
            b.tree = parse_python(b.code)
        except SyntaxError as exc:
            b.syntax_error = exc
        except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
            b.syntax_error = SyntaxError(str(exc))


# --- examples ---------------------------------------------------------------------------------

@dataclass
class Example:
    """An input/expected-output pair to run against the answer's code.

    ``source``: Python to evaluate (an expression or statements); ``want``: expected output
    text as written (doctest semantics: the repr of the value or what is printed);
    ``origin``: ``question`` | ``docstring`` | ``session`` | ``comment`` | ``prose``;
    ``where``: human-readable location; ``block``: index of the block after which it runs
    (``None`` = after all blocks).
    """

    source: str
    want: str
    origin: str
    where: str
    block: int | None = None
    stmt_line: int | None = None  # for stated outputs: the statement's first line in its block
    mode: str = "value"  # value (repr/print of an expression) | stdout (what the block printed)
    key: tuple = field(default=())


_DT = doctest.DocTestParser()


def doctest_examples(text: str) -> list[tuple[str, str, int]]:
    """``(source, want, lineno)`` of the ``>>>`` examples in ``text`` (lineno 0-based)."""
    try:
        return [(e.source.rstrip("\n"), e.want.rstrip("\n"), e.lineno) for e in _DT.get_examples(text)]
    except ValueError:  # inconsistent indentation etc.
        return []


def docstring_examples(block: Block) -> list[Example]:
    """Doctest examples in the docstrings of functions/classes defined in ``block``."""
    out: list[Example] = []
    if block.tree is None:
        return out
    for node in ast.walk(block.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            doc = ast.get_docstring(node, clean=True)
            if not doc or ">>>" not in doc:
                continue
            name = getattr(node, "name", "module")
            for src, want, _ in doctest_examples(doc):
                out.append(Example(src, want, "docstring", f"docstring of {name} (block {block.index + 1})", block.index))
    return out


def session_examples(block: Block) -> list[Example]:
    """A ``>>>`` session block as examples (they run in order in the shared namespace)."""
    return [Example(src, want, "session", f"session block {block.index + 1}", block.index)
            for src, want, _ in doctest_examples(textwrap.dedent(block.raw))]


# `f(1, 2) -> 3`, `f(x) ==> y`, `f(x) ➞ y`, `f(x) returns y`, `f(x) should return y.`,
# `f(x)  # returns y`, `f(x) # => y`, `for f(x) == y`, `* f(x) => y`
_ARROWS = r"(?:==>|=>|->|➞|→|==|#\s*(?:=>|->|returns?|==)|(?:should\s+)?returns?|gives|is)"
_CALL_LINE = re.compile(
    r"^\s*(?:[*\-•]\s+)?(?:for\s+)?(?P<call>(?P<name>[A-Za-z_]\w*)\s*\(.*\))\s*" + _ARROWS + r"\s*(?P<want>.+?)\s*$"
)
_CALL_EQ_LINE = re.compile(r"^\s*(?:[*\-•]\s+)?(?:for\s+)?(?P<call>(?P<name>[A-Za-z_]\w*)\s*\(.*\))\s*=\s*(?P<want>[^=].*?)\s*$")
# "for input 5 the output is 120" / "input: 5 -> output: 120" (single-argument functions only)
_IO_PROSE = re.compile(
    r"(?:for|with|given)\s+(?:the\s+)?input\s*:?\s*`?(?P<inp>[^`\n]+?)`?\s*,?\s*(?:the\s+)?(?:output|result|answer)\s+"
    r"(?:is|should\s+be|will\s+be|=)\s*:?\s*`?(?P<want>[^`\n]+?)`?\s*(?:[.;]\s|[.;]?$)",
    re.I | re.M,
)


def literal_prefix(text: str) -> str | None:
    """The longest prefix of ``text`` that is a Python literal and is followed only by
    punctuation, a comment or a parenthetical remark; ``true``/``false``/``null``/``none``
    alone map to Python's. ``None`` when there is none."""
    t = text.strip()
    low = t.rstrip(".").strip().lower()
    if low in ("true", "false"):
        return low.capitalize()
    if low in ("null", "none"):
        return "None"
    for end in range(len(t), 0, -1):
        head, rest = t[:end], t[end:].strip()
        if rest and not re.match(r"^([.,;:]|#|\(|//|because|since|as\b|which\b)", rest):
            continue
        try:
            tree = parse_python(head.strip(), mode="eval")
            ast.literal_eval(tree)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return ast.get_source_segment(head.strip(), tree.body)  # drops a trailing comment
    return None


def _question_want(want: str) -> str | None:
    """A doctest ``want`` from free text: doctest takes every line up to a blank line, which in
    a question can swallow a closing ``\"\"\"`` or the next sentence. Keep all of it when it is
    one literal, else its first line when that is a literal, else ``None``."""
    lines = [ln for ln in want.split("\n") if ln.strip() not in ('"""', "'''")]
    text = "\n".join(lines).strip()
    if not text:
        return None
    if len(lines) == 1 or literal_prefix(text) == text:
        return text
    first = lines[0].strip()
    return first if literal_prefix(first) == first else None


def _literal_args(call: str) -> bool:
    try:
        node = parse_python(call.strip(), mode="eval").body
    except SyntaxError:
        return False
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return False
    try:
        for a in node.args:
            ast.literal_eval(a)
        for k in node.keywords:
            if k.arg is None:
                return False
            ast.literal_eval(k.value)
    except (ValueError, SyntaxError, TypeError, RecursionError):
        return False
    return True


def question_examples(question: str, functions: set[str]) -> list[Example]:
    """Examples stated in the user's question, kept only when they call a function the answer
    defines with literal arguments and give a literal expected value.

    Forms: doctest lines (``>>> f(2)`` / ``4``), ``f(x) -> y`` and its cousins (``=>``,
    ``==>``, ``==``, ``➞``, ``returns``, ``should return``, ``# returns``), ``f(x) = y`` only
    inside an "Example" section (elsewhere ``=`` is usually a definition), and "for input X
    the output is Y" when the answer defines exactly one function.
    """
    out: list[Example] = []
    if not question or not functions:
        return out
    seen: set[tuple[str, str]] = set()

    def add(src: str, want: str, where: str) -> None:
        k = (re.sub(r"\s+", "", src), re.sub(r"\s+", "", want))
        if k not in seen:
            seen.add(k)
            out.append(Example(src, want, "question", where, None, key=k))

    for src, want, ln in doctest_examples(question):
        name = re.match(r"\s*([A-Za-z_]\w*)\s*\(", src)
        want = _question_want(want)
        if name and name.group(1) in functions and want and "\n" not in src.strip():
            add(src.strip(), want, f"question line {ln + 1}")
    # `f(n) = 1 + n / 2` (a formal argument) marks math notation: `f(4) = 3` is then a value
    # of a recurrence, not an example of the answer's function (HumanEval/130), so the `=`
    # form is off for that name.
    math_defined = {m.group("name") for m in map(_CALL_EQ_LINE.match, question.split("\n"))
                    if m and not _literal_args(m.group("call"))}
    in_examples = False
    for i, line in enumerate(question.split("\n")):
        if ">>>" in line:
            continue
        if re.search(r"\bexamples?\b|\bfor example\b|e\.g\.", line, re.I):
            in_examples = True
        m = _CALL_LINE.match(line)
        if not m and in_examples:
            m = _CALL_EQ_LINE.match(line)
            if m and m.group("name") in math_defined:
                continue
        if not m or m.group("name") not in functions:
            continue
        call = m.group("call").strip()
        if not _literal_args(call):
            continue
        want = literal_prefix(m.group("want"))
        if want is None:
            continue
        add(call, want, f"question line {i + 1}")
    if len(functions) == 1:
        (fn,) = tuple(functions)
        for m in _IO_PROSE.finditer(question):
            inp, want = m.group("inp").strip().rstrip(","), literal_prefix(m.group("want"))
            if want is None or literal_prefix(inp) != inp.strip():
                continue
            add(f"{fn}({inp})", want, "question prose")
    return out


# Stated outputs in comments: `print(f(3))  # Output: 6`, `f(3)  # -> 6`, `# prints 6`
_COMMENT_OUT = re.compile(r"#\s*(?:output|outputs|prints?|result|returns?|=>|->|==>|➞|→)\s*:?\s*(?P<want>\S.*?)\s*$", re.I)


_SOURCE_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _source_segment(src_lines: list[str], node: ast.AST) -> str | None:
    """``ast.get_source_segment`` on pre-split lines (``_SOURCE_LINE``: the same split as the
    stdlib's, ``\r\n``/``\r``/``\n`` kept). The stdlib splits the whole source on every call,
    so one call per statement was quadratic (5,000 ``print(i)  # Output: i`` lines: 177 s)."""
    try:
        lineno, end_lineno = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined, operator]
        col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        return None
    if end_col is None or end_lineno >= len(src_lines):
        return None
    if end_lineno == lineno:
        return src_lines[lineno].encode()[col:end_col].decode()
    first = src_lines[lineno].encode()[col:].decode()
    last = src_lines[end_lineno].encode()[:end_col].decode()
    return first + "".join(src_lines[lineno + 1:end_lineno]) + last


def comment_outputs(block: Block) -> list[Example]:
    """Stated outputs written as comments on (or right under) a top-level statement."""
    out: list[Example] = []
    if block.tree is None:
        return out
    src_lines = _SOURCE_LINE.findall(block.code)
    lines = block.code.split("\n")
    body = block.tree.body
    for idx, stmt in enumerate(body):
        if not isinstance(stmt, ast.Expr):
            continue
        end = getattr(stmt, "end_lineno", stmt.lineno)
        cand = [lines[end - 1]] if end - 1 < len(lines) else []
        nxt_start = body[idx + 1].lineno if idx + 1 < len(body) else len(lines) + 1
        cand += [ln for ln in lines[end: nxt_start - 1] if ln.strip().startswith("#")][:3]
        wants = []
        for ln in cand:
            m = _COMMENT_OUT.search(ln)
            if m and (ln.strip().startswith("#") or ln.rfind("#") > 0):
                wants.append(m.group("want"))
        if not wants:
            continue
        want = wants[0] if len(wants) == 1 else "\n".join(wants)
        out.append(Example(_source_segment(src_lines, stmt) or "", want.strip(), "comment",
                           f"block {block.index + 1} line {stmt.lineno}", block.index,
                           stmt_line=stmt.lineno, mode="stmt"))
    return out


_PROSE_OUT = re.compile(
    r"(?:this|it|that|the (?:code|script|program|snippet|above))\s+(?:will\s+|should\s+|would\s+)?(?:prints?|outputs?|displays?)\s*:?\s*`(?P<want>[^`\n]+)`",
    re.I,
)


def prose_outputs(block: Block) -> list[Example]:
    """Output the prose after a block claims: an "Output:" fenced block right after it, or
    "this prints `6`"."""
    out: list[Example] = []
    gap = block.after
    nb = block.next_block
    if nb is not None and nb.kind == "output" and len(gap.strip()) <= 120 and re.search(r"(output|prints?|result)", gap, re.I):
        want = textwrap.dedent(nb.raw).strip("\n")
        if want.strip():
            out.append(Example("", want, "prose", f"output block {nb.index + 1}", block.index, mode="stdout"))
    m = _PROSE_OUT.search(gap[:300])
    if m and not out:
        out.append(Example("", m.group("want").strip(), "prose", f"text after block {block.index + 1}", block.index, mode="stdout-line"))
    return out


# An answer often shows the user's broken code (or a counter-example) before the fix: "Your code
# fails because...", "Don't do this:", "This raises a ValueError:". Failures of such a block are
# what the answer says, not a defect of the answer.
_WRONG_CONTEXT = re.compile(
    r"\b(raises?|raising|throws?|error|exception|traceback|fails?|failing|wrong|incorrect|buggy|bug|broken|"
    r"don'?t|do not|avoid|instead of|bad|problem(atic)?|issue|won'?t work|doesn'?t work|will not work|"
    r"does not work|your (original |current )?code|original code|original version|before|invalid|"
    r"not valid|mistake|crash(es)?|anti-?pattern)\b",
    re.I,
)
_WRONG_COMMENT = re.compile(r"#.*\b(raises?|error|exception|wrong|incorrect|bug|fails?|crash|invalid|traceback|don'?t)\b", re.I)


def presented_as_failing(block: Block) -> bool:
    """True when the prose introducing ``block`` (its last sentence before the fence), the
    first sentence after it, or a comment inside it says the code is wrong or raises."""
    before = re.split(r"(?<=[.!?])\s+|\n\s*\n", block.before.strip())[-1] if block.before.strip() else ""
    after = re.split(r"(?<=[.!?])\s+|\n\s*\n", block.after.strip())[0] if block.after.strip() else ""
    return bool(_WRONG_CONTEXT.search(before[-300:]) or _WRONG_CONTEXT.search(after[:300])
                or _WRONG_COMMENT.search(block.raw))


# --- stdin/stdout examples for programs that read their input ---------------------------------

_IN_LABEL = re.compile(r"\b(input|stdin)\b", re.I)
_OUT_LABEL = re.compile(r"\b(output|stdout|prints?)\b", re.I)
_IO_LINES = re.compile(
    r"^\s*(?:sample |example |test )?input\s*\d*\s*:\s*(?P<inp>\S.*?)\s*\n"
    r"(?:[^\n]*\n){0,2}?\s*(?:sample |example |expected |test )?output\s*\d*\s*:\s*(?P<out>\S.*?)\s*$",
    re.I | re.M,
)


def stdin_examples(question: str) -> list[tuple[str, str, str]]:
    """``(stdin, expected stdout, where)`` pairs stated in the question: an "Input" fenced block
    followed by an "Output" fenced block, ``Input: 5`` / ``Output: 120`` lines, or "for input X
    the output is Y". Used only for answers whose code reads standard input."""
    out: list[tuple[str, str, str]] = []
    if not question:
        return out
    blocks = fenced_blocks(question)
    for a, b in zip(blocks, blocks[1:]):
        la = a.before.strip().split("\n")[-1] if a.before.strip() else ""
        lb = b.before.strip().split("\n")[-1] if b.before.strip() else ""
        if _IN_LABEL.search(la) and not _OUT_LABEL.search(la) and _OUT_LABEL.search(lb) and len(b.before.strip()) < 200:
            out.append((textwrap.dedent(a.raw).strip("\n") + "\n", textwrap.dedent(b.raw).strip("\n"),
                        f"question blocks {a.index + 1}-{b.index + 1}"))
    text = re.sub(r"(?s)```.*?```", "", question)
    for m in _IO_LINES.finditer(text):
        out.append((m.group("inp").strip("`") + "\n", m.group("out").strip("`"), "question input/output lines"))
    for m in _IO_PROSE.finditer(text):
        out.append((m.group("inp").strip() + "\n", m.group("want").strip(), "question prose"))
    seen, uniq = set(), []
    for inp, want, where in out:
        if (inp, want) not in seen and want.strip():
            seen.add((inp, want))
            uniq.append((inp, want, where))
    return uniq[:8]
