"""Demo mode scripts structured output (proxy/mock_structured.py, ``structured_output`` in
proxy/demo_script.yaml): the clients that parse what they asked for work against ``veracity
serve`` with no config, through the real gateway: openai-python's ``chat.completions.parse``
(json_schema, streamed too, and a forced pydantic tool), LangChain's ``with_structured_output``
(json_schema, function calling, JSON mode). ``instructor`` is not in the dev extra: its release
1.17.0 pins ``jiter<0.15`` while the project's openai needs a newer one (pip would downgrade
openai); installed with ``--no-deps`` beside the venv it parsed demo answers in its TOOLS, JSON
and JSON_SCHEMA modes (checked by hand, see the branch notes)."""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from proxy.mock_structured import minimal_instance, structured_reply


class Address(BaseModel):
    city: str
    postcode: str = Field(min_length=5, max_length=5)


class Person(BaseModel):
    name: str
    age: int = Field(ge=18, lt=130)
    score: float = Field(gt=0.5, le=0.9)
    role: Literal["admin", "user"]
    tags: list[str] = Field(min_length=2)
    home: Address
    manager: Optional["Person"] = None     # recursive: must terminate


SCHEMAS: list[dict[str, Any]] = [
    Person.model_json_schema(),
    {"type": "object", "properties": {"a": {"type": ["integer", "null"]}, "b": {"const": 3},
                                      "c": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}],
                                            "minItems": 2},
                                      "d": {"allOf": [{"type": "object", "properties": {"x": {"type": "boolean"}},
                                                       "required": ["x"]},
                                                      {"properties": {"y": {"type": "string", "format": "date-time"}},
                                                       "required": ["y"]}]},
                                      "e": {"type": "number", "exclusiveMinimum": 2, "exclusiveMaximum": 3},
                                      "f": {"type": "integer", "minimum": -10, "maximum": -5}},
     "required": ["a", "b", "c", "d", "e", "f"], "additionalProperties": False},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=["pydantic", "keywords"])
def test_minimal_instance_is_valid(schema: dict[str, Any]) -> None:
    value = minimal_instance(schema)
    jsonschema.validate(value, schema)
    from openai.lib._pydantic import to_strict_json_schema

    strict = to_strict_json_schema(Person)          # what .parse() sends: every field required, nullable
    jsonschema.validate(minimal_instance(strict), strict)
    Person.model_validate(minimal_instance(strict))


def test_structured_reply_shapes() -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": Address.model_json_schema()}},
             {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}]
    forced = structured_reply({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "lookup"}}})
    assert forced["tool_calls"][0]["name"] == "lookup"
    Address.model_validate_json(forced["tool_calls"][0]["arguments"])
    assert structured_reply({"tools": tools, "tool_choice": "required"})["tool_calls"][0]["name"] == "lookup"
    assert structured_reply({"tools": tools, "tool_choice": "auto"}) is None      # the model may answer in text
    assert structured_reply({"messages": [{"role": "user", "content": "hi"}]}) is None
    obj = structured_reply({"response_format": {"type": "json_object"}, "messages": [{"role": "user", "content": "hi"}]})
    assert json.loads(obj["content"]) == {"answer": "Mock reply to: hi"}
    # JSON mode with the schema in the prompt (instructor's Mode.JSON writes it into the system message)
    prompt = f"Answer in JSON matching this json_schema:\n\n{json.dumps(Address.model_json_schema(), indent=2)}\n\nOnly JSON."
    obj = structured_reply({"response_format": {"type": "json_object"},
                            "messages": [{"role": "system", "content": "Be {brief}. " + prompt},
                                         {"role": "user", "content": "Where?"}]})
    Address.model_validate_json(obj["content"])


@pytest.fixture(scope="module")
def demo(gateway_factory: Any) -> Any:
    return gateway_factory(None)          # no config, no OPENAI_API_KEY: demo mode


def test_openai_parse_in_demo(demo: Any) -> None:
    client = openai.OpenAI(base_url=demo.base_url, api_key="unused", max_retries=0)
    done = client.chat.completions.parse(model="gpt-4o-mini", response_format=Person,
                                         messages=[{"role": "user", "content": "Invent a person."}])
    person = done.choices[0].message.parsed
    assert isinstance(person, Person) and person.age >= 18 and len(person.tags) >= 2
    assert "veracity" in done.model_extra                               # still went through the gateway
    with client.chat.completions.stream(model="gpt-4o-mini", response_format=Person,
                                        messages=[{"role": "user", "content": "Invent a person."}]) as stream:
        for _ in stream:
            pass
        assert isinstance(stream.get_final_completion().choices[0].message.parsed, Person)
    tool = openai.pydantic_function_tool(Address, name="save_address")
    done = client.chat.completions.parse(model="gpt-4o-mini", tools=[tool],
                                         tool_choice={"type": "function", "function": {"name": "save_address"}},
                                         messages=[{"role": "user", "content": "Where do you live?"}])
    call = done.choices[0].message.tool_calls[0]
    assert call.function.name == "save_address" and isinstance(call.function.parsed_arguments, Address)
    assert done.choices[0].finish_reason == "tool_calls"
    # a script rule still wins over the generated answer
    plain = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "What is 17 * 23?"}],
                                           response_format={"type": "json_object"})
    assert "391" in plain.choices[0].message.content


def test_langchain_with_structured_output_in_demo(demo: Any) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    llm = langchain_openai.ChatOpenAI(model="gpt-4o-mini", base_url=demo.base_url, api_key="unused", max_retries=0)
    for method in ("json_schema", "function_calling", "json_mode"):
        if method == "json_mode":
            out = llm.with_structured_output(None, method=method).invoke("Reply in JSON.")
            assert isinstance(out, dict) and out["answer"].startswith("Mock reply to:")
            continue
        out = llm.with_structured_output(Address, method=method).invoke("Where do you live?")
        assert isinstance(out, Address) and len(out.postcode) == 5, method


def test_demo_does_not_play_the_verifier_model() -> None:
    """The gateway's own structured questions (the schema named by each ``ask_json`` answer type)
    get plain text in demo, as before structured output: a minimal instance would be an enum's
    first value, e.g. a ``supported`` verdict nobody checked."""
    import re
    from pathlib import Path

    from proxy.mock_upstream import MockUpstream, load_script
    from verifiers.facts._judge import VerdictAnswer

    asked = set()
    for f in Path("verifiers").rglob("*.py"):
        asked |= set(re.findall(r"ask_json\([^)]*?,\s*([A-Z][A-Za-z]+),", f.read_text(), re.S))
    assert {"Plan", "VerdictAnswer", "QueryList", "ClaimList", "RelevanceAnswer"} <= asked
    assert minimal_instance(VerdictAnswer.model_json_schema())["verdict"] == "supported"   # what the rules prevent
    with MockUpstream(load_script("proxy/demo_script.yaml")) as mock:
        client = openai.OpenAI(base_url=mock.base_url, api_key="unused", max_retries=0)
        for name in sorted(asked):
            out = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Is the claim supported?"}],
                response_format={"type": "json_schema", "json_schema": {"name": name, "schema": {"type": "object"}}})
            assert out.choices[0].message.content == "The demo upstream does not play the verifier model.", name
