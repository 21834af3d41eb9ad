"""``veracity eval``: run the checks on labelled answers and measure them (design 003 §5; docs/eval.md).

Pipeline: :func:`proxy.cli.cases.read` -> :func:`run_items` (in-process through
:func:`proxy.pipeline.sequence.verify_text` under a policy, or through a running gateway's
``POST /v1/veracity/verify`` with the ``openai`` SDK) -> :func:`compute` -> :func:`write`.

What is measured (positive class = a *wrong* answer or claim: a flag is a ``fail``):

* **answers**: the report's ``status`` against the label; ``failed`` on a right answer is a false
  alarm, ``passed`` on a wrong one a miss. Confusion table label x status. Per case family and per
  set, and overall, also over the **checkable** answers only (status ``passed`` / ``failed``: the
  checks reached a verdict here), with the **unknown** ones (``unverified`` / ``skipped`` /
  ``error``: no verifier model, no source, nothing checkable) counted apart with their reasons --
  the plain recall counts an unknown wrong answer as a miss.
* **per verifier**: answer level (the verifier flagged the answer: one of its checks failed) and
  check level (each check against its own label, see :func:`check_label`); precision, recall, F1.
* **per citation status** (``evidence["status"]``, any outcome; the claim's label, or the
  answer's for a ``single_claim`` answer with one citation check): how often the status' class is right
  (VALID for VERIFIED / PARTIALLY_VERIFIED, HALLUCINATED for the others): precision, recall, F1,
  the Laplace estimate ``(k + 1) / (n + 2)`` and the Wilson 95 % interval.
* **calibration** per verifier: a decisive check (``pass``/``fail``) says its outcome is right with
  probability ``confidence``. Expected calibration error over ``bins`` equal-width bins of
  ``(0, 1]`` (right-closed, ``((m-1)/M, m/M]``; confidence 0 falls in the first bin):
  ``ECE = sum_m |B_m|/n * |acc(B_m) - conf(B_m)|`` -- Naeini, Cooper & Hauskrecht 2015 (AAAI),
  Guo, Pleiss, Sun & Weinberger 2017 (ICML, eq. 3), with M = 10 by default as there. The
  reliability diagram draws acc(B_m) against the bin (Guo et al. fig. 1).
* **cost and latency**: per answer verification ms (``answer``: the report's ``cost.ms``, measured
  by the gateway or the in-process pipeline; ``wall``: the whole call as eval saw it, HTTP included
  with ``--gateway``), per verifier ms (``extra.durations_ms``), extra tokens / verifier-model
  calls / searches: p50, p90, p95, p99 (numpy's default linear interpolation), mean, max.

Computed here rather than with scikit-learn: each number is a few lines of counting (its
``precision_recall_fscore_support`` / ``calibration_curve`` would add a 40 MB dependency and
``calibration_curve`` returns no bin counts, which ECE needs).
"""

from __future__ import annotations

import asyncio
import base64
import html
import io
import json
import math
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

__all__ = ["run_items", "compute", "write", "ece", "reliability_bins", "prf", "laplace", "wilson",
           "check_label", "percentiles", "load_policy", "preflight", "reachable", "Progress", "messages_of",
           "CITATION_CLASS", "STATUSES_ORDER", "DECIDED", "FAMILIES_ORDER", "family_of", "summary_lines"]

#: the class a citation status asserts: True = the reference is real and right (VALID)
CITATION_CLASS = {"VERIFIED": True, "PARTIALLY_VERIFIED": True, "LIKELY_HALLUCINATION": False,
                  "CONFLICT": False, "NOT_FOUND": False}
STATUSES_ORDER = ("passed", "failed", "corrected", "unverified", "skipped", "error")
_Z95 = 1.959963984540054  # standard normal 97.5 % quantile


# ------------------------------------------------------------------------------ small statistics


def prf(tp: int, fp: int, fn: int) -> dict[str, float | None]:
    """Precision tp/(tp+fp), recall tp/(tp+fn), F1 (their harmonic mean). A ratio without a
    denominator is ``None`` (nothing flagged: no precision; nothing wrong: no recall), shown
    as "n/a", never as 0; F1 is None when either is, 0.0 when both are 0."""
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    f1 = None if p is None or r is None else 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


def laplace(k: int, n: int) -> float:
    """Laplace's rule of succession (k + 1) / (n + 2): the posterior mean of a success rate under a
    uniform prior; 0.5 with no data."""
    return (k + 1) / (n + 2)


