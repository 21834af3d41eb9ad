"""A real model server nobody here wrote as the upstream (docs/testing.md): llama-cpp-python's
OpenAI-compatible server with Gemma 3 270M (a base model; ``deploy/ci/llama-server.sh`` builds,
installs and starts it, ``.ci/run`` exports ``VERACITY_TEST_LLAMA_URL``). The gateway in front of
it is driven with the ``openai`` SDK, stream and not: its wire format passes through (ids, model,
usage, finish_reason, chunks that parse), and the report flags the arithmetic the model really got
wrong. Expected verdicts are computed here, independently of the verifier, from what the model
said in this run (its sampling is not bit-for-bit repeatable across server states, so no text is
hard-coded). Marked ``llama``: skipped without the server, never under ``VERACITY_CI=1``."""

from __future__ import annotations

import os
import re
from fractions import Fraction

import httpx
import openai
import pytest
import yaml

pytestmark = pytest.mark.llama

LLAMA_URL = os.environ.get("VERACITY_TEST_LLAMA_URL")
MODEL = "gemma-3-270m"
#: prompts the 270M base model answers with a wrong equation at temperature 0 (probed on this
#: build: 17 * 23 -> 490, 48 + 75 -> 103, 7 * 8 -> 42), and one it usually gets right (12 * 12)
PROMPTS = ["What is 17 * 23?", "What is 48 + 75?", "What is 7 * 8?", "What is 12 * 12?"]
#: the answer's first line only: the base model repeats itself after a blank line
PARAMS = {"temperature": 0, "seed": 42, "max_tokens": 24, "stop": ["\n\n", "###"]}
_EQ = re.compile(r"(\d+)\s*([-+*/x×])\s*(\d+)\s*=\s*(\d+(?:\.\d+)?)")
_ID = re.compile(r"chatcmpl-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # llama-cpp-python's ids


def equations(text: str) -> list[tuple[tuple[int, int], bool]]:
    """``a op b = c`` in ``text``: (span, right?) with exact rational arithmetic."""
    out = []
    for m in _EQ.finditer(text):
        a, op, b, c = int(m[1]), m[2], int(m[3]), Fraction(m[4])
        val = {"+": a + b, "-": a - b, "*": a * b, "x": a * b, "×": a * b}.get(op)
        if op == "/":
            val = Fraction(a, b) if b else None
        out.append((m.span(), val is not None and Fraction(val) == c))
    return out


@pytest.fixture(scope="module")
def llama():
    if not LLAMA_URL:
        pytest.skip("no llama-cpp-python server (VERACITY_TEST_LLAMA_URL; deploy/ci/llama-server.sh start)")
    try:
        httpx.get(LLAMA_URL + "/models", timeout=120, trust_env=False).raise_for_status()  # busy: one request at a time
    except httpx.HTTPError as exc:
        pytest.skip(f"llama server at {LLAMA_URL} not answering: {exc}")
    return openai.OpenAI(base_url=LLAMA_URL, api_key="sk-none", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def gw(llama, gateway_factory, tmp_path_factory):
    pdir = tmp_path_factory.mktemp("llama-policies")
    # the model's first draft is what the report speaks of: annotate, no correction round
    policy = {"name": "default", "on_failure": "annotate", "risk": {"threshold": 0.0}, "correction": {"max_rounds": 0},
              "verifiers": {"arithmetic": {"enabled": True}, "code": {"enabled": False},
                            "citations": {"enabled": False}, "planner": {"enabled": False}},
              "streaming": {"mode": "passthrough", "keepalive_s": 5}, "overridable": ["streaming.mode"]}
    (pdir / "default.yaml").write_text(yaml.safe_dump(policy))
    cfg = {"upstreams": [{"name": "llama", "base_url": LLAMA_URL, "models": ["*"]}],
           "policies": {"dir": str(pdir), "check_interval_s": 0}}
    g = gateway_factory(cfg)
    return openai.OpenAI(base_url=g.base_url, api_key="sk-none", max_retries=0, timeout=180)


def assert_report_matches(text: str, report: dict) -> int:
    """Every wrong equation the model wrote is a failed arithmetic check at its place, no right
    one is failed, and the status follows. Returns the number of wrong equations."""
    checks = [c for c in report["checks"] if c["verifier"] == "arithmetic"]
    print(f"model said {text!r}: {report['status']}, " + "; ".join(f"{c['claim']!r} {c['outcome']}" for c in checks))
    wrong = 0
    for (a, b), right in equations(text):
        at = [c for c in checks if c.get("span") and c["span"][0] < b and a < c["span"][1]]
        if right:
            assert all(c["outcome"] != "fail" for c in at), (text, at)
        else:
            wrong += 1
            assert any(c["outcome"] == "fail" for c in at), (text, report)
    if wrong:
        assert report["status"] == "failed", (text, report)
    else:
        assert report["status"] != "failed", (text, report)
    return wrong


def test_non_stream_wire_format_and_the_report(llama, gw):
    wrong = 0
    for q in PROMPTS:
        msgs = [{"role": "user", "content": q}]
        direct = llama.chat.completions.create(model=MODEL, messages=msgs, **PARAMS)
        resp = gw.chat.completions.create(model=MODEL, messages=msgs, **PARAMS)
        # the upstream's own fields, untouched
        assert _ID.fullmatch(resp.id) and resp.object == "chat.completion" and resp.model == direct.model == MODEL
        assert resp.choices[0].finish_reason in ("stop", "length") and resp.choices[0].message.role == "assistant"
        u = resp.usage
        assert u.prompt_tokens == direct.usage.prompt_tokens > 0  # same prompt, same tokenizer
        assert u.completion_tokens > 0 and u.total_tokens == u.prompt_tokens + u.completion_tokens
        text = resp.choices[0].message.content
        assert text
        wrong += assert_report_matches(text, resp.model_extra["veracity"])
    assert wrong >= 1, "the prompts no longer make this model write a wrong equation: pick others"


@pytest.mark.parametrize("mode", ["passthrough", "buffer"])
def test_stream_wire_format_and_the_report(llama, gw, mode):
    wrong = 0
    for q in PROMPTS[:3]:
        stream = gw.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": q}], stream=True,
                                            extra_body={"veracity": {"streaming": {"mode": mode}}}, **PARAMS)
        ids, text, finish, reports, n = set(), "", None, [], 0
        for chunk in stream:  # the SDK parses every SSE event; a malformed one raises here
            n += 1
            if (chunk.model_extra or {}).get("veracity"):
                reports.append(chunk.model_extra["veracity"])
            if not chunk.choices:
                continue
            ids.add(chunk.id)
            assert chunk.object == "chat.completion.chunk" and chunk.model == MODEL
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        assert len(ids) == 1 and _ID.fullmatch(ids.pop()), "one id, the upstream's, on every chunk"
        assert n >= 3 and text and finish in ("stop", "length")
        assert len(reports) == 1, "the report arrives once, in the last chunk"
        wrong += assert_report_matches(text, reports[0])
    assert wrong >= 1


def test_eval_binds_the_verifier_model_to_the_real_server(llama, tmp_path):
    """``veracity eval --model URL``: the policy's model-driven step (an AMTFV plan, ``when:
    always``) goes to the real server; whatever the base model writes, the run counts its calls
    and tokens and ends with a report per answer (a plan it cannot parse is ``error``/``unknown``,
    never a pass)."""
    import json

    from proxy.cli.main import main

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"question": "What is 17 * 23?", "answer": "17 * 23 = 490.", "label": False,
                                "single_claim": True}) + "\n")
    pol = tmp_path / "plan.yaml"
    pol.write_text(yaml.safe_dump({"name": "plan", "risk": {"threshold": 0.0}, "on_failure": "annotate",
                                   "verifiers": {"arithmetic": {"enabled": True}, "code": {"enabled": False},
                                                 "citations": {"enabled": False},
                                                 "planner": {"enabled": True, "templates": False, "when": "always",
                                                             "timeout_ms": 120000}},
                                   "verification": {"max_tokens": 96},
                                   "budgets": {"request": {"extra_calls": 4, "extra_tokens": 20000,
                                                           "deadline_ms": 120000}}}))
    out = tmp_path / "out"
    assert main(["eval", str(data), "--policy", str(pol), "--model", LLAMA_URL, "--model-name", MODEL,
                 "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["answers"]["errors"] == 0 and m["cost"]["verifier_calls"]["total"] >= 1
    assert m["cost"]["tokens"]["total"] > 0
    assert m["per_verifier"]["arithmetic"]["checks"]["tp"] == 1   # 17 * 23 = 391: the rule still fails it
    assert m["provenance"]["model"] == f"{MODEL} at {LLAMA_URL}"
