#!/usr/bin/env bash
# Set up bioablate on a fresh machine: a virtual environment in .venv with the project installed
# (editable) and its test dependencies. Safe to rerun: already-satisfied packages are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# torch first and pinned: on CPU machines a local CPU wheel of 2.13.0 is provided; installing the project
# first would let pip pull the newest CUDA build (several GB) to satisfy `torch>=2.4`.
python -m pip install --quiet "torch==2.13.0"
python -m pip install --quiet -e ".[dev]"
echo "bioablate installed in $(pwd)/.venv (activate with: . .venv/bin/activate)"
