#!/usr/bin/env bash
# For whoever is lent a GPU: every unified model of the Semantic Drift paper at its real size with
# random weights (nothing downloaded), peak GPU memory and seconds per describe and per draw at the
# paper's resolution, one table, under 8 minutes. Refuses in one line without CUDA.
#   bash benchmarks/gpu_check.sh [--models showo,vila_u] [--new-tokens 128] [--draws 1]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" exec python benchmarks/gpu_check.py "$@"
