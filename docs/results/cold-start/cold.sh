#!/usr/bin/env bash
# The cold-start measurement of docs/results/cold-start/results.json (a few minutes).
set -e
cd "$(dirname "$0")/../../.."  # the repository root
export PYTHONPATH=src
PY=${PY:-.venv/bin/python}
X=${X:-.venv/bin/xroute}
S=/tmp/lib-scratch/sample
rm -rf $S /tmp/lib-scratch/nc-cold /tmp/lib-scratch/nc-warm
$PY -m xroute.pipeline.sample $S 300000
run() { $X pipeline --definitions $S/definitions.json --messages $S/messages.parquet --out /tmp/lib-scratch/routed --overwrite --keep-columns sent_at > /tmp/lib-scratch/run-$1.txt 2>&1; $PY -c "import json; s=json.load(open('/tmp/lib-scratch/routed/summary.json')); print('$1', s['messages_per_s'], s.get('wall_time_s'))"; }
# Without the warm step, a fresh cache: what a fresh clone paid before (kernels compile in the workers).
export NUMBA_CACHE_DIR=/tmp/lib-scratch/nc-cold
run cold-cache-first
run cold-cache-second
# As make-venv.sh does now: warm at install, then the first and second runs.
export NUMBA_CACHE_DIR=/tmp/lib-scratch/nc-warm
$PY -m xroute.engines.warm
run warmed-first
run warmed-second
