#!/usr/bin/env bash
# The main job: a virtual environment with kafkawire and Spark, then the demo pipeline in local mode
# (sample log.dirs written by LogWriter -> Spark -> per-partition summary + Parquet).
# Needs Python >= 3.9 with venv, a C compiler, Java 17 and access to the package index (pip
# installs kafkawire[spark,zstd] into .venv, created on the first run and reused after).
# Extra arguments go to the demo, e.g.
#   bash scripts/demo.sh --master spark://host:7077 --out /shared/kafkawire-demo
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
VENV=${KAFKAWIRE_DEMO_VENV:-$ROOT/.venv}

command -v java >/dev/null 2>&1 || { echo "demo.sh: Spark needs Java 17 on PATH (e.g. apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 9))' || { echo "demo.sh: Python >= 3.9 needed ($PY)" >&2; exit 1; }

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
echo "demo.sh: installing kafkawire[spark,zstd] into $VENV (log: $VENV/pip.log)" >&2
{ "$VENV/bin/python" -m pip install --upgrade pip && "$VENV/bin/python" -m pip install "$ROOT[spark,zstd]"; } \
  >"$VENV/pip.log" 2>&1 || { tail -40 "$VENV/pip.log" >&2; echo "demo.sh: pip install failed" >&2; exit 1; }

# Run outside the source tree so the installed (compiled) package is the one imported.
cd "$VENV"
exec "$VENV/bin/python" -m kafkawire.spark.demo --out "$ROOT/build/kafkawire-demo" "$@"
