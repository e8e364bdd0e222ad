#!/bin/sh
# Build the HTML documentation; every Sphinx warning is an error.
#   tools/build_docs.sh [outdir]        (default: docs/_build/html)
# Needs the docs extra (pip install -e ".[docs]") and the compiled extensions
# (python setup.py build_ext --inplace).
set -e
cd "$(dirname "$0")/.."
OUT="${1:-docs/_build/html}"
exec python -m sphinx -W --keep-going -b html docs "$OUT"
