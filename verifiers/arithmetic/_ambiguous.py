"""Claims that read two ways: a failed claim is re-read with the other grouping (``6/2(1+2)``,
``2^3^2``), as Python's bitwise XOR (``2 ^ 10 = 8``) or with the other locale's separators
(``1.500 + 250 = 1.750``), and is ``unknown`` where that reading holds; a claim inside a
right-to-left embedding is ``unknown`` (docs/design.md "False alarms cost more than misses")."""

from __future__ import annotations

import ast
import operator
import re
from verifiers._types import Check
from verifiers.arithmetic._work import Work
from verifiers.arithmetic._read import _check


#: "6/2(1+2)", "6 ÷ 2(1 + 2)": a number right after a division, multiplied by a bracket with no
#: sign between them
_DIV_JUXTAPOSED = re.compile(r"([/÷])\s*(\d+(?:[.,]\d+)?)\s*\(")
#: "2^3^2": a chain of carets (not Python's "**", whose grouping is the language's)
_CARET_CHAIN = re.compile(r"(?<![\d.^)])(\d+(?:\.\d+)?)\s*\^\s*(\d+(?:\.\d+)?)(?=\s*\^)")


def _juxtaposed(claim: str) -> str | None:
    """``claim`` with each implicit product after a division grouped first ("6/2(1+2)" ->
    "6/(2(1+2))"), or None when it has none."""
    out, last, changed = [], 0, False
    for m in _DIV_JUXTAPOSED.finditer(claim):
        if m.start() < last:
            continue
        depth, k = 0, m.end() - 1
        while k < len(claim):
            depth += {"(": 1, ")": -1}.get(claim[k], 0)
            if depth == 0:
                break
            k += 1
        if k >= len(claim):
            return None
        out += [claim[last:m.start(1) + 1], "(", claim[m.start(2):k + 1], ")"]
        last, changed = k + 1, True
    return "".join(out) + claim[last:] if changed else None


def _other_grouping(checks: list[Check]) -> None:
    """A failed claim whose grouping writers and tools disagree on is re-read the other way, and
    is ``unknown`` (not ``fail``) when that reading holds: an implicit product after a division
    ("6/2(1+2) = 1": many textbooks, physics journals and calculators bind the juxtaposed product
    first, 6/(2(1+2)); Python and this parser read (6/2)(1+2)) and a chain of carets ("2^3^2 = 64":
    Excel and MATLAB group to the left, mathematics to the right); the claim is ambiguous as
    written (docs/design.md "False alarms cost more than misses"). At most :data:`_MAX_REREADS`
    claims are re-read; one past them, or whose re-reading ran out of work budget, is
    ``unknown`` unread (:func:`_not_reread`)."""
    todo = []
    for c in checks:
        if c.outcome == "fail" and c.claim and (_DIV_JUXTAPOSED.search(c.claim) or _CARET_CHAIN.search(c.claim)):
            other = _CARET_CHAIN.sub(r"(\1^\2)", _juxtaposed(c.claim) or c.claim)
            if other != c.claim:
                todo.append((c, other, f"the claim holds read as {other} (its grouping is ambiguous)"))
    _reread(todo, "other_grouping")


#: a claim in whole numbers, the operators Python writes and "^" among them, "=", "==" or a
#: result word, and one whole number (backticks of inline code allowed): ``2 ^ 10 = 8`` is true in Python, C, Java and JavaScript, where "^" is XOR
_XOR_CLAIM = re.compile(r"\s*`?([\d\s()+\-*/%^&|]*\^[\d\s()+\-*/%^&|]*?)`?\s*"
                        r"(?:==?|gives|is|equals|evaluates\s+to|returns|yields|prints)\s*`?(-?\d+)`?\s*")
_XOR_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
            ast.Mod: operator.mod, ast.BitXor: operator.xor, ast.BitAnd: operator.and_, ast.BitOr: operator.or_}


