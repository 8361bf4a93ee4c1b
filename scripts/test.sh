#!/usr/bin/env bash
# The whole test suite, as CI runs it: build the sdist and wheel, install the
# wheel with its test extras into a fresh virtual environment, and run pytest
# against the installed package (not the source tree), requiring the
# compiled backend.  Extra arguments go to pytest (e.g. --runslow, -k lz4).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
VENV=${KAFKAWIRE_TEST_VENV:-$ROOT/.venv-test}

if ! command -v javac >/dev/null 2>&1; then
  echo "note: javac not found; installing a JDK for the Java interop tests" >&2
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless) >/dev/null || true
  fi
fi

"$PY" -m venv --clear "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip build
rm -rf "$ROOT/dist"
KAFKAWIRE_REQUIRE_EXTENSIONS=1 "$VENV/bin/python" -m build --outdir "$ROOT/dist" "$ROOT"
WHEEL=$(ls "$ROOT"/dist/kafkawire-*.whl)
"$VENV/bin/python" -m pip install -q "${WHEEL}[test,fuzz]"

RUNDIR=$(mktemp -d)
cd "$RUNDIR"
KAFKAWIRE_REQUIRE_FAST=1 KAFKAWIRE_TEST_INSTALLED=1 "$VENV/bin/python" -m pytest "$ROOT/tests" -p no:cacheprovider "$@"
