#!/bin/sh
# Builds {{module}}.wasm with componentize-py (pip install -r requirements.txt); set
# COMPONENTIZE_PY to use another one.
set -eu
cd "$(dirname "$0")"
"${COMPONENTIZE_PY:-componentize-py}" -d wit/policy.wit -w policy-plugin componentize -p . app -o {{module}}.wasm