def _python_int(node: ast.AST) -> int:
    """The value of a whole-number expression tree as Python computes it (``^`` is XOR, ``**``
    powers with a result of at most 2,000 bits); ValueError for anything else. Walks the tree:
    nothing is evaluated."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _python_int(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _python_int(node.left), _python_int(node.right)
        if isinstance(node.op, ast.Pow):
            if b < 0 or b * max(1, abs(a).bit_length()) > 2000:
                raise ValueError("power out of range")
            return a ** b
        fn = _XOR_OPS.get(type(node.op))
        if fn is None or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0):
            raise ValueError("not a whole-number operation")
        return fn(a, b)
    raise ValueError("not a whole-number expression")


def _bitwise_xor(checks: list[Check]) -> None:
    """A failed claim with "^" between whole numbers (:data:`_XOR_CLAIM`) that holds read as
    Python's bitwise XOR ("In Python, 2 ^ 10 = 8") is ``unknown``, not ``fail``: Python, C, Java
    and JavaScript write "^" for XOR (Python language reference, "Binary bitwise operations"),
    mathematics for a power, and the claim is true in one of them (docs/design.md "False alarms
    cost more than misses"). The reading is Python's own grammar (``ast``, the tree walked by
    :func:`_python_int`; ``/`` is not whole-number and is not read). Mutates ``checks``."""
    for c in checks:
        if c.outcome != "fail" or "^" not in (c.claim or ""):
            continue
        m = _XOR_CLAIM.fullmatch(c.claim)
        if m is None or "/" in m.group(1).replace("//", ""):
            continue
        try:
            from verifiers._pyast import parse as _parse

            value = _python_int(_parse(m.group(1).strip(), mode="eval").body)  # type: ignore[attr-defined]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if value == int(m.group(2)):
            c.outcome, c.confidence = "unknown", 0.5
            c.evidence["bitwise_xor"] = {"reading": m.group(1).strip(), "value": str(value)}
            c.note = f"{c.note}; not failed: read as Python's bitwise XOR, {m.group(1).strip()} is {value}".lstrip("; ")


#: A right-to-left embedding or isolate (U+202B RLE, U+2067 RLI, U+2068 FSI) to its closing
#: U+202C / U+2069 or the line's end: what it holds is laid out right to left, its runs reordered
#: (UAX #9), so "10 - 4 = 6" in one may display as "6 = 4 - 10".
_RTL_RUN = re.compile("[\u202b\u2067\u2068][^\u202c\u2069\n]*")


def _right_to_left(text: str, checks: list[Check]) -> None:
    """A claim inside a right-to-left embedding or isolate (:data:`_RTL_RUN`) is ``unknown``:
    the order the reader sees it in is not the order it is stored in, and the verifier checks the
    stored one. (A right-to-left *override* reverses every character and is read as displayed by
    ``normalize``.) Mutates ``checks`` in place."""
    if not any(ch in text for ch in "\u202b\u2067\u2068"):
        return
    runs = [m.span() for m in _RTL_RUN.finditer(text)]
    for c in checks:
        if c.outcome in ("pass", "fail") and c.span and any(a < c.span[1] and c.span[0] < b for a, b in runs):
            c.outcome, c.confidence = "unknown", 0.5
            c.note = "written inside a right-to-left embedding (U+202B/U+2067/U+2068): it may display in another order"
            c.evidence["bidi"] = "right-to-left embedding"


#: a number with one separator and one group of three digits after it ("1.500", "1,500"): a
#: decimal in one locale, a thousands group in another (CLDR: "." groups and "," decimals in de,
#: es, it, pt, nl, tr, id; the other way round in en). A leading zero ("0.125") groups nothing.
_AMBIGUOUS = re.compile(r"(?<![\d.,'’])([1-9]\d{0,2})([.,])(\d{3})(?![\d'’]|[.,]\d)")

_MAX_REREADS = 20
#: work units (``_work``) all re-readings of one kind (other grouping, other locale) may spend
#: together, on top of the answer's own budget (which may be spent by then): a claim left unread
#: is ``unknown`` (:func:`_not_reread`), never ``fail``. Counted, not timed, so which claims are
#: re-read does not depend on the machine's load
_REREAD_UNITS = 250_000


def _reread(todo: list[tuple[Check, str, str]], key: str) -> None:
    """Check the second reading of each failed claim in ``todo`` (``(check, reading, note when it
    holds)``): where the reading does not fail, the check becomes ``unknown`` with evidence
    ``key`` -- its failure stands only where both readings fail (docs/design.md "False alarms
    cost more than misses"). At most :data:`_MAX_REREADS` readings, all within :data:`_REREAD_UNITS`
    units of work; the rest are ``unknown`` unread (:func:`_not_reread`). Mutates the checks in
    place."""
    work = Work(_REREAD_UNITS)
    for n, (c, reading, holds) in enumerate(todo, 1):
        if n > _MAX_REREADS:
            _not_reread(c, key, reading, f"more than {_MAX_REREADS} such claims")
            continue
        got = _check(reading, None, work)
        if any(r.evidence.get("kind") == "budget" for r in got):
            _not_reread(c, key, reading, "its work budget ran out")
            continue
        reread = [r for r in got if r.outcome in ("pass", "fail", "unknown")]
        if reread and not any(r.outcome == "fail" for r in reread):
            c.outcome, c.confidence = "unknown", 0.5
            c.evidence[key] = {"reading": reading, "outcomes": [r.outcome for r in reread]}
            c.note = f"{c.note}; not failed: {holds}".lstrip("; ")


def _not_reread(c: Check, key: str, reading: str, why: str) -> None:
    """Make failed check ``c`` ``unknown``: it has a second reading (``reading``, under evidence
    ``key``) that was not tried (``why``: past :data:`_MAX_REREADS` claims, or out of its work budget). Its
    failure stands only where both readings fail, so an untried one cannot confirm it: the 21st
    right German sum of an answer was failed where the first 20 were ``unknown``."""
    c.outcome, c.confidence = "unknown", 0.5
    c.evidence[key] = {"reading": reading, "outcomes": None, "not_reread": why}
    c.note = f"{c.note}; not failed: it also reads as {reading}, not re-read ({why})".lstrip("; ")


#: numbers only one locale writes: English grouping with decimals or several groups
#: ("1,234.5", "1,234,567"), a decimal point with other than three decimals ("2.5", "0.1234",
#: also at a sentence's end: "$2.50.")
_ENGLISH = re.compile(r"\d,\d{3}\.\d|\d,\d{3},\d{3}(?!\d)|(?<![\d.,])\d+\.(?:\d{1,2}|\d{4,})(?![\d,]|\.\d)")
#: and the other ones: "1.234,5", "1.234.567", a decimal comma with one or two decimals ("2,5",
#: also at a sentence's end: "0,75.")
_CONTINENTAL = re.compile(r"\d\.\d{3},\d|\d\.\d{3}\.\d{3}(?!\d)|(?<![\d.,])\d+,\d{1,2}(?![\d,]|\.\d)")


#: what stands right before a number that names something rather than counts it: a word or a
#: letter it is glued to ("v2.5", "GPT-3.5", "python3.12"), a capitalised word ("Python 3.12",
#: "Node 18.17": a name; at a sentence's start it may be an ordinary word, "Each 2.5 kg", and
#: the number then goes uncounted, which only makes a second reading more likely), "§"/"#"/"No.", a word that numbers sections, versions, standards,
#: figures or pages ("section 4.1", "Abschnitt 2.3", "version 1.25", "page 3.12"), a preposition of
#: time before a clock time ("at 12.30", "um 12.30 Uhr"). Such a number says nothing about how its
#: writer groups digits: "Mit Python 3.12: 1.500 + 250 = 1.750" is a German sum.
_NAME_BEFORE = re.compile(
    r"(?:[^\W\d_][-_/]?|[§#¶]\s?|(?-i:\b[A-Z][^\W\d_]+\s)|\b(?:version|ver|release|rel|v|section|sect|sec|chapter|ch|"
    r"abschnitt|kapitel|art|artikel|absatz|abs|paragraph|para|par|figure|fig|abbildung|abb|table|tab|tabelle|"
    r"step|schritt|no|nr|nummer|number|item|punkt|rule|regel|theorem|satz|lemma|definition|def|equation|eq|"
    r"gleichung|formula|formel|page|seite|vol|band|edition|ausgabe|auflage|iso|din|en|rfc|ieee)\.?\s"
    r"|\b(?:at|um|ab|bis|gegen|from|until|till|by)\s(?=[0-2]?\d\.[0-5]\d\b))$", re.I)
#: a clock time after the number ("12.30 Uhr", "9.45 am")
_CLOCK_AFTER = re.compile(r"\s?(?:uhr|h|am|pm|a\.m\.|p\.m\.|o'clock)\b", re.I)
#: a day and month with a dot after them ("am 12.03.", "bis 1.10.")
_DAY_MONTH = re.compile(r"(?:0?[1-9]|[12]\d|3[01])\.(?:0?[1-9]|1[0-2])\.")
#: code (fenced blocks, inline spans): programming languages write "." decimals in every locale
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)


def _quantities(pattern: re.Pattern[str], text: str, names: bool = True) -> bool:
    """Whether ``text`` writes a number ``pattern`` matches as a quantity: not in code
    (:data:`_CODE`), not a name's number (:data:`_NAME_BEFORE`: versions, sections, standards,
    clock times), not a day and month (:data:`_DAY_MONTH`), not part of a date or a version with
    more parts ("12.03.2024", "3.12.1": the locale patterns exclude a further separator and
    digit). ``names=False`` keeps names' numbers (decimal commas: "Je 0,5 kg"; no version or
    section is written so)."""
    prose = _CODE.sub(" ", text)
    for m in pattern.finditer(prose):
        s = m.start()
        while s > 0 and prose[s - 1].isdigit():
            s -= 1  # the number's first digit ("1,234.5" is matched from its last group)
        if names and (_NAME_BEFORE.search(prose[max(0, s - 24):s]) or _CLOCK_AFTER.match(prose, m.end())
                      or _DAY_MONTH.fullmatch(prose, s, m.end() + 1)):
            continue
        return True
    return False


#: common words of languages whose numbers group with "." and mark decimals with "," (CLDR:
#: de, es, it, pt, nl; fr writes decimal commas too), and of English; words shared with English
#: or used as variables ("die", "also", "per", "a", "e", "y", "et") are left out
_CONTINENTAL_WORDS = frozenset(
    "und der das den dem des ist sind mit für nicht ein eine einen einer auf von zu zum zur auch oder wird werden "
    "bei nach zusammen ergibt gleich insgesamt beträgt kostet wir sie gibt laut gemäß siehe summe preis stück "
    "jedes jede über durch wenn dann dass weil noch nur sich haben kann müssen "
    "el los las es con para por una del que son pero como más entonces resultado cada "
    "il di che è sono gli della più quindi ogni "
    "os é com uma são não então "
    "het een van met voor niet zijn ook dan totaal elke "
    "le les est avec pour une sont pas donc chaque ce".split())
_ENGLISH_WORDS = frozenset(
    "the and is with for of to are we that this it so then each total which be has have was not or by from at as "
    "on an its there here what when how if than into".split())
_WORD = re.compile(r"[^\W\d_]+")


def _continental_prose(text: str) -> bool:
    """Whether the answer's prose is in a language that writes "1.500" for fifteen hundred and
    "2,5" for two and a half: more of its common words (:data:`_CONTINENTAL_WORDS`) than of
    English's, at least two of them or one in an answer with no English word."""
    words = _WORD.findall(_CODE.sub(" ", text).lower())
    cont = sum(w in _CONTINENTAL_WORDS for w in words)
    eng = sum(w in _ENGLISH_WORDS for w in words)
    return cont > eng and (cont >= 2 or eng == 0)


