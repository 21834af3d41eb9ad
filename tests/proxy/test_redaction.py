"""proxy/redaction.py: one masking of the gateway's secrets for logs, audit, reviews, relayed errors."""

from __future__ import annotations

import json
import random
import urllib.parse
from collections.abc import Iterator

import pytest

from proxy import redaction
from proxy.config import GatewayConfig

KEY = "sk-proj-Ab3dEf6h_Ij9kLmN0-pQrStUv"


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    before = redaction.registered()
    redaction.clear()
    redaction.register([KEY, "short"])  # "short": under MIN_SECRET_LEN, ignored
    yield
    redaction.clear()
    redaction.register(before)


def _encodings(key: str) -> list[str]:
    """The key as an upstream or a model may echo it (docs/design.md "Secrets never leave")."""
    every = "".join(f"%{ord(c):02x}" for c in key)
    return [
        key,
        urllib.parse.quote(key, safe=""),                      # '-' and '_' stay: == key
        key.replace("-", "%2D").replace("_", "%5F"),           # over-encoding, upper-case hex
        every, every.upper(),                                   # every byte
        urllib.parse.quote(key.replace("-", "%2D"), safe=""),  # doubly encoded: %252D
        json.dumps(key, ensure_ascii=True)[1:-1].replace("-", "\\u002d"),  # JSON escapes
        "".join(f"\\u{ord(c):04x}" for c in key),              # every char JSON-escaped
        key[:2] + "%2d" + key[3:key.index("_")] + "\\u005F" + key[key.index("_") + 1:],  # mixed
    ]


@pytest.mark.parametrize("form", range(9))
def test_scrub_masks_every_usual_encoding_in_text_and_bytes(form: int) -> None:
    echo = _encodings(KEY)[form]
    text = f'{{"error": {{"message": "invalid key {echo}, try again"}}}}'
    assert redaction.scrub_text(text) == '{"error": {"message": "invalid key [REDACTED], try again"}}'
    assert redaction.scrub(text.encode()) == b'{"error": {"message": "invalid key [REDACTED], try again"}}'
    assert redaction.might_leak(text)


def test_might_leak_is_false_only_when_no_encoding_can_hide_a_secret() -> None:
    """The cheap pre-check is complete for the encodings above: whatever a random encoder
    does to each character, the key is found."""
    rng = random.Random(7)
    for _ in range(300):
        out = []
        for c in KEY:
            out.append(rng.choice([c, f"%{ord(c):02X}", f"%{ord(c):02x}", f"%25{ord(c):02x}", f"\\u{ord(c):04x}"]))
        text = "x " + "".join(out) + " y"
        assert redaction.might_leak(text) and redaction.scrub_text(text) == "x [REDACTED] y", text
    assert not redaction.might_leak("a normal log line about sk and keys, 15 of 20")


def test_relayed_bytes_keep_unregistered_key_shapes_stored_text_does_not() -> None:
    """What goes back to the client keeps the client's own key (pass-through auth) and
    OpenAI's masked form; what the gateway stores masks anything key-shaped as well."""
    text = "yours: sk-client-own-key-123456, masked: sk-...abcd, ours: " + KEY
    assert redaction.scrub_text(text) == "yours: sk-client-own-key-123456, masked: sk-...abcd, ours: [REDACTED]"
    assert redaction.redact(text) == "yours: [REDACTED], masked: sk-...abcd, ours: [REDACTED]"
    assert redaction.redact("Authorization: Bearer abcdefgh12345") == "Authorization: [REDACTED]"
    assert redaction.redact_obj({"a": [KEY, 3, None], KEY: {"b": "x"}}) == {"a": ["[REDACTED]", 3, None],
                                                                            "[REDACTED]": {"b": "x"}}
    assert "short" not in redaction.registered()


def test_config_secrets_include_credential_headers() -> None:
    cfg = GatewayConfig.model_validate({"upstreams": [
        {"name": "a", "models": ["*"], "base_url": "http://127.0.0.1:1/v1", "api_key": "sk-upstream-aaaaaa",
         "headers": {"api-key": "azure-key-0123456789", "OpenAI-Beta": "assistants=v2",
                     "Authorization": "Bearer tok-987654321"}}]})
    assert sorted(redaction.config_secrets(cfg)) == ["azure-key-0123456789", "sk-upstream-aaaaaa", "tok-987654321"]


def test_a_stored_report_record_never_holds_a_configured_secret() -> None:
    """GET /v1/veracity/reports/{id} serves the stored record: an answer (or a check's evidence)
    that echoes the upstream key, in any usual encoding, is masked there like in logs and audit."""
    from proxy.stores import reports

    for echo in _encodings(KEY):
        report = {"status": "failed", "checks": [{"verifier": "arithmetic", "claim": f"key {echo} = 2",
                                                  "evidence": {"note": f"saw {echo}"}}]}
        body = reports.record_body("req-1", "gpt-4o", 1, report, pending=False)
        assert b"[REDACTED]" in body
        assert KEY.encode() not in body and KEY[3:].encode() not in body
        assert json.loads(body)["veracity"]["checks"][0]["evidence"]["note"] == "saw [REDACTED]"
