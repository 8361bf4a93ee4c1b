#!/usr/bin/env bash
# The whole test suite, as CI runs it: build the sdist and a wheel, install the
# wheel with its test, fuzz and docs extras into a fresh virtual environment, and
# run pytest against the installed package (not the source tree), requiring the
# compiled backend.  Extra arguments go to pytest (e.g. --runslow, -k lz4).
#
# Needs Python >= 3.9 with venv, a C compiler, and access to the package index.
# On Debian/Ubuntu, what else the tests need (a JDK for the Java interop tests,
# Chromium for the documentation check, kcat for the broker tests) is installed with apt-get
# when missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
VENV=${KAFKAWIRE_TEST_VENV:-$ROOT/.venv-test}
LOGS=$ROOT/build/test-logs
START=$(date +%s)
mkdir -p "$LOGS"

step() { printf '==> %s\n' "$*"; }

# Run a noisy step with its output in a log file; show the log only if it fails.
quietly() {
  local name=$1; shift
  if ! "$@" >"$LOGS/$name.log" 2>&1; then
    tail -n 200 "$LOGS/$name.log" >&2
    echo "test.sh: '$name' failed; full log: $LOGS/$name.log" >&2
    exit 1
  fi
}

missing=()
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
  || command -v google-chrome >/dev/null 2>&1 || missing+=(chromium)
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    step "installing ${missing[*]} with apt-get"
    SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
    quietly apt-get $SUDO env DEBIAN_FRONTEND=noninteractive sh -c \
      "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${missing[*]}"
  else
    echo "test.sh: please install ${missing[*]}; tests that need them will fail" >&2
  fi
fi

step "creating $VENV"
quietly venv "$PY" -m venv --clear "$VENV"
quietly pip-tools "$VENV/bin/python" -m pip install --upgrade pip build
step "building the sdist and wheel (log: $LOGS/build.log)"
rm -rf "$ROOT/dist"
quietly build env KAFKAWIRE_REQUIRE_EXTENSIONS=1 "$VENV/bin/python" -m build --outdir "$ROOT/dist" "$ROOT"
WHEEL=$(ls "$ROOT"/dist/kafkawire-*.whl)
step "installing $(basename "$WHEEL") with its test, fuzz and docs extras"
quietly install "$VENV/bin/python" -m pip install "${WHEEL}[test,fuzz,docs]"

step "running the tests"
RUNDIR=$(mktemp -d)
cd "$RUNDIR"
status=0
KAFKAWIRE_REQUIRE_FAST=1 KAFKAWIRE_TEST_INSTALLED=1 KAFKAWIRE_DIST="$ROOT/dist" NO_MKDOCS_2_WARNING=1 \
  "$VENV/bin/python" -m pytest "$ROOT/tests" -p no:cacheprovider "$@" || status=$?
echo "test.sh: finished in $(( $(date +%s) - START )) s (exit status $status)"
exit $status
