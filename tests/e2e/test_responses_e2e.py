"""End to end: the ``openai`` SDK's Responses API and the OpenAI Agents SDK -> Veracity
(``veracity serve`` subprocess) -> the scripted mock upstream, in both upstream modes.

One gateway serves two upstreams that are the same mock: ``gpt-native`` goes to the mock's
``/v1/responses`` (``responses: native``, the default), ``gpt-tr`` to its chat completions
(``responses: translated``). The mock answers both APIs from one script, so every test runs
the same conversation in both modes. Right values are computed here independently.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
import yaml
from pydantic import BaseModel

from proxy.upstreams.mock import MockUpstream

MODES = ["gpt-native", "gpt-tr"]
RIGHT = f"{5000 * 1.06 ** 4:,.2f}"             # "6,312.38"
WRONG = "6,200.00"
EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()


def question(tag: str) -> str:
    return f"[case:{tag}] I invest $5,000 at 6% interest compounded annually. What is the total after 4 years?"


def answer(value: str) -> str:
    return f"With annual compounding the total is 5000 * 1.06^4 = ${value}."


WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather of a city", "strict": False,
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = [
        {"name": "compound-fix", "match": {"any_message": r"\[case:compound\]", "last_user": EVIDENCE},
         "reply": {"content": answer(RIGHT)}},
        {"name": "compound", "match": {"last_user": r"\[case:compound\]"}, "reply": {"content": answer(WRONG)}},
        {"name": "wrong", "match": {"any_message": r"\[case:wrong\]"}, "reply": {"content": answer(WRONG)}},
        {"name": "right", "match": {"any_message": r"\[case:right\]"}, "reply": {"content": answer(RIGHT),
                                                                               "headers": {"x-request-id": "up-right-1"}}},
        {"name": "hello", "match": {"any_message": r"\[case:hello\]"}, "reply": {"content": "Hello! How can I help?"}},
        # the app's own tool: called first, answered after the tool's output came back
        {"name": "tool-final", "match": {"any_message": r"\[case:tool\]", "last_role": "tool"},
         "reply": {"content": "It is 21 degrees and sunny in Paris."}},
        {"name": "tool", "match": {"any_message": r"\[case:tool\]", "tool": "get_weather"},
         "reply": {"content": None, "tool_calls": [{"id": "call_w1", "name": "get_weather",
                                                    "arguments": '{"city": "Paris"}'}]}},
        {"name": "parse", "match": {"any_message": r"\[case:parse\]", "schema": "Weather"},
         "reply": {"content": '{"city": "Paris", "temp_c": 21}'}},
        {"name": "ratelimit", "match": {"any_message": r"\[case:ratelimit\]"},
         "reply": {"status": 429, "error": "Slow down.", "headers": {"retry-after": "2"}}},
        {"name": "cut", "match": {"any_message": r"\[case:cut\]"},
         "reply": {"content": "A long answer that is cut half way through by the upstream.", "fault": "error_mid_stream",
                   "drop_after": 4, "stream": {"chunk_size": 4}}},
        # sentinel: the model checks itself, finds the forgotten sub-task, then completes it
        {"name": "sentinel-final", "match": {"any_message": r"\[case:sentinel\]", "last_role": "tool"},
         "reply": {"content": "The capital of France is Paris. The capital of Spain is Madrid."}},
        {"name": "sentinel-check", "match": {"last_user": r"\[case:sentinel\]", "tool": "verify_result"},
         "reply": {"content": "The capital of France is Paris.", "tool_calls": [{
             "id": "call_vr1", "name": "verify_result", "arguments": json.dumps({
                 "task_goal": "capitals of France and Spain", "actual_result": "capital of France",
                 "missing_items": ["capital of Spain"], "errors_found": [], "is_ready": False})}]}},
    ]
    return r


POLICIES = {
    "correct": {"on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 2}},
    "buffer": {"on_failure": "correct", "risk": {"threshold": 0.1}, "streaming": {"mode": "buffer", "keepalive_s": 0.05}},
    "passthrough": {"on_failure": "correct", "risk": {"threshold": 0.1}, "streaming": {"mode": "passthrough"}},
    "block": {"on_failure": "block", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 0}},
    "sentinel": {"on_failure": "correct", "risk": {"threshold": 0.1},
                 "sentinel": {"mode": "offered", "when": "multi_part", "max_rounds": 3}},
}


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("responses-e2e")
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, doc in POLICIES.items():
        doc = dict(doc, name=name)
        doc.setdefault("verifiers", {"citations": {"enabled": False}, "code": {"enabled": False}})
        doc["overridable"] = ["on_failure", "streaming.mode"]
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    mock = MockUpstream({"rules": _rules(), "models": MODES}).start()
    cfg = {"upstreams": [{"name": "native", "models": ["gpt-native"], "base_url": mock.base_url},
                         {"name": "tr", "models": ["gpt-tr"], "base_url": mock.base_url, "responses": "translated"}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"audit": str(tmp / "audit.jsonl"), "budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "mock": mock, "audit": tmp / "audit.jsonl"}
    mock.stop()


def client(env, policy: str = "correct", **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test-responses", max_retries=0, timeout=120,
                         default_headers={"x-veracity-policy": policy}, **kw)


def aclient(env, policy: str = "correct") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=env["gw"].base_url, api_key="sk-test-responses", max_retries=0, timeout=120,
                              default_headers={"x-veracity-policy": policy})


def veracity(obj: Any) -> dict[str, Any]:
    return (obj.model_extra or {})["veracity"]


def upstream_requests(env, tag: str) -> list[dict[str, Any]]:
    """The mock's recorded requests of one case (both APIs), in order."""
    out = []
    for r in env["mock"].requests():
        if tag in json.dumps(r.get("body")):
            out.append(r)
    return out