def _other_locale(text: str, checks: list[Check]) -> None:
    """A failed claim whose numbers read differently in the other locale (:data:`_AMBIGUOUS`) is
    re-read that way ("1.500 € + 250 € = 1.750 €" is 1500 + 250 in German; "1,500 × 2 = 3" is
    1.5 × 2 where the text also writes "2,5"): when that reading does not fail, the claim is
    ``unknown``, not ``fail``. A claim whose ambiguous numbers are all "," groups is re-read only
    where the text writes a number only the other locales write (:data:`_CONTINENTAL`) or its
    prose is in one of their languages (:func:`_continental_prose`). The text
    decides nothing here (``normalize`` keeps one group without decimals English, so
    ``1.500`` was 1.5 and a right German sum was failed and re-asked); a claim that itself writes
    a number only English writes ("36,791 × 10 = 367.91") has no other locale's reading, and its
    failure stands; false alarms cost more than misses (docs/design.md "False alarms cost more
    than misses"), and an English claim that is wrong only by that coincidence is
    rare. Not where the rest of the answer writes quantities only English writes (:data:`_ENGLISH`:
    "$2.50", "1,234.5") and neither a quantity only the other locales write nor prose in one of
    their languages; a number that names something (a version, section, standard, date or clock
    time, or any number in code: :func:`_quantities`) is no evidence either way. Not in GSM8K calculator notes
    (written in English by construction). At most :data:`_MAX_REREADS` claims are re-read, each
    within a work budget of their own (the answer's own may be spent by then); one past them, or
    whose re-reading ran out of it, is ``unknown`` unread (:func:`_not_reread`). Mutates
    ``checks`` in place."""
    continental = _quantities(_CONTINENTAL, text, names=False) or _continental_prose(text)
    if not continental and _quantities(_ENGLISH, text):
        return  # the answer writes its quantities the English way elsewhere: no second reading
    # a "." group ("1.500") is unusual English (a decimal with three places) and the usual
    # continental thousands; a "," group ("75,000") the other way round: re-read it only where
    # the text writes a number only the other locales write. GSM8K's model answers in English
    # with "," groups alone lost real catches otherwise ("x=25,000 ... 25*3=75,000")
    todo = []
    for c in checks:
        if (c.outcome == "fail" and c.evidence.get("kind") != "calculator_note"
                and any(m.group(2) == "." or continental for m in _AMBIGUOUS.finditer(c.claim or ""))
                and not _ENGLISH.search(c.claim)):  # "36,791 × 10 = 367.91": "367.91" has no other reading
            swapped = _AMBIGUOUS.sub(lambda m: m.group(1) + ("" if m.group(2) == "." else ".") + m.group(3), c.claim)
            todo.append((c, swapped, f"read with the other locale's separators ({swapped}) the claim holds"))
    _reread(todo, "other_locale")
