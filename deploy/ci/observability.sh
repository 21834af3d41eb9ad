#!/usr/bin/env bash
# Install the real components of the dashboard and replica tests (dashboards proven on a live Prometheus,
# docs/metrics.md; several replicas, docs/deploying.md):
# Prometheus (+ promtool) and HAProxy from Debian packages. The tests start their own servers
# on free ports with temp configs (tests/fixtures/prometheus.py, tests/test_replicas.py) and stop
# them, so nothing is left running for `.ci/run`'s cleanup; the services the packages start at
# install time (Debian enables them) are stopped and disabled here: the tests need the binaries,
# not a Prometheus on :9090 scraping nothing or an idle HAProxy.
#
#   deploy/ci/observability.sh     # as root; `.ci/run` wraps it in its retry helper
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get -o Acquire::Retries=3 -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
  prometheus haproxy >/dev/null
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus haproxy >/dev/null 2>&1 || true
fi
for bin in /usr/bin/prometheus /usr/bin/promtool /usr/sbin/haproxy; do
  [ -x "$bin" ] || { echo "observability.sh: $bin missing after install" >&2; exit 1; }
done
echo "::: $(/usr/bin/prometheus --version 2>&1 | head -1); $(/usr/sbin/haproxy -v | head -1)"
