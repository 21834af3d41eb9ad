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
#      VERACITY_DOCKER_EXEC (default /var/run/veracity-docker-exec).
set -euo pipefail
SOCK="${VERACITY_DOCKER_SOCK:-/var/run/veracity-docker.sock}"
ROOT="${VERACITY_DOCKER_ROOT:-/var/lib/veracity-docker}"
EXEC_ROOT="${VERACITY_DOCKER_EXEC:-/var/run/veracity-docker-exec}"
PIDFILE="${EXEC_ROOT}.pid"
LOG="${VERACITY_DOCKER_LOG:-/tmp/veracity-dockerd.log}"

start() {
  if [ -S "$SOCK" ] && docker -H "unix://$SOCK" version >/dev/null 2>&1; then
    echo "export DOCKER_HOST=unix://$SOCK"; return 0
  fi
  mkdir -p "$ROOT" "$EXEC_ROOT"
  nohup dockerd --iptables=false --ip6tables=false --bridge=none \
    --data-root "$ROOT" --exec-root "$EXEC_ROOT" --pidfile "$PIDFILE" \
    --host "unix://$SOCK" >"$LOG" 2>&1 &
  for _ in $(seq 1 100); do
    if docker -H "unix://$SOCK" version >/dev/null 2>&1; then
      echo "export DOCKER_HOST=unix://$SOCK"; return 0
    fi
    sleep 0.1
  done
  echo "dockerd did not answer on $SOCK within 10 s; log: $LOG" >&2
  tail -20 "$LOG" >&2 || true
  return 1
}

stop() {
  # Remove the sandbox's containers (label veracity.sandbox), then stop this engine only.
  if docker -H "unix://$SOCK" version >/dev/null 2>&1; then
    ids=$(docker -H "unix://$SOCK" ps -aq --filter label=veracity.sandbox || true)
    [ -n "$ids" ] && docker -H "unix://$SOCK" rm -f $ids >/dev/null 2>&1 || true
  fi
  if [ -f "$PIDFILE" ]; then
    pid=$(cat "$PIDFILE")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
