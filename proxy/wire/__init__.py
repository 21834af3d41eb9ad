"""The OpenAI wire format: what crosses the gateway's edges, apart from what it means.

* :mod:`~proxy.wire.json` -- the JSON codec (orjson, exact big integers, depth bound);
* :mod:`~proxy.wire.messages` -- the text of a message, a choice, a completion;
* :mod:`~proxy.wire.sse` -- server-sent events: frames, the parser, chunks <-> completion;
* :mod:`~proxy.wire.relay` -- relaying an upstream's event stream (bounded, re-framed);
* :mod:`~proxy.wire.errors` -- errors in OpenAI's error shape;
* :mod:`~proxy.wire.azure` -- Azure OpenAI deployment paths;
* :mod:`~proxy.wire.responses` -- the Responses API: requests and answers, translated to and from
  chat completions; :mod:`~proxy.wire.responses_stream` -- its event streams, both ways.
"""

__all__ = ["azure", "errors", "json", "messages", "relay", "responses", "responses_stream", "sse"]
