#!/usr/bin/env bash
# Build the bwrap sandbox runtime (docs/code.md) the way a user would: `veracity sandbox setup`
# (a virtualenv + numpy, pandas, sympy wheels from PyPI; no root needed, no container registry),
# run with the interpreter that will build the gateway's venv, before `make venv` exists.
#
#   deploy/ci/sandbox-runtime.sh [DIR]     # default /var/cache/veracity/sandbox-runtime
#
# Prints the build log on stderr and, on stdout, the one configuration line setup prints.
# The setup command itself checks the runtime inside a real bwrap sandbox and fails if numpy,
# pandas and sympy do not import and work there. Tests find the runtime through
# VERACITY_TEST_SANDBOX_RUNTIME (tests/test_sandbox_runtime.py); `.ci/run` exports it.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR="${1:-/var/cache/veracity/sandbox-runtime}"
# setup bases the venv on /usr/bin/python3 when present: under root the sandbox runs as uid
# 65534, which cannot enter a Python kept under /root (pyenv); Debian's python3 + venv module
if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c 'import venv' 2>/dev/null; then
  apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
fi
start=$(date +%s)
PYTHONPATH=. "${PYTHON:-python3}" -m proxy sandbox setup --path "$DIR"
echo "sandbox runtime: built in $(( $(date +%s) - start )) s, $(du -sm "$DIR" | cut -f1) MB on disk" >&2