def wilson(k: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval (Wilson 1927) for k successes in n trials; (0, 1) with no data."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def _bin_of(conf: float, bins: int) -> int:
    # right-closed bins ((m-1)/M, m/M], m = 1..M, as 0-based index; round() absorbs 0.3*10 = 3.0000000000000004
    return min(bins, max(1, math.ceil(round(conf * bins, 9)))) - 1


def reliability_bins(conf: list[float], right: list[bool], bins: int = 10) -> list[dict[str, Any]]:
    """Per equal-width bin: ``lo``, ``hi``, ``n``, ``confidence`` (mean), ``accuracy`` (share right;
    None for an empty bin)."""
    acc: list[list[float]] = [[] for _ in range(bins)]
    ok: list[list[bool]] = [[] for _ in range(bins)]
    for c, r in zip(conf, right):
        b = _bin_of(float(c), bins)
        acc[b].append(float(c))
        ok[b].append(bool(r))
    return [{"lo": m / bins, "hi": (m + 1) / bins, "n": len(acc[m]),
             "confidence": sum(acc[m]) / len(acc[m]) if acc[m] else None,
             "accuracy": sum(ok[m]) / len(ok[m]) if ok[m] else None} for m in range(bins)]


def ece(conf: list[float], right: list[bool], bins: int = 10) -> float | None:
    """Expected calibration error (module doc); None with no decisive check."""
    n = len(conf)
    if not n:
        return None
    return sum(b["n"] / n * abs(b["accuracy"] - b["confidence"]) for b in reliability_bins(conf, right, bins) if b["n"])


def percentiles(values: list[float]) -> dict[str, float] | None:
    """p50/p90/p95/p99 (numpy linear interpolation), mean, max, n; None for no values."""
    if not values:
        return None
    import numpy as np

    a = np.asarray(values, dtype=float)
    q = np.percentile(a, [50, 90, 95, 99])
    return {"n": int(a.size), "p50": float(q[0]), "p90": float(q[1]), "p95": float(q[2]), "p99": float(q[3]),
            "mean": float(a.mean()), "max": float(a.max())}


# ------------------------------------------------------------------------------ labels of checks


def check_label(item: dict[str, Any], check: dict[str, Any], decisive_checks: int) -> bool | None:
    """The label of one check (True = its claim is right), in this order:

    1. the item's per-claim labels: a claim whose ``span`` holds the check's span start, or whose
       ``text`` is contained in the check's claim (or contains it);
    2. a right answer: every claim in it is taken as right;
    3. a wrong answer whose label is about its one claim (``item["single_claim"]``: a citation
       case renders one reference per answer) with exactly one decisive (pass/fail) check: that
       check's claim is the wrong one (not so for a math solution, whose one equation may be right
       while its reasoning is wrong);
    4. else None: a wrong answer's other claims may well be right (unlabelled, left out)."""
    span = check.get("span")
    for c in item.get("claims") or ():
        if c.get("correct") is None:
            continue
        if "span" in c and span and c["span"][0] <= span[0] < c["span"][1]:
            return c["correct"]
        t = c.get("text")
        claim = check.get("claim") or ""
        if t and claim and (t in claim or claim in t):
            return c["correct"]
    if item.get("label") is True:
        return True
    if (item.get("label") is False and item.get("single_claim") and decisive_checks == 1
            and check.get("outcome") in ("pass", "fail")):
        return False
    return None


# ------------------------------------------------------------------------------ running


def load_policy(name_or_path: str | None, *, citations_index: str | None = None, verifiers: list[str] | None = None,
                sandbox: str | None = None, model_name: str | None = None, risk_threshold: float | None = None,
                citation_sources: list[str] | None = None, grounding: bool = False,
                grounding_model: bool = False, grounding_statements: bool = False, index_partial: bool = False) -> Any:
    """A :class:`proxy.policy.Policy` from a shipped name (``policies/NAME.yaml``) or a file,
    with eval's overrides: ``citations_index`` (the citation verifier looks up only this offline
    index, no cache -- what ``bench/citations_bench.py`` does; with ``index_partial`` the index is a
    partial library, ``local_index.authoritative: false``: a reference it lacks is ``unknown``, not
    NOT_FOUND), ``citation_sources`` (the network
    sources kept, :func:`preflight`), ``verifiers`` (only these stay enabled), ``sandbox`` (the
    code verifier's backend), ``risk_threshold`` (0: every answer the risk score sends to a
    verifier is checked, whatever its score), ``grounding`` (the policy for grounding cases: the
    facts verifier enabled with the ``context`` backend among its backends, its model tier only
    with ``grounding_model``; with ``grounding_statements`` its ``grounding`` option on unless the
    policy sets it: every statement sentence checked against the source, and one naming a
    number, date or name the source does not hold fails, as under the ``rag`` policy -- for
    answers meant to rest on the source alone, the ``grounding`` family). Raises
    PolicyError / FileNotFoundError."""
    import yaml

    from proxy.policy import _parse, default_policies_dir

    name = name_or_path or "default"
    p = Path(name)
    if not p.suffix:
        p = default_policies_dir() / f"{name}.yaml"
    if not p.is_file():
        raise FileNotFoundError(f"policy {name!r}: no file {p}")
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    doc.setdefault("name", p.stem)
    v = doc.setdefault("verifiers", {})
    if citations_index:
        c = v.setdefault("citations", {})
        c["enabled"] = True
        c["sources"] = {"use": [], "local_index": {"path": str(citations_index), "authoritative": not index_partial},
                        "cache": {"backend": "none"}}
    elif citation_sources is not None:
        c = v.setdefault("citations", {})
        c["sources"] = dict(c.get("sources") or {}, use=list(citation_sources))
    if verifiers is not None:
        for n in list(v):
            if isinstance(v[n], dict):
                v[n]["enabled"] = n in verifiers
        for n in verifiers:
            v.setdefault(n, {})["enabled"] = True
    if sandbox:
        v.setdefault("code", {}).setdefault("sandbox", {})["backend"] = sandbox
    if risk_threshold is not None:
        doc.setdefault("risk", {})["threshold"] = risk_threshold
    if model_name:
        doc.setdefault("verification", {})["model"] = model_name
    if grounding:
        f = v.setdefault("facts", {})
        f["enabled"] = True
        use = list((f.get("backends") or {}).get("use") or [])
        f["backends"] = dict(f.get("backends") or {}, use=use if "context" in use else ["context", *use])
        f["use_model"] = bool(grounding_model)
        if grounding_statements:
            # the labels are about attribution to the source (a consistent summary, an attributable
            # response): every statement sentence is a claim, and one naming what the source does not
            # is ungrounded (the rag policy's setting, docs/facts.md step 5), unless the policy says
            f["options"] = dict(f.get("options") or {})
            f["options"].setdefault("grounding", True)
    return _parse(yaml.safe_dump(doc), str(p))


def messages_of(item: dict[str, Any]) -> list[dict[str, str]] | None:
    """The request messages an item stands for: its ``context`` (the source text of a grounding
    case) as the system message, its question as the user message; None with neither."""
    msgs = []
    if item.get("context"):
        msgs.append({"role": "system", "content": item["context"]})
    if item.get("question"):
        msgs.append({"role": "user", "content": item["question"]})
    return msgs or None


def _timed_out(t: float) -> str:
    return f"timed out: no verdict within {t:g} s (--answer-timeout)"


async def _inprocess(items: list[dict[str, Any]], policy: Any, model: Any, grounding_policy: Any,
                     answer_timeout: float | None, progress: Any) -> list[dict[str, Any]]:
    from proxy.gateway import VerificationResources
    from proxy.stores.budget import RequestBudget
    from proxy.pipeline.sequence import verify_text

    out = []
    resources = VerificationResources()  # facts caches and sandboxes shared by the items of this run
    try:
        for it in items:
            pol = policy
            if it.get("context") and grounding_policy is not None:
                pol = (grounding_policy.get(it.get("family"), grounding_policy.get(None))
                       if isinstance(grounding_policy, dict) else grounding_policy) or policy
            t0 = time.perf_counter()
            try:
                rep = await asyncio.wait_for(
                    verify_text(pol, it.get("question"), it["answer"], RequestBudget.from_policy(pol.budgets.request),
                                model=model, messages=messages_of(it), resources=resources), answer_timeout)
                r = {"report": rep.to_dict(), "wall_ms": (time.perf_counter() - t0) * 1000, "error": None}
            except TimeoutError:
                r = {"report": None, "wall_ms": (time.perf_counter() - t0) * 1000, "error": _timed_out(answer_timeout)}
            except Exception as exc:  # noqa: BLE001 -- one broken item must not end the evaluation
                r = {"report": None, "wall_ms": (time.perf_counter() - t0) * 1000,
                     "error": f"{type(exc).__name__}: {exc}"[:300]}
            out.append(r)
            if progress is not None:
                progress(r)
    finally:
        await resources.aclose()
    return out


async def _through_gateway(items: list[dict[str, Any]], base_url: str, api_key: str, policy: str | None,
                           concurrency: int, answer_timeout: float | None, progress: Any) -> list[dict[str, Any]]:
    import httpx
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=2,
                                timeout=answer_timeout if answer_timeout else 120)
    headers = {"x-veracity-policy": policy} if policy else {}
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(it: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {"answer": it["answer"]}
        msgs = messages_of(it)
        if msgs:
            body["messages"] = msgs
        async with sem:
            t0 = time.perf_counter()
            try:
                resp = await asyncio.wait_for(client.post("/veracity/verify", cast_to=httpx.Response, body=body,
                                                          options={"headers": headers}), answer_timeout)
                r = {"report": resp.json()["veracity"], "wall_ms": (time.perf_counter() - t0) * 1000, "error": None}
            except TimeoutError:
                r = {"report": None, "wall_ms": (time.perf_counter() - t0) * 1000,
                     "error": _timed_out(answer_timeout)}
            except openai.APIError as exc:
                r = {"report": None, "wall_ms": (time.perf_counter() - t0) * 1000,
                     "error": f"{type(exc).__name__}: {exc}"[:300]}
        if progress is not None:
            progress(r)
        return r

    try:
        return list(await asyncio.gather(*(one(it) for it in items)))
    finally:
        await client.close()


def run_items(items: list[dict[str, Any]], *, policy: Any = None, gateway: str | None = None,
              api_key: str | None = None, policy_name: str | None = None, model: Any = None,
              concurrency: int = 4, grounding_policy: Any = None, answer_timeout: float | None = None,
              progress: Any = None) -> list[dict[str, Any]]:
    """Verify every item; one result per item, in order: ``{"report": dict | None, "wall_ms",
    "error": str | None}``. In-process with ``policy`` (a Policy; ``model`` the verifier model,
    e.g. :class:`proxy.pipeline.verifier_model.OpenAIChatModel`; items with a ``context`` under
    ``grounding_policy`` when given: a Policy, or ``{family: Policy, None: Policy}``, the one of
    the item's family else the ``None`` one), or through ``gateway`` (base URL ending in ``/v1``;
    ``policy_name`` sent as ``x-veracity-policy``, ``concurrency`` requests at a time). An item's
    ``context`` and question go as the request messages (:func:`messages_of`).
    ``answer_timeout`` (s, None = none): an answer without a verdict by then is an evaluation
    error ("timed out ..."), so one stuck answer costs at most that. ``progress``: called with each
    result as it is done (e.g. :meth:`Progress.update`)."""
    if gateway:
        return asyncio.run(_through_gateway(items, gateway, api_key or "sk-none", policy_name, concurrency,
                                            answer_timeout, progress))
    return asyncio.run(_inprocess(items, policy, model, grounding_policy, answer_timeout, progress))


class Progress:
    """How far an evaluation is, on ``stream`` (stderr): a tqdm bar when the stream is a terminal,
    else one line every ``every_s`` seconds (0: after every answer) and a last line when done::

        veracity eval: 420/1370 answers (31%), 12 s, about 27 s left, 0 errors

    Use as ``run_items(..., progress=p.update)`` then :meth:`close`. ``tty`` overrides the
    terminal test; ``clock`` is injectable (seconds, monotonic)."""

    def __init__(self, total: int, *, stream: Any = None, every_s: float = 10.0, tty: bool | None = None,
                 clock: Any = time.monotonic) -> None:
        import sys

        self.total, self.done, self.errors = total, 0, 0
        self.stream = stream if stream is not None else sys.stderr
        self.every_s, self.clock = every_s, clock
        self.t0 = self.last = clock()
        isatty = getattr(self.stream, "isatty", None)
        self.tty = tty if tty is not None else bool(isatty and isatty())
        self.bar = None
        if self.tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total, file=self.stream, unit="answer", desc="veracity eval", dynamic_ncols=True)
        else:
            print(f"veracity eval: {total} answers to check", file=self.stream, flush=True)

    def line(self) -> str:
        """The progress line as it stands."""
        el = self.clock() - self.t0
        left = el / self.done * (self.total - self.done) if self.done else None
        pct = 100 * self.done / self.total if self.total else 100.0
        eta = "" if left is None or self.done == self.total else f", about {left:.0f} s left"
        return (f"veracity eval: {self.done}/{self.total} answers ({pct:.0f}%), {el:.0f} s{eta}, "
                f"{self.errors} error{'s' * (self.errors != 1)}")

    def update(self, result: dict[str, Any]) -> None:
        """One more answer done (``result`` as :func:`run_items` returns it: an error counts)."""
        self.done += 1
        self.errors += result.get("error") is not None
        if self.bar is not None:
            self.bar.update(1)
            if self.errors:
                self.bar.set_postfix(errors=self.errors, refresh=False)
            return
        now = self.clock()
        if now - self.last >= self.every_s and self.done < self.total:
            self.last = now
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        """The last line (or the bar closed)."""
        if self.bar is not None:
            self.bar.close()
        else:
            print(self.line(), file=self.stream, flush=True)


