"""openai-node's ``responses.create`` (non-stream and ``stream: true``) through the gateway, in
both upstream modes (tests/e2e/node/responses.mjs; its one dependency, ``openai``, is installed
with ``npm ci --prefix tests/e2e/node``, which needs the npm registry: no test downloads it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_responses_e2e import MODES, RIGHT, WRONG, env, question  # noqa: F401 - the module's gateway

NODE_DIR = Path(__file__).parent / "node"
_missing = shutil.which("node") is None or not (NODE_DIR / "node_modules" / "openai").is_dir()
pytestmark = [pytest.mark.node, pytest.mark.slow,
              pytest.mark.skipif(_missing, reason="node or tests/e2e/node/node_modules missing: "
                                 "run `npm ci --prefix tests/e2e/node`")]


@pytest.mark.parametrize("model", MODES)
def test_openai_node_responses_create_and_stream(env, model):  # noqa: F811 - the fixture
    out = subprocess.run(["node", str(NODE_DIR / "responses.mjs"), env["gw"].base_url, model, question("compound")],
                         capture_output=True, text=True, timeout=240, cwd=NODE_DIR)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["veracity"]["status"] == "corrected" == got["status_header"]
    assert RIGHT in got["output_text"] and WRONG not in got["output_text"]
    assert got["request_id"].startswith("req_")
    assert got["stream_seq"] == list(range(len(got["stream_seq"])))
    assert got["stream_types"][0] == "response.created" and got["stream_types"][-1] == "response.completed"
    assert got["stream_text"] == got["stream_output_text"] and RIGHT in got["stream_text"]
    assert got["stream_veracity"]["status"] == "corrected"
