"""Running ``veracity eval`` (:mod:`proxy.cli.evaluation`): every labelled answer verified,
in-process through the pipeline or through a running gateway's ``POST /v1/veracity/verify``,
with a per-answer timeout, and the progress line or bar on stderr.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any


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