def _source_urls(sources: dict[str, Any]) -> dict[str, str]:
    # where each enabled network citation source is looked up (its base_url), for the probe
    from verifiers.citations import Sources

    cfg = Sources.from_dict(sources)
    return {n: getattr(cfg, n).base_url for n in cfg.enabled if n != "local"}


def reachable(urls: list[str], timeout: float = 3.0) -> dict[str, bool]:
    """Whether a TCP connection to each URL's host and port opens within ``timeout`` seconds
    (all probed at once, so the probe costs at most ``timeout``). Behind an HTTP(S) proxy
    (``urllib.request.getproxies``) the proxy is what is probed. Touches the network."""
    import socket
    import urllib.parse
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    proxies = urllib.request.getproxies()

    def one(url: str) -> bool:
        u = urllib.parse.urlsplit(url)
        via = proxies.get(u.scheme)
        if via and not urllib.request.proxy_bypass(u.hostname or ""):
            u = urllib.parse.urlsplit(via)
        port = u.port or (443 if u.scheme == "https" else 80)
        try:
            socket.create_connection((u.hostname, port), timeout=timeout).close()
            return True
        except OSError:
            return False

    if not urls:
        return {}
    with ThreadPoolExecutor(max_workers=len(urls)) as ex:
        return dict(zip(urls, ex.map(one, urls)))


