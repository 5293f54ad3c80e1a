#!/usr/bin/env bash
# Create the virtual environment and install xroute with its test dependencies.
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}

if [ -z "$python" ] || ! command -v "$python" >/dev/null 2>&1; then
    echo "xroute needs Python 3.11 or newer: apt-get install python3 python3-venv" >&2
    exit 1
fi
"$python" - <<'PY' || { echo "xroute needs Python 3.11 or newer (found $("$python" --version 2>&1))" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

if [ ! -x "$venv/bin/python" ]; then
    if ! "$python" -m venv "$venv" 2>/dev/null; then
        rm -rf "$venv"
        # Debian splits venv support out of the interpreter package.
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "installing python3-venv (Debian keeps venv apart from python3)" >&2
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
            "$python" -m venv "$venv"
        else
            echo "cannot create a virtual environment: run 'sudo apt-get install python3-venv'" >&2
            exit 1
        fi
    fi
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e '.[dev]'
# Compile the numba kernels now, into the cache folder that the pipeline's Spark workers read
# too (xroute.engines.numba_cache): the first run then pays no compile (about 20 s).
"$venv/bin/python" -m xroute.engines.warm \
    || echo "xroute: could not warm the numba kernels; they will compile on first use" >&2
echo "xroute installed in $venv"
