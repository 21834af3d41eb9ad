"""The text of a chat message, a choice and a completion: the one home for reading it.

Shapes are OpenAI's ("The chat completion object"; a request message's ``content`` is a string
or a list of content parts, ``{"type": "text", "text": ...}`` among them). Every reader here
is total: malformed input (a hostile or broken upstream, a client's odd body) gives ``None``,
``""`` or ``[]``, never an exception -- except where noted, to keep a caller's behaviour as it
was.

Readers of answers (what the gateway verifies, corrects and audits):

* :func:`choice_list`, :func:`first_message` -- the choices, and choice 0's message;
* :func:`choice_text`, :func:`completion_text`, :func:`answer_text`, :func:`has_text` -- an
  answer's text: ``content`` as a string, or its ``text`` parts joined by newlines; ``None``
  when a choice has no text (tool calls only, a refusal, malformed);
  :func:`model_reply_text` -- the same for the verifier model's replies, two edge cases apart.

Readers of requests:

* :func:`content_text`, :func:`last_user_text` -- the question the verifiers are given
  (``text`` parts only; ``""`` rather than ``None`` for a message without text);
* :func:`message_text`, :func:`last_user_message_text`, :func:`last_user_content_text` -- what
  the scripted mock upstream matches and echoes (:mod:`proxy.upstreams.mock`): any part with a
  ``text`` string, tool calls included.

The variants differ on purpose: each keeps what its caller did before they were gathered here
(a verifier question must not contain tool-call text; a mock rule may match it), and the
differences are named in each docstring. The request's text (:func:`content_text`,
:func:`last_user_text`) is ``verifiers.run``'s own: the verifiers read the question that way, and
``verifiers`` never imports ``proxy``, so the gateway calls theirs.
"""

from __future__ import annotations

from typing import Any

from verifiers import run as _verifiers_run

__all__ = [
    "answer_text",
    "choice_list",
    "choice_text",
    "completion_text",
    "content_text",
    "first_message",
    "has_text",
    "last_user_content_text",
    "last_user_message_text",
    "last_user_text",
    "message_text",
    "model_reply_text",
]


# --------------------------------------------------------------------------- answers


def choice_list(completion: Any) -> list[dict[str, Any]]:
    """The well-formed (dict) entries of ``completion["choices"]``; ``[]`` for anything else."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    return [c for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []


def first_message(completion: Any) -> dict[str, Any]:
    """Choice 0's ``message`` dict; ``{}`` when there is none or it is not an object."""
    try:
        m = completion["choices"][0]["message"]
        return m if isinstance(m, dict) else {}
    except (KeyError, IndexError, TypeError):
        return {}


def _parts_text(content: Any, no_text_part: str | None) -> str | None:
    """``content`` as text: a string, or the ``text`` of its ``type: "text"`` parts joined by
    newlines (``no_text_part`` when it has none); None for anything else. A ``text`` part
    whose ``text`` is not a string raises ``TypeError``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(parts) if parts else no_text_part
    return None


def choice_text(choice: Any) -> str | None:
    """One choice's ``message.content`` as text (a string, or the ``text`` parts of a content
    list joined by newlines), or None when there is none (tool calls only, refusal, malformed).
    A ``text`` part whose ``text`` is not a string raises ``TypeError`` (as it always did)."""
    try:
        content = choice["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return _parts_text(content, None)


def completion_text(completion: Any) -> str | None:
    """Choice 0's text (:func:`choice_text`), or None when there is none (tool calls only,
    refusal, malformed -- a non-string ``text`` part included). Other choices (``n > 1``):
    :func:`choice_text` on each, or :func:`answer_text`."""
    try:
        return choice_text(completion["choices"][0])
    except (KeyError, IndexError, TypeError):
        return None


def model_reply_text(completion: Any) -> str | None:
    """Choice 0's text as the gateway's verifier-model client reads a reply
    (:mod:`proxy.pipeline.verifier_model`). It differs from :func:`completion_text` in two
    edge cases, kept as they were: a content list without any ``text`` part gives ``""`` (the
    model answered, with nothing to read) instead of None, and a ``text`` part whose ``text``
    is not a string raises ``TypeError`` instead of giving None."""
    try:
        content = completion["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return _parts_text(content, "")


def answer_text(completion: dict[str, Any]) -> str | list[str | None] | None:
    """The answer text for the audit record: choice 0's text, or with several choices
    (``n > 1``) a list of every choice's text in order (None for a choice without text)."""
    several = choice_list(completion)
    if len(several) > 1:
        return [choice_text(c) for c in several]
    return completion_text(completion)


def has_text(completion: dict[str, Any]) -> bool:
    """True when some choice has answer text (tool calls only / empty: nothing to verify)."""
    return any(choice_text(c) for c in choice_list(completion))


# --------------------------------------------------------------------------- requests


# The text of a request's messages: the verifiers read the question this way, and the gateway
# must read it the same way, so there is one implementation (``verifiers.run``'s public surface).
content_text = _verifiers_run.content_text
last_user_text = _verifiers_run.last_user_text


def message_text(message: dict[str, Any]) -> str:
    """Everything a chat message says, as the mock upstream's rules match it: ``content`` if a
    string, else every part's ``text`` string (any part type, image/audio parts have none)
    joined by newlines; then each tool call of an assistant message appended as
    ``\\nname(arguments)``. Unlike :func:`content_text`, tool calls count: a script may match a
    turn by the call it carries."""
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    else:
        text = ""
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                text += f"\n{fn.get('name', '')}({fn.get('arguments', '')})"
    return text


def last_user_message_text(messages: Any) -> str:
    """:func:`message_text` of the last ``user`` message, ``""`` when there is none (the mock
    upstream's default reply echoes it)."""
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "user":
                return message_text(m)
    return ""


def last_user_content_text(messages: Any) -> str:
    """The content of the last ``user`` message that has some (a string, or a list whose dict
    parts' ``text`` are joined by spaces); ``""`` when none has. The mock's structured replies
    echo it. Unlike :func:`last_user_message_text`, a user message without content (``null``)
    is skipped for the one before it, parts join with a space and tool calls are left out; a
    dict part whose ``text`` is not a string raises ``TypeError`` (as before)."""
    for m in reversed(messages or []):
        if isinstance(m, dict) and m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):
                return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""