def preflight(items: list[dict[str, Any]], policy: Any, *, citations_index: str | None = None,
              model_url: str | None = None, probe: Any = reachable) -> tuple[list[str], dict[str, Any]]:
    """What cannot be checked here, said before the run instead of learnt from timeouts.

    Returns ``(notices, overrides)``: one sentence per limit (each naming the flag that lifts
    it), and the :func:`load_policy` arguments that make the run match them:

    * citations enabled, no ``citations_index``, and some answer the risk score sends to the
      citation verifier (``verifiers.risk.score``, as the pipeline decides): the policy's network
      sources are probed (``probe(urls) -> {url: bool}``, :func:`reachable`); unreachable ones are left out
      (``citation_sources``), so their references come back ``unknown`` at once ("no source
      configured") rather than after each source's timeouts and retries;
    * items with a ``context`` (grounding and relevance cases): the facts verifier with the
      ``context`` backend runs on them (``grounding``); without ``model_url`` its deterministic
      tier only (``grounding_model`` False): what the rules cannot prove from the text is ``unknown``;
    * ``model_url`` unreachable: said (the model tiers will end in ``unknown`` / ``error``)."""
    notices: list[str] = []
    over: dict[str, Any] = {}
    v = policy.verifiers
    citing = 0
    if v.citations.enabled and not citations_index:
        from verifiers import risk as risk_mod

        citing = sum(1 for it in items if "citations" in risk_mod.score(it.get("question"), it["answer"]).verifiers)
    if citing:
        urls = _source_urls(v.citations.sources)
        ok = probe(sorted(set(urls.values()))) if urls else {}
        down = [n for n, u in urls.items() if not ok.get(u)]
        if down:
            over["citation_sources"] = [n for n in urls if n not in down]
            if len(down) == len(urls):
                notices.append(
                    f"citations: {citing} answers cite references, but no citation source answers from here "
                    f"({', '.join(down)}: no connection) and no "
                    "--citations-index was given, so references are not looked up: each one is `unknown` ('no "
                    "source configured') instead of waiting on timeouts. Pass --citations-index FILE (an offline "
                    "index, `veracity index build`) to check them here.")
            else:
                notices.append(f"citations: {', '.join(down)} unreachable from here, left out; references are "
                               f"looked up in {', '.join(over['citation_sources'])} only (or pass --citations-index "
                               "FILE).")
    grounded = sum(1 for it in items if it.get("context"))
    if grounded:
        over["grounding"] = True
        over["grounding_model"] = bool(model_url)
        if not model_url:
            notices.append(
                f"grounding: {grounded} answers with a source text (grounding/, relevance/) are checked by the facts "
                "verifier's deterministic tier only: a claim it cannot prove or refute from the text is `unknown`. "
                "Pass --model URL (an OpenAI-compatible verifier model) for the model tier.")
    if model_url and not probe([model_url]).get(model_url):
        notices.append(f"model: {model_url} does not answer from here: the model tiers will end in `unknown` or "
                       "`error` (check --model).")
    return notices, over


# ------------------------------------------------------------------------------ metrics


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_round(v) for v in x]
    return x


#: report statuses that are a verdict on the whole answer: ``failed`` (a check failed: the flag)
#: or ``passed`` (every check-worthy unit decided and passed). ``unverified`` (checks ran, not all
#: decided), ``skipped`` (nothing checkable, or risk below the threshold) and ``error`` are not:
#: the answer could not be checked here, and is counted as ``unknown``, not as a miss.
DECIDED = ("passed", "failed")
#: the order of the per-family summary (the case families of proxy/cli/cases.py; others after, by name)
FAMILIES_ORDER = ("math", "code", "citations", "grounding", "relevance")


def family_of(item: dict[str, Any]) -> str:
    """The family an item counts in (``item["family"]``, set by the readers of
    :mod:`proxy.cli.cases`), else its set."""
    return str(item.get("family") or item.get("set"))


def _family_order(name: str) -> tuple[int, str]:
    return (FAMILIES_ORDER.index(name) if name in FAMILIES_ORDER else len(FAMILIES_ORDER), name)


def _ratio(k: int, n: int) -> float | None:
    return k / n if n else None


def _tally(c: Counter, label: bool | None, status: str | None, reason: str | None) -> None:
    # one answer into a group's counts (a set, a family, all): status None = evaluation error
    c["n"] += 1
    if status is None:
        c["errors"] += 1
        return
    c[f"status:{status}"] += 1
    if label is None:
        return
    c["labelled"] += 1
    f = status == "failed"
    c["tp" if f and not label else "fp" if f else "fn" if not label else "tn"] += 1
    side = "right" if label else "wrong"
    if status in DECIDED:
        c[f"decided:{side}"] += 1
    else:
        c[f"unknown:{side}"] += 1
        c[f"why:{status}: {reason}" if reason else f"why:{status}"] += 1


def _checkable(c: Counter) -> dict[str, Any]:
    """Over the labelled answers the checks decided (status in :data:`DECIDED`): how many wrong
    and right, the wrong ones ``failed`` (caught) and ``passed`` (missed), the right ones
    ``failed`` (false alarms); recall and false-alarm rate over them (None: no denominator)."""
    dw, dr = c["decided:wrong"], c["decided:right"]
    return {"wrong": dw, "right": dr, "caught": c["tp"], "passed_wrong": dw - c["tp"], "false_alarms": c["fp"],
            "recall": _ratio(c["tp"], dw), "false_alarm_rate": _ratio(c["fp"], dr)}


def _unknown(c: Counter) -> dict[str, Any]:
    """The labelled answers the checks could not decide here (wrong, right, and why: the report
    status and, for ``skipped``, its reason)."""
    return {"wrong": c["unknown:wrong"], "right": c["unknown:right"],
            "why": dict(sorted(((k[4:], m) for k, m in c.items() if k.startswith("why:")), key=lambda kv: -kv[1]))}


def _group(c: Counter) -> dict[str, Any]:
    # a set's or a family's numbers: all labelled answers (an undecided wrong one counts as a miss
    # there) and, separately, the checkable ones and the unknown ones
    return {"n": c["n"], "labelled": c["labelled"], "errors": c["errors"],
            **prf(c["tp"], c["fp"], c["fn"]), "tn": c["tn"],
            "false_alarm_rate": _ratio(c["fp"], c["fp"] + c["tn"]),
            "checkable": _checkable(c), "unknown": _unknown(c),
            "statuses": {o.split(":", 1)[1]: m for o, m in c.items() if o.startswith("status:")}}


