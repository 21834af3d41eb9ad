"""proxy.wire.messages: the readers of a message's, a choice's and a completion's text, and the
edge cases where their rules differ on purpose (each kept from the caller it came from)."""

from __future__ import annotations

from proxy.wire import messages as m


def _completion(*contents):
    return {"choices": [{"index": i, "message": {"role": "assistant", "content": c}} for i, c in enumerate(contents)]}


def test_answer_text_string_parts_and_none():
    assert m.completion_text(_completion("Paris.")) == "Paris."
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "b"}]
    assert m.completion_text(_completion(parts)) == "a\nb"
    assert m.completion_text(_completion(None)) is None  # tool calls only
    assert m.completion_text({"choices": []}) is None
    assert m.completion_text("not a completion") is None
    assert m.answer_text(_completion("x", None, "z")) == ["x", None, "z"]
    assert m.answer_text(_completion("x")) == "x"
    assert m.has_text(_completion(None, "y")) and not m.has_text(_completion(None, ""))


def test_content_list_without_text_part_none_for_answers_empty_for_model_replies():
    comp = _completion([{"type": "image_url", "image_url": {}}])
    assert m.completion_text(comp) is None
    assert m.model_reply_text(comp) == ""


def test_non_string_text_part_none_for_completion_text_raises_for_choice_and_model_reply():
    comp = _completion([{"type": "text", "text": 5}])
    assert m.completion_text(comp) is None
    for reader in (lambda: m.choice_text(comp["choices"][0]), lambda: m.model_reply_text(comp)):
        try:
            reader()
        except TypeError:
            continue
        raise AssertionError("expected TypeError")


def test_question_text_leaves_tool_calls_out_mock_text_keeps_them():
    msg = {"role": "user", "content": [{"type": "text", "text": "q"}, {"text": "untyped"}],
           "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}
    assert m.content_text(msg["content"]) == "q"
    assert m.message_text(msg) == "q\nuntyped\nf({})"
    assert m.last_user_text([msg, {"role": "assistant", "content": "a"}]) == "q"
    assert m.last_user_text("nope") is None and m.last_user_text([]) is None


def test_last_user_readers_of_the_mock_differ_on_null_content_and_separator():
    msgs = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "user", "content": None}]
    assert m.last_user_message_text(msgs) == ""          # the last user message, even without content
    assert m.last_user_content_text(msgs) == "a b"       # the last user message with content, space-joined
    assert m.last_user_message_text(None) == m.last_user_content_text(None) == ""


def test_first_message_and_choice_list():
    assert m.first_message(_completion("x")) == {"role": "assistant", "content": "x"}
    assert m.first_message({"choices": [{"message": "str"}]}) == {}
    assert m.choice_list({"choices": [{"a": 1}, "bad", None]}) == [{"a": 1}]
    assert m.choice_list([]) == []
