#!/usr/bin/env bash
# Start or stop a private Docker engine for CI and local tests.
#
#   deploy/ci/dockerd.sh start   # prints `export DOCKER_HOST=...` on stdout
#   deploy/ci/dockerd.sh stop
#
# The engine runs without iptables, without the default bridge and with its own data root and
# socket, so it does not clash with a system Docker. Containers therefore only get
# `--network none` (all the sandbox needs). Needs root and the `docker.io` package.
#
# Env: VERACITY_DOCKER_SOCK (default /var/run/veracity-docker.sock),
#      VERACITY_DOCKER_ROOT (default /var/lib/veracity-docker),
#      VERACITY_DOCKER_EXEC (default /var/run/veracity-docker-exec),
#      VERACITY_DOCKERD_WAIT_S (default 60: how long `start` waits for the engine to answer;
#      containerd + dockerd take well over 10 s to come up on a loaded machine).
set -euo pipefail
SOCK="${VERACITY_DOCKER_SOCK:-/var/run/veracity-docker.sock}"
ROOT="${VERACITY_DOCKER_ROOT:-/var/lib/veracity-docker}"
EXEC_ROOT="${VERACITY_DOCKER_EXEC:-/var/run/veracity-docker-exec}"
PIDFILE="${EXEC_ROOT}.pid"
LOG="${VERACITY_DOCKER_LOG:-/tmp/veracity-dockerd.log}"
WAIT_S="${VERACITY_DOCKERD_WAIT_S:-60}"

answers() { timeout 10 docker -H "unix://$SOCK" version >/dev/null 2>&1; }

# Stop the engine with pid $1 (default: the one in $PIDFILE): SIGTERM, then SIGKILL after 30 s.
kill_engine() {
  local pid="${1:-}"
  if [ -z "$pid" ]; then
    [ -f "$PIDFILE" ] || return 0
    pid=$(cat "$PIDFILE" 2>/dev/null) || return 0
  fi
  [ -n "$pid" ] || return 0
  # a stale pidfile may name a pid reused by another program since: only ever signal a dockerd
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "dockerd $pid still running 30 s after SIGTERM: SIGKILL" >&2
  kill -9 "$pid" 2>/dev/null || true
}

start() {
  if [ -S "$SOCK" ] && answers; then
    echo "export DOCKER_HOST=unix://$SOCK"; return 0
  fi
  kill_engine  # a half-started engine of an earlier attempt would hold the pidfile and the socket
  mkdir -p "$ROOT" "$EXEC_ROOT"
  nohup dockerd --iptables=false --ip6tables=false --bridge=none \
    --data-root "$ROOT" --exec-root "$EXEC_ROOT" --pidfile "$PIDFILE" \
    --host "unix://$SOCK" >"$LOG" 2>&1 &
  local pid=$! deadline=$((SECONDS + WAIT_S))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if answers; then
      echo "export DOCKER_HOST=unix://$SOCK"; return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "dockerd exited during start-up; log: $LOG" >&2
      tail -20 "$LOG" >&2 || true
      return 1
    fi
    sleep 0.2
  done
  echo "dockerd did not answer on $SOCK within $WAIT_S s; log: $LOG" >&2
  tail -20 "$LOG" >&2 || true
  kill_engine "$pid"  # so that a retry starts from scratch (its pidfile may not exist yet)
  return 1
}

stop() {
  # Remove the sandbox's containers (label veracity.sandbox), then stop this engine only.
  if answers; then
    ids=$(docker -H "unix://$SOCK" ps -aq --filter label=veracity.sandbox || true)
    [ -n "$ids" ] && docker -H "unix://$SOCK" rm -f $ids >/dev/null 2>&1 || true
  fi
  kill_engine
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