def _unsearched(check: dict[str, Any]) -> bool:
    # a NOT_FOUND whose evidence names no source expected to hold the work that answered
    # (verifiers/citations: ``evidence["searched"]`` empty -- no source configured, a partial
    # library, sources down): the absence is no evidence, the status asserts nothing
    ev = check.get("evidence") or {}
    return ev.get("status") == "NOT_FOUND" and "searched" in ev and not ev["searched"]


def compute(items: list[dict[str, Any]], results: list[dict[str, Any]], *, bins: int = 10) -> dict[str, Any]:
    """All metrics of one evaluation (module doc) as a JSON-ready dict, plus ``"_misjudged"``:
    the answers and checks the checks got wrong (written to misjudged.jsonl), and ``"_results"``:
    one verdict line per item (id, set, label, status, reason, checks as [verifier, outcome,
    confidence, citation status]; written to results.jsonl, to compare runs). ``sets``: per case
    set (file) its answers, labelled answers, evaluation errors, answer-level precision / recall /
    F1 / tp / fp (false alarms) / fn / tn, false-alarm rate and report statuses; ``families``: the
    same per case family (:func:`family_of`). Each of them, and ``answers``, also splits the
    labelled answers into ``checkable`` (the report decided: ``passed`` or ``failed``; recall and
    false-alarm rate over these) and ``unknown`` (``unverified``, ``skipped``, ``error``: what
    could not be checked here, with why), because the overall recall counts an unknown wrong
    answer as a miss. Per verifier, ``answers_decided`` is its answer level over the answers it
    decided a check of (``answers["undecided"]``: it ran and decided none). A citation NOT_FOUND
    that searched no source expected to hold the work (``evidence["searched"]`` empty) asserts
    nothing: counted in ``citation_status_unsearched``, not in ``citation_status``. Ratios
    without a denominator are None (:func:`prf`)."""
    answers = {"n": len(items), "labelled": 0, "errors": 0}
    confusion: dict[str, Counter] = {"right": Counter(), "wrong": Counter(), "unlabelled": Counter()}
    check_conf: dict[str, Counter] = {"right": Counter(), "wrong": Counter(), "unlabelled": Counter()}
    ans_v: dict[str, Counter] = defaultdict(Counter)   # verifier -> tp/fp/fn/tn/n/undecided at answer level
    ans_vd: dict[str, Counter] = defaultdict(Counter)  # the same over the answers it decided a check of
    chk_v: dict[str, Counter] = defaultdict(Counter)   # verifier -> tp/fp/fn/tn at check level
    calib: dict[str, tuple[list[float], list[bool]]] = defaultdict(lambda: ([], []))
    status_n: dict[str, Counter] = defaultdict(Counter)  # citation status -> valid / hallucinated / outcome:x
    lat: list[float] = []
    wall: list[float] = []
    per_ver_ms: dict[str, list[float]] = defaultdict(list)
    costs: dict[str, list[float]] = defaultdict(list)
    misjudged: list[dict[str, Any]] = []
    af = Counter()
    per_set: dict[str, Counter] = defaultdict(Counter)     # set -> n/labelled/errors/tp/fp/fn/tn/status:x/...
    per_family: dict[str, Counter] = defaultdict(Counter)  # family -> the same counts
    overall = Counter()
    unsearched = Counter()  # NOT_FOUND citation checks that searched no source expected to hold the work
    for it, res in zip(items, results):
        label = it.get("label")
        lab = "unlabelled" if label is None else "right" if label else "wrong"
        rep = res.get("report")
        groups = (per_set[str(it.get("set"))], per_family[family_of(it)], overall)
        if rep is None:
            answers["errors"] += 1
            confusion[lab]["eval_error"] += 1
            for g in groups:
                _tally(g, label, None, None)
            continue
        answers["labelled"] += label is not None
        status = rep.get("status", "error")
        confusion[lab][status] += 1
        reason = rep.get("reason")
        if status == "unverified" and not reason:   # which verifiers left claims undecided
            reason = ", ".join(sorted({str(c.get("verifier")) for c in rep.get("checks") or []
                                       if c.get("outcome") not in ("pass", "fail")})) + " undecided"
        for g in groups:
            _tally(g, label, status, reason)
        cost = rep.get("cost") or {}
        lat.append(float(cost.get("ms") or 0.0))
        wall.append(float(res.get("wall_ms") or 0.0))
        for k in ("tokens", "verifier_calls", "searches", "upstream_calls"):
            costs[k].append(float(cost.get(k) or 0))
        for v, ms in ((rep.get("extra") or {}).get("durations_ms") or {}).items():
            per_ver_ms[v].append(float(ms))
        checks = rep.get("checks") or []
        if label is not None:
            flagged = status == "failed"
            af["tp"] += flagged and not label
            af["fp"] += flagged and label
            af["fn"] += (not flagged) and not label
            af["tn"] += (not flagged) and label
            af["passed_wrong"] += status == "passed" and not label
        by_v: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for c in checks:
            by_v[c.get("verifier", "?")].append(c)
        decisive = sum(c.get("outcome") in ("pass", "fail") for c in checks)
        wrong_checks = []
        for v, cs in by_v.items():
            if label is not None:
                f = any(c.get("outcome") == "fail" for c in cs)
                cell = "tp" if f and not label else "fp" if f else "fn" if not label else "tn"
                ans_v[v]["n"] += 1
                ans_v[v][cell] += 1
                if any(c.get("outcome") in ("pass", "fail") for c in cs):
                    ans_vd[v]["n"] += 1
                    ans_vd[v][cell] += 1
                else:   # it ran on the answer and decided nothing: unknown, not a verdict
                    ans_v[v]["undecided"] += 1
            for c in cs:
                cl = check_label(it, c, decisive)
                out = c.get("outcome")
                check_conf["unlabelled" if cl is None else "right" if cl else "wrong"][out] += 1
                st = (c.get("evidence") or {}).get("status") if v == "citations" else None
                # a status is judged whatever its outcome (PARTIALLY_VERIFIED is ``unknown``): the
                # claim's label, else the answer's when the label is about its one reference
                sl = cl if cl is not None else label if it.get("single_claim") and len(cs) == 1 else None
                if st and sl is not None and _unsearched(c):
                    # "not found" where nothing that would hold the work was asked asserts nothing
                    unsearched["valid" if sl else "hallucinated"] += 1
                elif st and sl is not None:
                    status_n[st]["valid" if sl else "hallucinated"] += 1
                    status_n[st][f"outcome:{out}"] += 1
                if cl is None or out not in ("pass", "fail"):
                    continue
                failed = out == "fail"
                chk_v[v]["tp" if failed and not cl else "fp" if failed else "fn" if not cl else "tn"] += 1
                right = failed != cl
                calib[v][0].append(float(c.get("confidence", 1.0)))
                calib[v][1].append(right)
                if not right:
                    wrong_checks.append(c)
        kind = None
        if label is True and status == "failed":
            kind = "false_alarm"
        elif label is False and status == "passed":
            kind = "passed_wrong_answer"
        elif wrong_checks:
            kind = "misjudged_check"
        if kind:
            misjudged.append({"kind": kind, "id": it.get("id"), "set": it.get("set"), "label": label,
                              "status": status, "question": it.get("question"), "answer": it.get("answer"),
                              "meta": it.get("meta"),
                              "misjudged_checks": [{k: c.get(k) for k in ("verifier", "claim", "outcome", "confidence",
                                                                         "note", "span")}
                                                   | {"citation_status": (c.get("evidence") or {}).get("status")}
                                                   for c in wrong_checks],
                              "checks": [{k: c.get(k) for k in ("verifier", "claim", "outcome", "confidence", "note")}
                                         for c in checks]})
    per_verifier = {}
    for v in sorted(set(ans_v) | set(chk_v) | set(calib)):
        a, ad, c = ans_v[v], ans_vd[v], chk_v[v]
        conf, right = calib[v]
        per_verifier[v] = {
            "answers": {"n": a["n"], "tn": a["tn"], **prf(a["tp"], a["fp"], a["fn"]), "undecided": a["undecided"]},
            "answers_decided": {"n": ad["n"], "tn": ad["tn"], **prf(ad["tp"], ad["fp"], ad["fn"]),
                                "false_alarm_rate": _ratio(ad["fp"], ad["fp"] + ad["tn"])},
            "checks": {"n": sum(c.values()), "tn": c["tn"], **prf(c["tp"], c["fp"], c["fn"])},
            "calibration": {"decisive_labelled_checks": len(conf), "ece": ece(conf, right, bins),
                            "accuracy": sum(right) / len(right) if right else None,
                            "mean_confidence": sum(conf) / len(conf) if conf else None,
                            "bins": reliability_bins(conf, right, bins)},
        }
    valid_total = sum(s["valid"] for s in status_n.values())
    hall_total = sum(s["hallucinated"] for s in status_n.values())
    cit = {}
    for st in sorted(status_n, key=lambda s: list(CITATION_CLASS).index(s) if s in CITATION_CLASS else 99):
        s = status_n[st]
        n = s["valid"] + s["hallucinated"]
        cls = CITATION_CLASS.get(st)
        k = s["valid"] if cls else s["hallucinated"]
        total = valid_total if cls else hall_total
        lo, hi = wilson(k, n)
        cit[st] = {"n": n, "valid": s["valid"], "hallucinated": s["hallucinated"],
                   "asserts": "VALID" if cls else "HALLUCINATED",
                   "outcomes": {o.split(":", 1)[1]: m for o, m in s.items() if o.startswith("outcome:")},
                   **prf(k, n - k, total - k), "laplace": laplace(k, n), "wilson95": [lo, hi]}
    metrics = {
        "bins": bins,
        "binning": f"{bins} equal-width bins of (0, 1], right-closed ((m-1)/M, m/M]",
        "answers": {**answers, **prf(af["tp"], af["fp"], af["fn"]), "tn": af["tn"],
                    "passed_wrong_answers": af["passed_wrong"],
                    "false_alarm_rate": af["fp"] / (af["fp"] + af["tn"]) if af["fp"] + af["tn"] else None,
                    "checkable": _checkable(overall), "unknown": _unknown(overall)},
        "families": {k: _group(c) for k, c in sorted(per_family.items(), key=lambda kv: _family_order(kv[0]))},
        "confusion": {k: dict(v) for k, v in confusion.items() if v},
        "check_confusion": {k: dict(v) for k, v in check_conf.items() if v},
        "per_verifier": per_verifier,
        "citation_status": cit,
        "citation_status_unsearched": {"n": unsearched["valid"] + unsearched["hallucinated"], **unsearched},
        "latency_ms": {"answer": percentiles(lat), "wall": percentiles(wall), **{f"verifier:{v}": percentiles(x) for v, x in per_ver_ms.items()}},
        "cost": {k: percentiles(v) | {"total": sum(v)} for k, v in costs.items() if v},
        "sets": {k: _group(c) for k, c in per_set.items()},
    }
    out = _round(metrics)
    out["_misjudged"] = misjudged
    out["_results"] = [{"id": it.get("id"), "set": it.get("set"), "label": it.get("label"),
                        "status": (res.get("report") or {}).get("status"),
                        "reason": (res.get("report") or {}).get("reason"), "error": res.get("error"),
                        "checks": [[c.get("verifier"), c.get("outcome"), c.get("confidence"),
                                    (c.get("evidence") or {}).get("status")]
                                   for c in (res.get("report") or {}).get("checks") or []]}
                       for it, res in zip(items, results)]
    return out


