"""The plan schema and the planner prompt (docs/verifier-model.md, the planner's "Model plans").

The verifier model answers one :class:`Plan` (schema name ``Plan``: the mock upstream and any
scripted server recognise planner calls by it). The prompt follows the house rules for
verifier-model prompts: a role, at most three must-rules, few-shot examples rather than rule
lists, and the JSON schema of the answer (sent with the request by
:func:`verifiers.model.ask_json`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

class PlanStep(BaseModel):
    """One verification step: call ``tool`` with ``input`` to check ``claim`` (an exact span of
    the draft); ``expected_check`` says in words what must hold (never used as a value)."""

    model_config = ConfigDict(extra="ignore")

    step_id: int | str = Field(..., description="1, 2, 3 ... in execution order")
    description: str = Field("", max_length=4000, description="what this step verifies")
    tool: str = Field(..., max_length=40, description="one of the offered tool names")
    input: dict[str, Any] = Field(..., description="the tool's input, following its input_schema")
    claim: str = Field(..., max_length=8000, description="the exact text of the draft this step checks, copied")
    expected_check: str = Field("", max_length=4000, description="what the tool result must show for the claim "
                                                                 "to hold")


class Plan(BaseModel):
    """The planner's answer: whether the draft needs checking, and the steps."""

    model_config = ConfigDict(extra="ignore")

    verification_needed: bool
    # no max_length: a plan longer than the policy's max_steps is cut (and logged), not rejected
    verification_steps: list[PlanStep] = Field(default_factory=list)


SYSTEM = (
    "You are a rigorous verification expert. You read a question and a draft answer and write a plan of "
    "tool calls that checks the draft's verifiable claims. You must follow these rules:\n"
    "1. Every step's claim must be copied exactly from the draft, and it must contain the value the draft states.\n"
    "2. Tool inputs must be built only from numbers, formulas and code found in the question or the draft; "
    "you must never put the draft's stated result or your own expected result into the input.\n"
    "3. You must answer with one JSON object that follows the schema and nothing else; when nothing in the "
    "draft can be checked with the tools, answer {\"verification_needed\": false, \"verification_steps\": []}."
)

_EXAMPLES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "A car travels 150 km in 2.5 hours. What is its average speed in miles per hour?",
        "Speed = 150 / 2.5 = 60 km/h, which is about 37.3 mph.",
        {"verification_needed": True, "verification_steps": [
            {"step_id": 1, "description": "recompute the speed in km/h", "tool": "calculate",
             "input": {"expression": "150 / 2.5"}, "claim": "150 / 2.5 = 60 km/h",
             "expected_check": "the value equals the 60 the draft states"},
            {"step_id": 2, "description": "convert 60 km/h to mph", "tool": "convert_units",
             "input": {"value": 60, "from_unit": "km/h", "to_unit": "mph"}, "claim": "about 37.3 mph",
             "expected_check": "the converted value rounds to 37.3"}]},
    ),
    (
        "Filter the rows of data.csv whose Age is between 0 and 120 with pandas.",
        "```python\nimport pandas as pd\ndf = pd.read_csv(\"data.csv\")\n"
        "clean = df[(df['Age'] > 0) & (df['Age'] < 120)]\n```",
        {"verification_needed": True, "verification_steps": [
            {"step_id": 1, "description": "run the filter on a constructed DataFrame instead of the file",
             "tool": "run_python",
             "input": {"setup": "import pandas as pd\ndf = pd.DataFrame({'Age': [25, -5, 150, 30]})",
                       "code": "clean = df[(df['Age'] > 0) & (df['Age'] < 120)]",
                       "assertions": ["list(clean['Age']) == [25, 30]"]},
             "claim": "clean = df[(df['Age'] > 0) & (df['Age'] < 120)]",
             "expected_check": "the code runs and keeps the ages 25 and 30"}]},
    ),
]


def _user(question: str | None, draft: str, tools: list[dict[str, Any]]) -> str:
    return ("Tools (name, description, JSON input schema):\n" + json.dumps(tools, ensure_ascii=False) +
            "\n\nQuestion:\n" + (question or "(none)") + "\n\nDraft answer:\n" + draft +
            "\n\nWrite the verification plan as JSON.")


def messages(question: str | None, draft: str, tools: list[dict[str, Any]], *, max_draft_chars: int = 12_000,
             ) -> list[dict[str, str]]:
    """The chat messages of a planner call: the system role and rules, the few-shot examples
    whose tools are offered (as user/assistant turns), then the question, the draft (cut at
    ``max_draft_chars``) and the offered tools with their input schemas."""
    names = {t["name"] for t in tools}
    msgs = [{"role": "system", "content": SYSTEM}]
    for q, d, plan in _EXAMPLES:
        if all(s["tool"] in names for s in plan["verification_steps"]):
            ex_tools = [t for t in tools if t["name"] in {s["tool"] for s in plan["verification_steps"]}]
            msgs.append({"role": "user", "content": _user(q, d, ex_tools)})
            msgs.append({"role": "assistant", "content": json.dumps(plan, ensure_ascii=False)})
    msgs.append({"role": "user", "content": _user(question, draft[:max_draft_chars], tools)})
    return msgs


__all__ = ["Plan", "PlanStep", "messages", "SYSTEM"]
