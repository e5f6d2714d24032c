#!/usr/bin/env bash
# A lent GPU session's one command: install the wheelhouse, unpack its data, then run
# benchmarks.gpu_session, which writes session.json and session.md (after every section) to OUT.
#
#   bash scripts/gpu_session.sh "$OUT"                        # the device call (carry: ["wheelhouse"])
#   bash scripts/gpu_session.sh OUT --device cpu --size micro # the CPU rehearsal (tests/benchmarks/)
#
# Arguments after OUT go to benchmarks.gpu_session. Environment: PYTHON (default python3: the image's, the
# one that holds torch), WHEELHOUSE (default wheelhouse/, built by scripts/build_wheelhouse.py), SITE
# (where its wheels are installed, default /tmp/bioablate-site). The budget (8 minutes) counts from here,
# so the install is part of it. OUT also gets install.log and session.log (everything printed).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_session.sh OUT [benchmarks.gpu_session arguments]}
shift
started=$(date +%s.%N)
python=${PYTHON:-python3}
wheelhouse=${WHEELHOUSE:-wheelhouse}
site=${SITE:-/tmp/bioablate-site}
mkdir -p "$out"
# gitpython (an MLflow dependency) refuses to import where no git executable is found; MLflow does not need it
export GIT_PYTHON_REFRESH=quiet PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
# what a compiled section must not do silently goes into session.log: graph breaks, recompiles, cudagraph skips
export TORCH_LOGS="${TORCH_LOGS:-graph_breaks,recompiles,cudagraphs}"
install=(--install-status skipped --install-reason "no wheels in $wheelhouse/ (scripts/build_wheelhouse.py builds them)")
if compgen -G "$wheelhouse/*.whl" >/dev/null; then
  rm -rf "$site"
  if "$python" -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
      "$wheelhouse"/*.whl >"$out/install.log" 2>&1; then
    install=(--install-status ok)
  else
    install=(--install-status failed --install-reason "pip install of $wheelhouse/*.whl failed: see install.log")
  fi
  # the checkout first: its code is what runs, the wheel gives the `bioablate` command and metadata
  export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH"
  "$python" -m pip check >>"$out/install.log" 2>&1 || true  # informational: the image's versions are partly unknown
  if [ -f "$wheelhouse/data.tar.gz" ]; then  # the device sees the repository only, not ../shared/data
    mkdir -p /tmp/bioablate-data && tar -xzf "$wheelhouse/data.tar.gz" -C /tmp/bioablate-data
    export BIOABLATE_DATA=/tmp/bioablate-data/data
  fi
  install+=(--installed "$site" --install-seconds "$("$python" -c "import time; print(round(time.time() - $started, 1))")")
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
# the interpreter must hold torch (the image's): without it every section would stop on ModuleNotFoundError
if ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "gpu_session.sh: $python cannot import torch, so there is no GPU environment to measure; set PYTHON to the interpreter that holds torch" >&2
  exit 2
fi
"$python" -m benchmarks.gpu_session --out "$out" --started-at "$started" "${install[@]}" "$@" 2>&1 |
  tee "$out/session.log"