# ------------------------------------------------------------------------------ output


def _plot(verifier: str, cal: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = cal["bins"]
    fig, ax = plt.subplots(figsize=(4.6, 4.6), dpi=100)
    w = bins[0]["hi"] - bins[0]["lo"]
    xs = [b["lo"] + w / 2 for b in bins if b["n"]]
    ax.bar(xs, [b["accuracy"] for b in bins if b["n"]], width=w * 0.95, color="#3b7dd8", edgecolor="#1d3f6e",
           label="share right")
    ax.bar(xs, [b["confidence"] - b["accuracy"] for b in bins if b["n"]], bottom=[b["accuracy"] for b in bins if b["n"]],
           width=w * 0.95, color="#e8a0a0", alpha=0.6, label="gap to confidence")
    for x, b in zip(xs, [b for b in bins if b["n"]]):
        ax.text(x, min(1.0, max(b["accuracy"], b["confidence"])) + 0.02, f"n={b['n']}", ha="center", fontsize=7)
    ax.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("share of decisive checks that were right")
    e = cal["ece"]
    ax.set_title(f"{verifier}: ECE {e:.3f}" if e is not None else f"{verifier}: no labelled check", fontsize=10)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _pct(x: Any) -> str:
    # a ratio without a denominator (nothing flagged, nothing wrong) is "n/a", never "0.0%"
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _f3(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


#: provenance fields shown first in report.html, in this order (the rest follow as they come)
_PROVENANCE_ORDER = ("data", "policy", "citations_index", "limit", "model", "gateway", "version", "verifiers",
                     "risk_threshold", "styles", "answer_timeout_s", "started", "seconds", "skipped")


def _table(head: list[str], rows: list[list[Any]]) -> str:
    e = html.escape
    return ("<table><tr>" + "".join(f"<th>{e(str(h))}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows) + "</table>")


def _provenance_html(prov: dict[str, Any]) -> list[str]:
    keys = [k for k in _PROVENANCE_ORDER if k in prov] + [k for k in prov if k not in _PROVENANCE_ORDER
                                                          and k != "not_checked"]

    def show(k: str, v: Any) -> str:
        if v is None or v == "" or v == {}:
            return {"citations_index": "none (network sources, see below)", "limit": "none (every record)",
                    "model": "none (deterministic tiers only)", "gateway": "none (in-process)"}.get(k, "-")
        return v if isinstance(v, str) else json.dumps(v)

    out = ["<h2>Provenance</h2>", _table(["", "value"], [[k, show(k, prov.get(k))] for k in keys])]
    notes = prov.get("not_checked") or []
    out.append("<h2>What could not be checked here</h2>")
    if notes:
        out.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    else:
        out.append("<p>Nothing: every enabled verifier had what it needs (sources, model) for this run.</p>")
    return out


def _why(u: dict[str, Any], top: int = 3) -> str:
    items = list(u["why"].items())
    more = sum(n for _, n in items[top:])
    return ", ".join(f"{k} {n}" for k, n in items[:top]) + (f", other {more}" if more else "")


def summary_lines(metrics: dict[str, Any]) -> list[str]:
    """One plain line per case family and one for all answers: what was checkable here, recall
    and false-alarm rate over those, how many were unknown and why (the same numbers as
    ``metrics["families"]`` and ``metrics["answers"]``), e.g.::

        math: 280 labelled; checkable here 236 (wrong 140, right 96): recall 11.4% (16 caught),
        false alarms 0.0% (0); unknown 44 (wrong 40, right 4): unverified 20, skipped: ... 20"""
    def line(name: str, g: dict[str, Any]) -> str:
        ch, u = g["checkable"], g["unknown"]
        head = (f"{name}: {g['labelled']} labelled; checkable here {ch['wrong'] + ch['right']} (wrong {ch['wrong']}, "
                f"right {ch['right']}): recall {_pct(ch['recall'])} ({ch['caught']} caught), false alarms "
                f"{_pct(ch['false_alarm_rate'])} ({ch['false_alarms']})")
        nu = u["wrong"] + u["right"]
        return head + (f"; unknown {nu} (wrong {u['wrong']}, right {u['right']}): {_why(u)}" if nu else "; unknown 0")
    a = metrics["answers"]
    overall = {"labelled": a["labelled"], "checkable": a["checkable"], "unknown": a["unknown"]}
    return [line(k, g) for k, g in (metrics.get("families") or {}).items()] + [
        line("all", overall) + f" (recall over every labelled answer, unknown counted as missed: {_pct(a['recall'])})"]


def _families_html(m: dict[str, Any]) -> list[str]:
    fams = m.get("families") or {}
    if not fams:
        return []
    a = m["answers"]
    rows = []
    for k, g in list(fams.items()) + [("all", {**a, "labelled": a["labelled"]})]:
        ch, u = g["checkable"], g["unknown"]
        rows.append([k, g["labelled"], ch["wrong"], ch["right"], ch["caught"], _pct(ch["recall"]), ch["false_alarms"],
                     _pct(ch["false_alarm_rate"]), u["wrong"], u["right"], _why(u, 4) or "-", _pct(g["recall"])])
    return ["<h2>Per family: what could be checked here</h2>",
            "<p><b>checkable</b>: labelled answers the checks reached a verdict on here (report <code>passed</code> "
            "or <code>failed</code>); recall and false-alarm rate are over these. <b>unknown</b>: labelled answers "
            "they could not decide here (<code>unverified</code>: checks ran, not every claim decided -- no verifier "
            "model, no source; <code>skipped</code>: nothing checkable, or risk below the threshold; "
            "<code>error</code>), with why. The last column is the recall over every labelled answer, an unknown "
            "wrong answer counted as a miss.</p>",
            _table(["family", "labelled", "checkable wrong", "checkable right", "caught", "recall (checkable)",
                    "false alarms", "false-alarm rate (checkable)", "unknown wrong", "unknown right", "why unknown",
                    "recall (all labelled)"], rows)]


def _sets_html(sets: dict[str, Any]) -> list[str]:
    if not sets:
        return []
    cols = sorted({s for d in sets.values() for s in d.get("statuses", {})},
                  key=lambda s: STATUSES_ORDER.index(s) if s in STATUSES_ORDER else 99)
    rows = [[k, d["n"], d["labelled"], d["errors"], d["tp"], d["fp"], d["fn"], d["tn"], _pct(d["precision"]),
             _pct(d["recall"]), _f3(d["f1"]), _pct(d["false_alarm_rate"]), d["checkable"]["wrong"],
             d["checkable"]["right"], _pct(d["checkable"]["recall"]), _pct(d["checkable"]["false_alarm_rate"]),
             d["unknown"]["wrong"], d["unknown"]["right"]] + [d["statuses"].get(c, 0) for c in cols]
            for k, d in sets.items()]
    return ["<h2>Per set</h2>",
            "<p>One row per case file; tp = wrong answers <code>failed</code>, fp = right answers <code>failed</code> "
            "(false alarms), fn = wrong answers not failed (an unknown one included), tn = right answers not failed; "
            "then the checkable and unknown answers as in the per-family table; n/a: no denominator.</p>",
            _table(["set", "answers", "labelled", "errors", "tp", "fp", "fn", "tn", "precision", "recall", "F1",
                    "false-alarm rate", "checkable wrong", "checkable right", "recall (checkable)",
                    "false-alarm rate (checkable)", "unknown wrong", "unknown right"] + cols, rows)]


def _html(m: dict[str, Any], pngs: dict[str, bytes], title: str, n_misjudged: int) -> str:
    a = m["answers"]
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>{a['n']} answers ({a['labelled']} labelled, {a['errors']} evaluation errors). Positive class: a wrong "
             "answer or claim; a flag is a <code>fail</code>. Calibration: " + html.escape(m["binning"])
             + "; ECE as in Naeini et al. 2015 and Guo et al. 2017 (eq. 3). n/a: a ratio with no denominator "
             "(precision with nothing flagged, recall with nothing wrong).</p>",
             *_provenance_html(m.get("provenance") or {}),
             *_families_html(m),
             "<h2>Answers</h2>",
             _table(["precision", "recall", "F1", "tp", "fp", "fn", "tn", "false-alarm rate", "passed wrong answers"],
                    [[_pct(a["precision"]), _pct(a["recall"]), _f3(a["f1"]), a["tp"], a["fp"], a["fn"], a["tn"],
                      _pct(a["false_alarm_rate"]), a["passed_wrong_answers"]]]),
             *_sets_html(m.get("sets") or {}),
             "<h3>Confusion: label x report status</h3>"]
    cols = sorted({s for row in m["confusion"].values() for s in row},
                  key=lambda s: STATUSES_ORDER.index(s) if s in STATUSES_ORDER else 99)
    parts.append(_table(["label"] + cols, [[k] + [v.get(c, 0) for c in cols] for k, v in m["confusion"].items()]))
    ocols = sorted({s for row in m["check_confusion"].values() for s in row})
    parts += ["<h3>Confusion: check label x outcome</h3>",
              _table(["claim label"] + ocols, [[k] + [v.get(c, 0) for c in ocols] for k, v in m["check_confusion"].items()]),
              "<h2>Per verifier</h2>"]
    rows = []
    for v, d in m["per_verifier"].items():
        an, ad, ch, ca = d["answers"], d.get("answers_decided") or {}, d["checks"], d["calibration"]
        rows.append([v, an["n"], _pct(an["precision"]), _pct(an["recall"]), _f3(an["f1"]), an.get("undecided", 0),
                     ad.get("n", 0), _pct(ad.get("recall")), _pct(ad.get("false_alarm_rate")), ch["n"],
                     _pct(ch["precision"]), _pct(ch["recall"]), _f3(ch["f1"]), ca["decisive_labelled_checks"],
                     _f3(ca["ece"])])
    parts.append("<p>Answers: the labelled answers a verifier ran on (one of its checks failed = a flag); "
                 "undecided: those where it decided none of its checks (all <code>unknown</code>), which the "
                 "first R counts as misses; decided: the others, with recall and false-alarm rate over them.</p>")
    parts.append(_table(["verifier", "answers", "P", "R", "F1", "undecided", "decided", "R (decided)",
                         "false-alarm rate (decided)", "labelled checks", "P", "R", "F1", "decisive checks", "ECE"],
                        rows))
    uns = m.get("citation_status_unsearched") or {}
    if m["citation_status"] or uns.get("n"):
        parts.append("<h2>Per citation status</h2>")
    if uns.get("n"):
        parts.append(f"<p>{uns['n']} NOT_FOUND checks searched no source expected to hold the work (none configured "
                     "or reachable, or a partial library): the absence is no evidence, so they are left out of this "
                     f"table ({uns.get('valid', 0)} VALID, {uns.get('hallucinated', 0)} HALLUCINATED).</p>")
    if m["citation_status"]:
        parts += [_table(
            ["status", "asserts", "n", "VALID", "HALLUCINATED", "precision", "recall", "F1", "Laplace", "Wilson 95%",
             "outcomes"],
            [[s, d["asserts"], d["n"], d["valid"], d["hallucinated"], _pct(d["precision"]), _pct(d["recall"]),
              _f3(d["f1"]), f"{d['laplace']:.4f}", f"{d['wilson95'][0]:.3f}-{d['wilson95'][1]:.3f}",
              ", ".join(f"{k} {n}" for k, n in sorted(d["outcomes"].items()))] for s, d in m["citation_status"].items()])]
    parts.append("<h2>Calibration (reliability diagrams)</h2>")
    for v, d in m["per_verifier"].items():
        if v in pngs:
            b64 = base64.b64encode(pngs[v]).decode("ascii")
            parts.append(f'<figure><img alt="reliability diagram of {html.escape(v)}" '
                         f'src="data:image/png;base64,{b64}"><figcaption>{html.escape(v)}</figcaption></figure>')
        parts.append(_table(["bin", "n", "mean confidence", "share right"],
                            [[f"({b['lo']:.1f}, {b['hi']:.1f}]", b["n"], _f3(b["confidence"]),
                              _pct(b["accuracy"])] for b in d["calibration"]["bins"] if b["n"]]))
    parts.append("<h2>Cost and latency</h2>")
    lrows = [[k, d["n"], f"{d['p50']:.2f}", f"{d['p90']:.2f}", f"{d['p95']:.2f}", f"{d['p99']:.2f}", f"{d['max']:.2f}"]
             for k, d in m["latency_ms"].items() if d]
    parts.append(_table(["ms", "n", "p50", "p90", "p95", "p99", "max"], lrows))
    crows = [[k, f"{d['total']:.0f}", f"{d['p50']:.1f}", f"{d['p95']:.1f}", f"{d['max']:.1f}"] for k, d in m["cost"].items()]
    parts.append(_table(["extra per answer", "total", "p50", "p95", "max"], crows))
    parts.append(f"<p>{n_misjudged} misjudged answers are listed in <code>misjudged.jsonl</code>.</p>")
    style = ("body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em}table{border-collapse:collapse;"
             "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
             "figure{display:inline-block;margin:.5em}")
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>" + "\n".join(parts) + "</body></html>\n")


def write(metrics: dict[str, Any], out_dir: str | Path, *, title: str = "veracity eval",
          provenance: dict[str, Any] | None = None) -> dict[str, Path]:
    """Write ``metrics.json``, ``misjudged.jsonl``, ``results.jsonl``, ``reliability-<verifier>.png`` per verifier
    with decisive labelled checks, and ``report.html`` (self-contained: PNGs inlined as base64
    data URIs, no external reference; the ``provenance`` -- data, policy, index, limit, model,
    version ... -- and its ``not_checked`` notices (:func:`preflight`) first, then the answers,
    the per-set table and the rest). Returns name -> path."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    m = {k: v for k, v in metrics.items() if not k.startswith("_")}
    if provenance:
        m["provenance"] = provenance
    files: dict[str, Path] = {}
    (d / "metrics.json").write_text(json.dumps(m, indent=2, sort_keys=False) + "\n")
    files["metrics.json"] = d / "metrics.json"
    mis = metrics.get("_misjudged") or []
    with (d / "misjudged.jsonl").open("w", encoding="utf-8") as fh:
        for r in mis:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    files["misjudged.jsonl"] = d / "misjudged.jsonl"
    with (d / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in metrics.get("_results") or []:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    files["results.jsonl"] = d / "results.jsonl"
    pngs = {}
    for v, dv in m["per_verifier"].items():
        if dv["calibration"]["decisive_labelled_checks"]:
            pngs[v] = _plot(v, dv["calibration"])
            name = f"reliability-{v}.png"
            (d / name).write_bytes(pngs[v])
            files[name] = d / name
    (d / "report.html").write_text(_html(m, pngs, title, len(mis)), encoding="utf-8")
    files["report.html"] = d / "report.html"
    return files
