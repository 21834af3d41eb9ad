"""Labelled answers for ``veracity eval``: readers for the formats that already exist.

Every reader yields *items*, one labelled answer each::

    {"id": str, "set": str (the data set / case file), "family": str (the kind of case: ``math``,
     ``code``, ``citations``, ``grounding``, ``relevance``; a labelled JSONL line's own ``family``,
     else its set), "question": str | None, "answer": str,
     "label": True (the answer is right) | False (wrong) | None (not labelled),
     "claims": [{"span": [start, end]} | {"text": str}, "correct": bool] | None,
     "single_claim": bool (the label is about the answer's one claim: a rendered reference),
     "meta": {...}  (what the source says besides: hallucination type, style, reviewer ...)}

Formats read as they are (:func:`read`; a folder reads every file it knows in it):

* **labelled JSONL** (this project's own): ``{"question", "answer", "label"}`` per line; ``label``
  is ``true``/``false``, ``"correct"``/``"incorrect"`` or a review verdict; optional ``claims``
  (per-claim labels, matched to a check by span or by text contained in the check's claim),
  ``single_claim`` (true: the label is about the answer's one checkable claim) and ``family``
  (the row of eval's per-family summary it counts in; default its ``set``, else the file name).
* **review-queue export** (``veracity review export``, :func:`proxy.stores.review.export_line`): the
  reviewer's ``label.verdict`` (:data:`proxy.stores.review.VERDICTS`): ``correct`` -> True,
  ``incorrect`` -> False, ``partially_correct`` / ``cannot_tell`` / open -> None. Lines without
  answer text (the policy's ``review.include_text`` was off) cannot be re-checked: skipped, counted.
* ``../shared/cases`` (each folder's SOURCE.md names the format):
  ``citations/supplement_chatgpt_citations.jsonl`` and ``dev_public.jsonl`` (Walters & Wilder 2023;
  HALLMARK dev: ``label`` VALID / HALLUCINATED, each entry rendered as a reference list in
  :data:`CITATION_STYLES` as ``bench/citations_bench.py`` does); ``math/test.jsonl`` (GSM8K
  reference solutions, right; their calculator notes ``<<48/2=24>>`` kept: checkable claims),
  ``math/example_model_solutions.jsonl`` (GPT-3 solutions, ``is_correct``; notes removed), ``math/processbench_*.json`` (ProcessBench, Zheng et al. 2024: ``label`` = index
  of the first wrong step, -1 none; steps before it are labelled right, that step wrong);
  ``code/humaneval_py_gpt4_simple.jsonl`` (``is_solved``).
* grounding cases (``grounding/`` and ``relevance/``): each item carries ``"context"``, the source
  text the answer must rest on, sent as the request's system message (a RAG request; the facts
  verifier's ``context`` backend searches it, as ``bench/facts_bench.py`` does):
  ``SummEdits/data/summedits/*.json`` (Laban et al. 2023: document, summary, ``label`` 1 consistent
  = right / 0 = wrong); ``HaluEval-qa/qa_data.json`` (Li et al. 2023, JSON lines: knowledge,
  question, the right answer and the hallucinated one: two items per record); ``BEGIN/*/begin_*.tsv``
  (Dziri et al. 2022: knowledge, previous turn as question, response; Fully attributable = right,
  Not fully attributable = wrong, Generic skipped and counted: it claims nothing);
  ``relevance/scifact_claims_{train,dev}.jsonl`` (Wadden et al. 2020: each claim against each abstract
  it cites, from ``scifact_corpus.jsonl`` beside it; SUPPORT = right, CONTRADICT and no evidence
  (NEI) = wrong: the abstract does not back the sentence, a mis-citation, as
  ``bench/relevance_bench.py`` counts it; ``meta.scifact_label`` keeps which).
  The Agrawal et al. titles CSV is not read (it labels titles, not answers).

Raises :class:`ValueError` naming the file and line for a line that is not JSON or a file whose
format is not recognised.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["read", "read_file", "CITATION_STYLES", "citation_answer", "math_items", "code_items",
           "citation_items", "label_of", "summedits_items", "halueval_items", "begin_items", "scifact_items",
           "KNOWN_FILES"]

#: reference styles each citation entry is rendered in (bench/citations_bench.py renders all five)
CITATION_STYLES = ("apa", "ieee", "mla", "harvard", "bibtex")
#: GSM8K calculator annotations ``<<48/2=24>>`` (Cobbe et al. 2021's tool marks, not prose)
_CALC_NOTE = re.compile(r"<<[^<>\n]*>>")
_GPT3_KEYS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def label_of(value: Any) -> bool | None:
    """A label value -> True (right) / False (wrong) / None. Accepts booleans, ``correct`` /
    ``incorrect`` / ``right`` / ``wrong`` / ``valid`` / ``hallucinated`` (any case), a review
    verdict (``partially_correct`` and ``cannot_tell`` -> None) or ``{"verdict": ...}``."""
    if isinstance(value, dict):
        value = value.get("verdict")
    if isinstance(value, bool) or value is None:
        return value
    v = str(value).strip().lower()
    if v in ("correct", "right", "true", "valid", "supported", "1", "pass"):
        return True
    if v in ("incorrect", "wrong", "false", "hallucinated", "refuted", "0", "fail"):
        return False
    return None


def citation_answer(fields: dict[str, Any], style: str) -> str:
    """One reference rendered in ``style`` inside an answer (a reference list, or a BibTeX block)."""
    from verifiers.citations import render

    ref = render(fields, style)
    if style == "bibtex":
        return f"Here is the BibTeX you asked for:\n\n```bibtex\n{ref}\n```\n"
    return f"This is discussed in the literature.\n\nReferences\n\n1. {ref}\n"


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc})") from None


def citation_items(path: Path, styles: tuple[str, ...] = CITATION_STYLES,
                   limit: int | None = None) -> Iterator[dict[str, Any]]:
    """HALLMARK-shaped citation entries -> one item per entry and style (label: VALID = right)."""
    for k, (_, e) in enumerate(_jsonl(path)):
        if limit is not None and k >= limit:
            break
        for st in styles:
            yield {"id": f"{e['bibtex_key']}:{st}", "set": path.stem, "family": "citations", "question": None,
                   "answer": citation_answer(e["fields"], st), "label": e["label"] == "VALID", "claims": None,
                   "single_claim": True,
                   "meta": {"style": st, "hallucination_type": e.get("hallucination_type") or "valid",
                            "generation_method": e.get("generation_method")}}


def math_items(path: Path, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """GSM8K reference / GPT-3 solutions (JSONL) and ProcessBench (JSON list)."""
    if path.suffix == ".json":
        for r in json.loads(path.read_text(encoding="utf-8"))[:limit]:
            answer, claims = "", []
            for i, step in enumerate(r["steps"]):
                if i:
                    answer += "\n\n"
                start = len(answer)
                answer += step
                if r["label"] == -1 or i <= r["label"]:
                    claims.append({"span": [start, len(answer)], "correct": r["label"] == -1 or i < r["label"]})
            yield {"id": str(r["id"]), "set": path.stem, "family": "math", "question": r["problem"], "answer": answer,
                   "label": r["label"] == -1, "claims": claims, "meta": {"generator": r.get("generator")}}
        return
    for k, (n, r) in enumerate(_jsonl(path)):
        if limit is not None and k >= limit:
            break
        if any(key in r for key in _GPT3_KEYS):
            for key in _GPT3_KEYS:
                if key in r:
                    yield {"id": f"{n}:{key}", "set": path.stem, "family": "math", "question": r["question"],
                           "answer": _CALC_NOTE.sub("", r[key]["solution"]), "label": bool(r[key]["is_correct"]),
                           "claims": None, "meta": {"model": key}}
        else:  # GSM8K reference: "#### 72" closes the solution
            yield {"id": str(n), "set": path.stem, "family": "math", "question": r["question"],
                   "answer": r["answer"].replace("####", "The answer is"), "label": True,
                   "claims": None, "meta": {}}


def code_items(path: Path, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """HumanEval GPT-4 solutions: the problem as question, the solution in a python block."""
    for k, (_, r) in enumerate(_jsonl(path)):
        if limit is not None and k >= limit:
            break
        solved = r["is_solved"] if isinstance(r["is_solved"], bool) else str(r["is_solved"]).lower() == "true"
        yield {"id": str(r.get("task_id", k)), "set": path.stem, "family": "code", "question": r["prompt"],
               "answer": "```python\n" + r["solution"] + "\n```", "label": solved, "claims": None, "meta": {}}


def summedits_items(path: Path, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """SummEdits (a JSON list per domain): the document as context, the summary as answer;
    ``label`` "1" consistent (right) / "0" inconsistent (wrong)."""
    for r in json.loads(path.read_text(encoding="utf-8"))[:limit]:
        yield {"id": str(r["id"]), "set": path.stem, "family": "grounding", "question": None, "context": r["doc"],
               "answer": r["summary"],
               "label": str(r["label"]) == "1", "claims": None,
               "meta": {"split": r.get("split"), "edit_types": r.get("edit_types")}}


def halueval_items(path: Path, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """HaluEval QA (JSON lines, or one JSON list): per record the right answer (right) and the
    hallucinated one (wrong), both against the record's knowledge passage."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
    for i, r in enumerate(rows[:limit]):
        for kind, key, label in (("r", "right_answer", True), ("h", "hallucinated_answer", False)):
            yield {"id": f"{i}{kind}", "set": "HaluEval-qa", "family": "grounding", "question": r["question"],
                   "context": r["knowledge"],
                   "answer": r[key], "label": label, "claims": None, "meta": {}}


