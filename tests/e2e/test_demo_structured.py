"""Demo mode scripts structured output (proxy/upstreams/mock_structured.py, ``structured_output`` in
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

from proxy.upstreams.mock_structured import minimal_instance, structured_reply


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

    from proxy.upstreams.mock import MockUpstream, load_script
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


# ------------------------------------------------------------------ hostile schemas (hostile1)

def _fan(width: int) -> dict[str, Any]:
    """A ``$ref`` whose every level requires ``width`` copies of itself (width ** MAX_DEPTH values)."""
    names = [f"p{i}" for i in range(width)]
    return {"$defs": {"A": {"type": "object", "required": names, "properties": {n: {"$ref": "#/$defs/A"} for n in names}}},
            "$ref": "#/$defs/A"}


TOO_LARGE: dict[str, Any] = {
    "minItems": {"type": "array", "minItems": 10**6},
    "minLength": {"type": "string", "minLength": 10**7},
    "strings_together": {"type": "array", "minItems": 50, "items": {"type": "string", "minLength": 5000}},
    "ref_fan_out": _fan(3),
    "array_fan_out": {"$defs": {"A": {"type": "array", "minItems": 3, "items": {"$ref": "#/$defs/A"}}},
                      "$ref": "#/$defs/A"},
}


@pytest.mark.parametrize("schema", TOO_LARGE.values(), ids=TOO_LARGE.keys())
def test_schema_whose_smallest_instance_is_huge_is_refused(schema: dict[str, Any]) -> None:
    from proxy.upstreams.mock_structured import MAX_STRING_CHARS, MAX_VALUES, SchemaTooLarge

    with pytest.raises(SchemaTooLarge, match=f"{MAX_VALUES}|{MAX_STRING_CHARS}"):
        minimal_instance(schema)


MALFORMED: dict[str, Any] = {
    "allOf_self_ref": {"$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A"},
    "anyOf_root_ref": {"anyOf": [{"$ref": "#"}]},
    "oneOf_ref_cycle": {"$defs": {"A": {"oneOf": [{"$ref": "#/$defs/B"}]}, "B": {"oneOf": [{"$ref": "#/$defs/A"}]}},
                        "$ref": "#/$defs/A"},
    "format_list": {"type": "string", "format": ["date"]},
    "required_of_objects": {"type": "object", "required": [{"a": 1}, "a", "a"], "properties": {"a": {"type": "integer"}}},
    "allOf_properties_list": {"allOf": [{"properties": [1]}], "properties": {}},
    "allOf_required_int": {"allOf": [{"required": 5}], "required": []},
    "infinite_minimum": {"type": "integer", "minimum": float("inf")},
    "nan_maximum": {"type": "number", "maximum": float("nan")},
    "huge_float_bounds": {"type": "integer", "minimum": 1e308, "maximum": 1.7e308},
    "type_object_not_str": {"type": {"a": 1}},
    "minLength_bool": {"type": "string", "minLength": True},
    "negative_maxLength": {"type": "string", "maxLength": -3},
    "empty_enum": {"enum": []},
    "list_schema": [1, 2],
    "pattern_and_contradiction": {"allOf": [{"type": "string", "pattern": "^[0-9]{3}$"}, {"type": "integer"}]},
}


@pytest.mark.parametrize("schema", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_or_cyclic_schema_gets_a_best_effort_value(schema: Any) -> None:
    reply = structured_reply({"messages": [], "response_format": {"type": "json_schema",
                                                                   "json_schema": {"name": "x", "schema": schema}}})
    json.loads(reply["content"])                       # never raises, always JSON
    tool = structured_reply({"tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}],
                             "tool_choice": "required"})
    json.loads(tool["tool_calls"][0]["arguments"])


def test_required_names_are_the_schemas_strings_once() -> None:
    value = minimal_instance(MALFORMED["required_of_objects"])
    assert value == {"a": 0}
    jsonschema.validate(value, {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}})


def test_huge_schema_is_an_openai_shaped_400_in_demo(demo: Any) -> None:
    client = openai.OpenAI(base_url=demo.base_url, api_key="unused", max_retries=0)
    fmt = {"type": "json_schema", "json_schema": {"name": "big", "schema": {"type": "array", "minItems": 10**9}}}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "List."}],
                                       response_format=fmt)
    assert err.value.code == "invalid_schema" and "minItems 1000000000" in err.value.message
    tool = {"type": "function", "function": {"name": "f", "parameters": _fan(6)}}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Call f."}],
                                       tools=[tool], tool_choice="required")
    assert err.value.code == "invalid_schema" and err.value.param == "tools"
    ok = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Invent."}],
                                        response_format={"type": "json_schema", "json_schema": {
                                            "name": "x", "schema": MALFORMED["anyOf_root_ref"]}})
    assert json.loads(ok.choices[0].message.content) == {}       # the demo still answers after them
    assert "Traceback" not in demo.log()