def check_sequence(events: list[Any]) -> None:
    """A valid Responses event stream: sequence numbers 0..n-1, created/in_progress first,
    completed last, every item added before its deltas and done after them."""
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    open_items: set[int] = set()
    for e in events:
        if e.type == "response.output_item.added":
            open_items.add(e.output_index)
        elif e.type in ("response.output_text.delta", "response.function_call_arguments.delta",
                        "response.content_part.added", "response.content_part.done", "response.output_text.done"):
            assert e.output_index in open_items
        elif e.type == "response.output_item.done":
            open_items.discard(e.output_index)
    assert not open_items
    assert events[0].response.id and events[-1].response.id == events[0].response.id


# ------------------------------------------------------------------------ responses.create


@pytest.mark.parametrize("model", MODES)
def test_wrong_answer_is_corrected_with_report_and_headers(env, model):
    raw = client(env).responses.with_raw_response.create(model=model, input=question("compound"))
    resp = raw.parse()
    rep = veracity(resp)
    assert rep["status"] == "corrected"
    assert RIGHT in resp.output_text and WRONG not in resp.output_text
    assert raw.headers["x-veracity-status"] == rep["status"]
    rid = raw.headers["x-request-id"]
    assert rid.startswith("req_")
    assert raw.headers["x-veracity-report-url"].endswith(rid)
    assert resp.object == "response" and resp.status == "completed"
    assert resp.output[0].type == "message" and resp.output[0].content[0].type == "output_text"
    assert resp.usage is not None and resp.usage.output_tokens > 0
    # the report endpoint has the same report
    got = httpx.get(env["gw"].url + f"/v1/veracity/reports/{rid}", headers={"authorization": "Bearer sk-test-responses"},
                    trust_env=False)
    assert got.status_code == 200 and got.json()["veracity"]["status"] == "corrected"


def test_native_correction_is_a_new_request_with_the_evidence_as_input_items(env):
    client(env).responses.create(model="gpt-native", input=question("compound") + " (native)")
    reqs = [r for r in upstream_requests(env, "(native)")]
    assert [r["path"] for r in reqs] == ["/v1/responses", "/v1/responses"]
    first, second = reqs[0]["body"], reqs[1]["body"]
    assert first["input"] == question("compound") + " (native)"       # the client's string, as sent
    items = second["input"]
    assert items[0]["role"] == "user" and items[0]["content"] == question("compound") + " (native)"
    assert items[1]["role"] == "assistant" and WRONG in items[1]["content"][0]["text"]
    assert items[2]["role"] == "user" and items[2]["content"].startswith(EVIDENCE)
    assert "previous_response_id" not in second and "stream" not in second


