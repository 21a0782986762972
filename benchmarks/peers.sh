#!/usr/bin/env bash
# The peers' own environment for benchmarks/peers.py: a virtual environment with evalsig and
# evalstats from PyPI, kept apart from the project's environment (they are not dependencies
# of robuststats, and their requirements must not move the project's pins).
#
#   benchmarks/peers.sh            create benchmarks/.venv-peers (or reuse it) and check it
#   benchmarks/peers.sh --force    remove it first and create it anew
#
# PYTHON selects the base interpreter (default: python3). The venv path can be moved with
# PEERS_VENV; peers.py reads the same variable.
set -eu
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="${PEERS_VENV:-benchmarks/.venv-peers}"
EVALSIG_VERSION=0.1.2
EVALSTATS_VERSION=0.3.3

if [ "${1:-}" = "--force" ]; then
    rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "evalsig==$EVALSIG_VERSION" "evalstats==$EVALSTATS_VERSION"
"$VENV/bin/python" - <<EOF
import importlib.metadata as md
for name, want in (("evalsig", "$EVALSIG_VERSION"), ("evalstats", "$EVALSTATS_VERSION")):
    got = md.version(name)
    if got != want:
        raise SystemExit(f"peers.sh: {name} {got} installed, {want} wanted")
    print(f"peers.sh: {name} {got} in $VENV")
EOF