def begin_items(path: Path, limit: int | None = None, skipped: dict[str, int] | None = None
                ) -> Iterator[dict[str, Any]]:
    """BEGIN (TSV): knowledge as context, the previous turn as question, the response as answer.
    ``limit`` counts rows read; Generic responses are skipped (``skipped["begin_generic"]``)."""
    csv.field_size_limit(10_000_000)
    with path.open(newline="", encoding="utf-8") as fh:
        for i, r in enumerate(csv.DictReader(fh, delimiter="\t")):
            if limit is not None and i >= limit:
                break
            lab = r.get("begin_label")
            if lab not in ("Fully attributable", "Not fully attributable"):
                if skipped is not None:
                    skipped["begin_generic"] = skipped.get("begin_generic", 0) + 1
                continue
            yield {"id": f"{path.stem}:{i}", "set": path.stem, "family": "grounding", "question": r["message"],
                   "context": r["knowledge"],
                   "answer": r["response"], "label": lab == "Fully attributable", "claims": None,
                   "meta": {"model": r.get("model_name"), "source": r.get("data_source")}}


def scifact_items(path: Path, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """SciFact claims (``limit`` claims): one item per cited abstract, the abstract (title and
    sentences, from ``scifact_corpus.jsonl`` in the same folder) as context, the claim as answer.
    Raises FileNotFoundError without the corpus file."""
    corpus_file = path.parent / "scifact_corpus.jsonl"
    if not corpus_file.is_file():
        raise FileNotFoundError(f"{path}: needs {corpus_file.name} beside it (the cited abstracts)")
    claims = [c for _, c in _jsonl(path)][:limit]
    wanted = {d for c in claims for d in c["cited_doc_ids"]}
    corpus = {d["doc_id"]: d for _, d in _jsonl(corpus_file) if d["doc_id"] in wanted}
    for c in claims:
        for did in c["cited_doc_ids"]:
            ev = (c.get("evidence") or {}).get(str(did))
            lab = ev[0]["label"] if ev else "NEI"
            doc = corpus[did]
            yield {"id": f"{c['id']}:{did}", "set": path.stem, "family": "relevance", "question": None,
                   "context": doc["title"] + ".\n\n" + " ".join(doc["abstract"]), "answer": c["claim"],
                   "label": lab == "SUPPORT", "claims": None, "meta": {"scifact_label": lab}}


def _generic(path: Path, skipped: dict[str, int]) -> Iterator[dict[str, Any]]:
    for n, r in _jsonl(path):
        if r.get("object") == "veracity.review" or ("veracity_status" in r and "failed_checks" in r):
            if not isinstance(r.get("answer"), str):
                skipped["review_without_text"] = skipped.get("review_without_text", 0) + 1
                continue
            yield {"id": str(r.get("id") or n), "set": path.stem, "family": path.stem, "question": r.get("question"),
                   "answer": r["answer"],
                   "label": label_of(r.get("label")), "claims": None,
                   "meta": {"review_reason": r.get("reason"), "gateway_status": r.get("veracity_status"),
                            "model": r.get("model")}}
            continue
        if not isinstance(r.get("answer"), str):
            raise ValueError(f"{path}:{n}: no 'answer' string (expected {{question, answer, label}})")
        claims = r.get("claims")
        if claims is not None:
            claims = [dict(c, correct=label_of(c.get("correct", c.get("label")))) for c in claims]
        yield {"id": str(r.get("id") or n), "set": r.get("set") or path.stem,
               "family": str(r.get("family") or r.get("set") or path.stem), "question": r.get("question"),
               "answer": r["answer"], "label": label_of(r.get("label")), "claims": claims,
               "single_claim": bool(r.get("single_claim")),
               "meta": r.get("meta") or {}}


def read_file(path: str | Path, *, styles: tuple[str, ...] = CITATION_STYLES, limit: int | None = None,
              skipped: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Items of one file, its format recognised from its first record (see the module doc).
    ``limit``: records read per file (a citation entry counts once for all its styles).
    ``skipped`` collects counts of records that could not be used, by reason."""
    p = Path(path)
    skipped = {} if skipped is None else skipped
    if p.suffix == ".tsv":
        return list(begin_items(p, limit, skipped))
    if p.suffix == ".json":
        head = p.read_text(encoding="utf-8")[:4096]
        if '"knowledge"' in head and '"hallucinated_answer"' in head:
            return list(halueval_items(p, limit))
        if '"summary"' in head and '"doc"' in head:
            return list(summedits_items(p, limit))
        return list(math_items(p, limit))
    if p.suffix != ".jsonl":
        raise ValueError(f"{p}: not a .jsonl / .json / .tsv file")
    first = next((r for _, r in _jsonl(p)), None)
    if first is None:
        return []
    if "claim" in first and "cited_doc_ids" in first:
        return list(scifact_items(p, limit))
    if "bibtex_key" in first and "fields" in first:
        return list(citation_items(p, styles, limit))
    if "is_solved" in first and "solution" in first:
        return list(code_items(p, limit))
    if "question" in first and ("####" in str(first.get("answer", "")) or any(k in first for k in _GPT3_KEYS)):
        return list(math_items(p, limit))
    out = list(_generic(p, skipped))
    return out[:limit] if limit is not None else out


#: case files read from a folder (names or fnmatch patterns), in this order; others are left alone
KNOWN_FILES = ("supplement_chatgpt_citations.jsonl", "dev_public.jsonl", "test.jsonl",
               "example_model_solutions.jsonl", "processbench_gsm8k.json", "processbench_omnimath.json",
               "humaneval_py_gpt4_simple.jsonl", "summedits_*.json", "qa_data.json", "begin_dev_*.tsv",
               "begin_test_*.tsv", "scifact_claims_train.jsonl", "scifact_claims_dev.jsonl")


def _known(name: str) -> int | None:
    return next((i for i, pat in enumerate(KNOWN_FILES) if fnmatch.fnmatchcase(name, pat)), None)


def read(path: str | Path, *, styles: tuple[str, ...] = CITATION_STYLES, limit: int | None = None,
         skipped: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Items of a file, or of every known case file in a folder (recursively, :data:`KNOWN_FILES`
    order). Raises ValueError for a folder holding none, FileNotFoundError for a missing path."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or folder")
    if p.is_file():
        return read_file(p, styles=styles, limit=limit, skipped=skipped)
    files = sorted((f for f in p.rglob("*") if f.is_file() and _known(f.name) is not None),
                   key=lambda f: (_known(f.name), str(f)))
    if not files:
        raise ValueError(f"{p}: no known case file in this folder ({', '.join(KNOWN_FILES)})")
    return [it for f in files for it in read_file(f, styles=styles, limit=limit, skipped=skipped)]