def test_translated_mode_sends_chat_completions(env):
    client(env).responses.create(model="gpt-tr", input=question("compound") + " (tr)", instructions="Be brief.")
    reqs = upstream_requests(env, "(tr)")
    assert [r["path"] for r in reqs] == ["/v1/chat/completions", "/v1/chat/completions"]
    assert reqs[0]["body"]["messages"] == [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": question("compound") + " (tr)"}]


@pytest.mark.parametrize("model", MODES)
def test_right_answer_passes_and_upstream_request_id_is_kept(env, model):
    raw = client(env).responses.with_raw_response.create(model=model, input=question("right"))
    resp = raw.parse()
    assert veracity(resp)["status"] == "passed" and RIGHT in resp.output_text
    assert raw.headers["x-upstream-request-id"] == "up-right-1"
    assert raw.headers["x-request-id"] != "up-right-1"


@pytest.mark.parametrize("model", MODES)
def test_low_risk_answer_is_skipped(env, model):
    resp = client(env).responses.create(model=model, input="[case:hello] hi")
    assert veracity(resp)["status"] == "skipped" and resp.output_text == "Hello! How can I help?"


@pytest.mark.parametrize("model", MODES)
def test_tool_call_is_untouched_and_agent_loop_continues(env, model):
    c = client(env)
    first = c.responses.create(model=model, input=[{"role": "user", "content": "[case:tool] weather in Paris?"}],
                               tools=[WEATHER_TOOL])
    calls = [i for i in first.output if i.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and json.loads(calls[0].arguments) == {"city": "Paris"}
    assert calls[0].call_id == "call_w1"
    assert veracity(first)["status"] == "skipped"
    second = c.responses.create(model=model, tools=[WEATHER_TOOL], input=[
        {"role": "user", "content": "[case:tool] weather in Paris?"},
        {"type": "function_call", "call_id": calls[0].call_id, "name": "get_weather", "arguments": calls[0].arguments},
        {"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temp_c": 21, "sky": "sunny"}'}])
    assert second.output_text == "It is 21 degrees and sunny in Paris."


@pytest.mark.parametrize("model", MODES)
def test_async_create(env, model):
    async def go():
        async with aclient(env) as c:
            return await c.responses.create(model=model, input=question("compound"))
    resp = asyncio.run(go())
    assert veracity(resp)["status"] == "corrected" and RIGHT in resp.output_text


@pytest.mark.parametrize("model", MODES)
def test_request_veracity_field_overrides_the_policy_and_never_goes_upstream(env, model):
    resp = client(env).responses.create(model=model, input=question("wrong") + f" (override {model})",
                                        extra_body={"veracity": {"on_failure": "annotate"}})
    rep = veracity(resp)
    assert rep["status"] == "failed" and WRONG in resp.output_text       # annotated, not corrected
    sent = upstream_requests(env, f"(override {model})")
    assert len(sent) == 1 and "veracity" not in sent[0]["body"]


@pytest.mark.parametrize("model", MODES)
def test_block_policy_is_the_chat_routes_422(env, model):
    with pytest.raises(openai.UnprocessableEntityError) as exc:
        client(env, "block").responses.create(model=model, input=question("wrong"))
    body = exc.value.body
    assert body["code"] == "verification_failed" and body["veracity"]["status"] == "failed"


@pytest.mark.parametrize("model", MODES)
def test_sentinel_is_a_responses_function_tool_and_never_relayed(env, model):
    q = "[case:sentinel] Please answer both:\n1. What is the capital of France?\n2. What is the capital of Spain?"
    resp = client(env, "sentinel").responses.create(model=model, input=q + f" ({model})")
    assert resp.output_text == "The capital of France is Paris. The capital of Spain is Madrid."
    assert all(i.type != "function_call" for i in resp.output)
    assert veracity(resp)["sentinel"]["called"] is True
    reqs = upstream_requests(env, f"({model})")
    assert len(reqs) == 2
    if model == "gpt-native":
        first, second = reqs[0]["body"], reqs[1]["body"]
        assert {"type": "function", "name": "verify_result"}.items() <= first["tools"][0].items()
        types = [i.get("type") for i in second["input"]]
        assert "function_call" in types and "function_call_output" in types
        assert second["tools"][0]["name"] == "verify_result"     # offered again: the model was not ready
    assert "verify_result" not in json.dumps([i.model_dump() for i in resp.output])
    assert all(getattr(t, "name", None) != "verify_result" for t in resp.tools)   # the echo is the client's


@pytest.mark.parametrize("model", MODES)
def test_upstream_error_is_relayed_as_openai_error(env, model):
    with pytest.raises(openai.RateLimitError) as exc:
        client(env).responses.create(model=model, input="[case:ratelimit] hi")
    assert exc.value.body["message"] == "Slow down."
    assert exc.value.response.headers["retry-after"] == "2"
    assert exc.value.response.headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize("model", MODES)
def test_upstream_failing_mid_stream_ends_with_an_error_the_sdk_raises(env, model):
    stream = client(env, "passthrough").responses.create(model=model, input="[case:cut] tell me", stream=True)
    seen = []
    with pytest.raises(openai.APIError):
        for ev in stream:
            seen.append(ev.type)
    assert seen[:2] == ["response.created", "response.in_progress"] and "response.completed" not in seen


@pytest.mark.parametrize("model", MODES)
def test_sentinel_in_a_stream_holds_its_turns(env, model):
    q = "[case:sentinel] Please answer both:\n1. What is the capital of France?\n2. What is the capital of Spain?"
    events = list(client(env, "sentinel").responses.create(model=model, input=q + f" (stream {model})", stream=True))
    check_sequence(events)
    final = events[-1].response
    assert final.output_text == "The capital of France is Paris. The capital of Spain is Madrid."
    assert not any(e.type.startswith("response.function_call_arguments") for e in events)
    assert "verify_result" not in json.dumps([e.model_dump() for e in events[:-1]])   # response.created included
    assert all(getattr(t, "name", None) != "verify_result" for t in final.tools)
    assert veracity(final)["sentinel"]["called"] is True


# ------------------------------------------------------------------------ streams


@pytest.mark.parametrize("model", MODES)
def test_stream_true_buffer_mode_streams_the_corrected_answer(env, model):
    events = list(client(env, "buffer").responses.create(model=model, input=question("compound"), stream=True))
    check_sequence(events)
    done = events[-1].response
    assert veracity(done)["status"] == "corrected"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == done.output_text and RIGHT in text
    # the item ids of the events are those of the final response
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.item.id for e in added] == [i.id for i in done.output]
    assert done.usage is not None


@pytest.mark.parametrize("model", MODES)
def test_stream_passthrough_flags_a_wrong_answer(env, model):
    events = list(client(env, "passthrough").responses.create(model=model, input=question("wrong"), stream=True))
    check_sequence(events)
    assert veracity(events[-1].response)["status"] == "failed"
    assert WRONG in events[-1].response.output_text


@pytest.mark.parametrize("model", MODES)
def test_stream_helper_with_a_function_tool(env, model):
    with client(env).responses.stream(model=model, input="[case:tool] weather in Paris?", tools=[WEATHER_TOOL]) as s:
        events = list(s)
        final = s.get_final_response()
    check_sequence(events)
    assert [e.type for e in events if "function_call_arguments" in e.type][-1] == \
        "response.function_call_arguments.done"
    call = final.output[0]
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Paris"}
    assert veracity(final)["status"] == "skipped"


@pytest.mark.parametrize("model", MODES)
def test_stream_helper_text_and_final_response(env, model):
    with client(env, "buffer").responses.stream(model=model, input=question("compound")) as s:
        text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
        final = s.get_final_response()
    assert text == final.output_text and RIGHT in text
    assert veracity(final)["status"] == "corrected"


class Weather(BaseModel):
    city: str
    temp_c: int


@pytest.mark.parametrize("model", MODES)
def test_parse_structured_output(env, model):
    resp = client(env).responses.parse(model=model, input="[case:parse] weather in Paris as JSON", text_format=Weather)
    assert resp.output_parsed == Weather(city="Paris", temp_c=21)
    assert "veracity" in (resp.model_extra or {})


# ------------------------------------------------------------------------ wire contract


def test_native_forwards_client_fields_and_builtin_tools_unchanged(env):
    body = {"model": "gpt-native", "input": [{"role": "user", "content": [{"type": "input_text", "text": "[case:hello] fwd"},
                                                                         {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}]}],
            "tools": [{"type": "web_search_preview", "search_context_size": "low"}, WEATHER_TOOL],
            "tool_choice": "auto", "metadata": {"team": "a"}, "store": False, "include": ["reasoning.encrypted_content"],
            "reasoning": {"effort": "low"}, "text": {"verbosity": "low", "format": {"type": "text"}},
            "x_vendor_field": {"nested": [1, 2.5, None]}, "temperature": 0.2, "truncation": "auto"}
    r = httpx.post(env["gw"].base_url + "/responses", json=body, headers={"authorization": "Bearer sk-test-responses"},
                   trust_env=False, timeout=60)
    assert r.status_code == 200, r.text
    sent = next(x for x in env["mock"].requests() if x["path"] == "/v1/responses" and "fwd" in json.dumps(x["body"]))
    assert sent["body"] == body
    assert r.json()["veracity"]["status"] == "skipped"


def test_translated_forwards_what_chat_can_carry(env):
    body = {"model": "gpt-tr", "input": "[case:hello] fwd-tr", "tools": [{"type": "web_search_preview"}, WEATHER_TOOL],
            "tool_choice": {"type": "function", "name": "get_weather"}, "max_output_tokens": 50, "temperature": 0.2,
            "metadata": {"team": "a"}, "text": {"format": {"type": "json_schema", "name": "X", "schema": {"type": "object"}, "strict": True}}}
    r = httpx.post(env["gw"].base_url + "/responses", json=body, headers={"authorization": "Bearer sk-test-responses"},
                   trust_env=False, timeout=60)
    assert r.status_code == 200, r.text
    sent = next(x for x in env["mock"].requests() if x["path"] == "/v1/chat/completions" and "fwd-tr" in json.dumps(x["body"]))
    chat = sent["body"]
    assert chat["tools"] == [{"type": "function", "function": {k: WEATHER_TOOL[k] for k in ("name", "description", "parameters", "strict")}}]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert chat["max_tokens"] == 50 and chat["temperature"] == 0.2 and chat["metadata"] == {"team": "a"}
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "X", "schema": {"type": "object"}, "strict": True}}
    out = r.json()
    assert out["object"] == "response" and out["tools"] == body["tools"] and out["max_output_tokens"] == 50


@pytest.mark.parametrize("body,param", [
    ({"model": "gpt-native", "input": 42}, "input"),
    ({"model": "gpt-native", "input": ["not an item"]}, "input[0]"),
    ({"model": "gpt-native"}, "input"),
    ({"input": "hi"}, "model"),
    ({"model": "gpt-tr", "input": "hi", "tools": "web"}, "tools"),
    ({"model": "gpt-tr", "input": "hi", "stream": "yes"}, "stream"),
])
def test_bad_input_is_openais_error_json(env, body, param):
    r = httpx.post(env["gw"].base_url + "/responses", json=body, headers={"authorization": "Bearer sk-test-responses"},
                   trust_env=False, timeout=30)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param and err["message"]
    assert set(err) == {"message", "type", "param", "code"}
    assert r.headers["x-request-id"].startswith("req_")


def test_previous_response_id_forwarded_native_refused_translated(env):
    body = {"model": "gpt-native", "input": "[case:hello] again", "previous_response_id": "resp_earlier"}
    r = httpx.post(env["gw"].base_url + "/responses", json=body, headers={"authorization": "Bearer sk-test-responses"},
                   trust_env=False, timeout=60)
    assert r.status_code == 200
    sent = [x for x in env["mock"].requests() if x["path"] == "/v1/responses" and "again" in json.dumps(x["body"])]
    assert sent[-1]["body"]["previous_response_id"] == "resp_earlier"
    r = httpx.post(env["gw"].base_url + "/responses", json=dict(body, model="gpt-tr"), trust_env=False, timeout=60,
                   headers={"authorization": "Bearer sk-test-responses"})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "previous_response_id"
    assert r.json()["error"]["code"] == "unsupported_parameter"


def test_azure_openai_v1_path_serves_the_responses_route(env):
    c = openai.OpenAI(base_url=env["gw"].url + "/openai/v1", api_key="sk-test-responses", max_retries=0, timeout=60,
                      default_headers={"x-veracity-policy": "correct"})
    resp = c.responses.create(model="gpt-tr", input=question("compound"))
    assert veracity(resp)["status"] == "corrected" and RIGHT in resp.output_text


def test_bad_json_and_unknown_model(env):
    r = httpx.post(env["gw"].base_url + "/responses", content=b"{not json", trust_env=False,
                   headers={"authorization": "Bearer sk-test-responses", "content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError) as exc:
        client(env).responses.create(model="no-such-model", input="hi")
    assert exc.value.body["code"] == "model_not_found"


# ------------------------------------------------------------------------ OpenAI Agents SDK


@pytest.fixture()
def agents_sdk(env):
    import agents  # a dev dependency (pyproject.toml): never skipped
    agents.set_tracing_disabled(True)   # no trace export to api.openai.com
    agents.set_default_openai_api("responses")
    agents.set_default_openai_client(aclient(env), use_for_tracing=False)
    return agents


def _weather_agent(agents, model: str):
    @agents.function_tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return json.dumps({"city": city, "temp_c": 21, "sky": "sunny"})

    return agents.Agent(name="weather", instructions="Answer with the weather.", model=model, tools=[get_weather])


@pytest.mark.parametrize("model", MODES)
def test_agents_sdk_runner_run_with_a_function_tool(env, agents_sdk, model):
    agent = _weather_agent(agents_sdk, model)
    result = asyncio.run(agents_sdk.Runner.run(agent, "[case:tool] weather in Paris?"))
    assert result.final_output == "It is 21 degrees and sunny in Paris."
    kinds = [type(i).__name__ for i in result.new_items]
    assert kinds == ["ToolCallItem", "ToolCallOutputItem", "MessageOutputItem"]
    last = result.raw_responses[-1]
    assert last.response_id and last.request_id.startswith("req_")   # the gateway's id: the report's key
    got = httpx.get(env["gw"].url + f"/v1/veracity/reports/{last.request_id}",
                    headers={"authorization": "Bearer sk-test-responses"}, trust_env=False)
    assert got.status_code == 200 and got.json()["veracity"]["status"] == "skipped"


@pytest.mark.parametrize("model", MODES)
def test_agents_sdk_runner_run_streamed(env, agents_sdk, model):
    agent = _weather_agent(agents_sdk, model)

    async def go():
        result = agents_sdk.Runner.run_streamed(agent, "[case:tool] weather in Paris?")
        deltas, reports = [], []
        async for ev in result.stream_events():
            if ev.type == "raw_response_event" and ev.data.type == "response.output_text.delta":
                deltas.append(ev.data.delta)
            if ev.type == "raw_response_event" and ev.data.type == "response.completed":
                reports.append(ev.data.response.model_extra["veracity"]["status"])
        return result, "".join(deltas), reports

    result, text, reports = asyncio.run(go())
    assert result.final_output == "It is 21 degrees and sunny in Paris." == text
    assert reports == ["skipped", "skipped"]       # the tool-call turn and the answer: low risk


@pytest.mark.parametrize("model", MODES)
def test_agents_sdk_wrong_arithmetic_is_corrected(env, agents_sdk, model):
    agents_sdk.set_default_openai_client(aclient(env, "correct"), use_for_tracing=False)
    agent = agents_sdk.Agent(name="calc", instructions="Answer.", model=model)
    result = asyncio.run(agents_sdk.Runner.run(agent, question("compound")))
    assert RIGHT in result.final_output and WRONG not in result.final_output


# ------------------------------------------------------------------------ demo mode


@pytest.fixture(scope="module")
def demo(gateway_factory):
    return gateway_factory(None)          # no config, no OPENAI_API_KEY: demo mode (its scripted upstream)


def test_demo_mode_answers_and_verifies_the_responses_api(demo):
    c = openai.OpenAI(base_url=demo.base_url, api_key="sk-demo", max_retries=0, timeout=120)
    resp = c.responses.create(model="gpt-4o-mini", input="What is 1234 * 5678?")
    assert veracity(resp)["status"] == "corrected" and "7,006,652" in resp.output_text.replace("7006652", "7,006,652")
    events = list(c.responses.create(model="gpt-4o-mini", input="What is 17 * 23?", stream=True))
    check_sequence(events)
    assert "391" in events[-1].response.output_text
    assert veracity(events[-1].response)["status"] in ("passed", "failed", "unverified", "skipped")


def test_demo_mode_agents_sdk_with_a_function_tool(demo):
    import agents

    agents.set_tracing_disabled(True)
    agents.set_default_openai_api("responses")
    agents.set_default_openai_client(openai.AsyncOpenAI(base_url=demo.base_url, api_key="sk-demo", max_retries=0),
                                     use_for_tracing=False)
    agent = _weather_agent(agents, "gpt-4o-mini")

    async def go():   # one event loop: the client's connections belong to it
        result = await agents.Runner.run(agent, "What is 17 * 23?")
        run = agents.Runner.run_streamed(agent, "Say hello")
        async for _ in run.stream_events():
            pass
        return result, run
    result, run = asyncio.run(go())
    assert "391" in result.final_output
    assert run.final_output.startswith("Mock reply to:")
