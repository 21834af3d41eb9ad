"""The OpenAI wire format: errors in OpenAI's error shape, server-sent events, Azure paths."""
