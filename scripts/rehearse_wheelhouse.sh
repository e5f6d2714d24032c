#!/usr/bin/env bash
# Rehearse a lent GPU session's installation here, without a GPU: a clean Python 3.12 venv under /tmp
# with the image's packages that bioablate needs, at the image's versions where the device documentation
# gives them (torch 2.11.0 as on the image: PyPI's CUDA build, which runs on a CPU), then the wheelhouse
# installed exactly as scripts/gpu_session.sh installs it on the device (--no-index --no-deps --target),
# then the micro CLI smoke and the GPU session script's CPU rehearsal from that environment. A package the
# wheelhouse misses fails here, not in the first device minute.
#
#   bash scripts/rehearse_wheelhouse.sh            # builds wheelhouse/ first (scripts/build_wheelhouse.py)
# Environment: PYTHON (default: the .venv's), PY312 (a Python 3.12; default: uv's or pyenv's), VENV
# (default /tmp/bioablate-gpu-rehearsal), BIOABLATE_DATA (default ../shared/data).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
python=${PYTHON:-.venv/bin/python}
venv=${VENV:-/tmp/bioablate-gpu-rehearsal}
uv=$(command -v uv || echo "$(dirname "$python")/uv")
export BIOABLATE_DATA=${BIOABLATE_DATA:-$(cd ../shared/data && pwd)}
image_reqs=$(mktemp)
"$python" scripts/build_wheelhouse.py --image-requirements "$image_reqs"
# a Python 3.12 already on the machine (uv's managed ones come from outside the package registries)
py312=${PY312:-}
for candidate in $(command -v python3.12 || true) ~/.pyenv/versions/3.12*/bin/python3.12 \
    $("$uv" python find 3.12 2>/dev/null || true); do
  [ -n "$py312" ] && break
  "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && py312=$candidate
done
[ -n "$py312" ] || { echo "rehearse_wheelhouse: no Python 3.12 here (set PY312)" >&2; exit 2; }
rm -rf "$venv"
"$uv" venv -q -p "$py312" "$venv"
# the image's stand-in: from PyPI, not this machine's local CPU torch (the image has 2.11.0)
"$uv" pip install -q --python "$venv/bin/python" --index-url https://pypi.org/simple -r "$image_reqs" pip
rm -rf "$venv/site"
"$venv/bin/python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$venv/site" wheelhouse/*.whl
export PYTHONPATH="$venv/site"
"$venv/bin/python" -m pip check || true  # informational: the image's versions are partly unknown
work=$(mktemp -d /tmp/bioablate-gpu-rehearsal-work.XXXX)
cd "$work"  # the installed wheel, not the checkout
export BIOABLATE_WORK="$work"
"$venv/site/bin/bioablate" finetune --task bc5-chem --profile micro
"$venv/site/bin/bioablate" pretrain --profile micro
# the device's command itself, on this CPU: the wrapper installs the wheelhouse into a fresh folder,
# unpacks its data (the device sees no ../shared/data), and runs every section at toy size
cd "$repo"
unset PYTHONPATH BIOABLATE_DATA BIOABLATE_WORK
# (budgets for a shared 2-core machine, where a toy section can wait minutes for a core)
budgets=(install=600 environment=600 preflight_pretrain=600 preflight_finetune=600 preflight_smoke=600 \
  pretrain_base=600 finetune_base=600 runs_per_device=600)
PYTHON="$venv/bin/python" SITE="$venv/session-site" bash scripts/gpu_session.sh "$work/session" --device cpu \
  --size micro --budget 7200 --section-budget "${budgets[@]}" --work-dir "$work/session-work" --threads 1
echo "rehearsal: the wheelhouse installs and runs bioablate's micro path on Python $("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])')"
