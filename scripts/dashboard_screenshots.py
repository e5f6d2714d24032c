"""The README's screenshots of `bioablate ui` (docs/images/mlflow-*.png), taken by a headless Chromium.

    python scripts/dashboard_screenshots.py [--work-dir DIR] [--out docs/images]

Shows the quick start's own runs (`bioablate run quickstart`, its default profile: computed first, about 8
minutes on 2 CPU cores, or reused where DIR has them): the run page of one ChemProt run that learned (its metrics
tab, its overview, its figure), the runs list in the `bioablate` view, and the table run. Then starts `bioablate
ui` on a free loopback port. Needs `chromium` (Debian: apt-get install chromium) and the staged data
($BIOABLATE_DATA or --data-dir).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # ablations, tests.browser
RELATION_TASK = "chemprot"  # the quick start's relation task: the run shown


def bioablate(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "ablations.cli", *args], env=env, capture_output=True,
                          text=True, cwd=REPO_ROOT)
    if done.returncode != 0:
        sys.exit(f"bioablate {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def shoot(chromium: str, url: str, path: Path, size: tuple[int, int], shows: tuple[str, ...] = ()) -> None:
    """A first visit's screenshot, once the page shows every one of `shows` (tests/browser.py)."""
    from tests.browser import open_page

    open_page(chromium, url, ready=lambda text: all(s in text for s in shows), size=size, screenshot=path)
    print(f"{path}  <- {url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", default=str(REPO_ROOT / "outputs" / "quickstart"))
    parser.add_argument("--data-dir", default=os.environ.get("BIOABLATE_DATA"))
    parser.add_argument("--out", default=str(REPO_ROOT / "docs" / "images"))
    args = parser.parse_args()
    chromium = shutil.which("chromium") or sys.exit("no chromium on PATH (Debian: apt-get install chromium)")
    work, out = Path(args.work_dir), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    common = ["--work-dir", str(work), *(["--data-dir", args.data_dir] if args.data_dir else [])]
    bioablate("run", "quickstart", *common, "trainer.progress_bar=false")

    from mlflow.tracking import MlflowClient

    from ablations.run.dashboard import runs_url

    client = MlflowClient(f"sqlite:///{work / 'mlruns.db'}")
    finetune = client.get_experiment_by_name("finetune")
    [run] = client.search_runs([finetune.experiment_id], f"tags.task = '{RELATION_TASK}' and tags.seed = '1' and "
                               "params.`finetune.head` = 'linear' and tags.profile = 'mini'", max_results=1)
    if run.data.tags.get("test_state") != "learned":
        sys.exit(f"run {run.info.run_id} did not learn ({run.data.tags.get('test_state')}): no screenshot of it")
    tables = client.get_experiment_by_name("tables")
    [table] = client.search_runs([tables.experiment_id], "tags.experiment = 'quickstart' and tags.profile = 'mini'",
                                 max_results=1)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "ablations.cli", "ui", *common[:2], "--port", str(port)],
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        page = f"{base}/#/experiments/{finetune.experiment_id}/runs/{run.info.run_id}"
        name = run.info.run_name
        shoot(chromium, f"{page}/model-metrics", out / "mlflow-run-metrics.png", (1400, 2250),
              tuple(f"{name} ({key})" for key in ("train/loss", "train/loss_epoch", "dev/score", "test/score")))
        shoot(chromium, page, out / "mlflow-run-overview.png", (1400, 1000), ("test/score", "test/floor"))
        shoot(chromium, f"{page}/artifacts/figures/curves.png", out / "mlflow-run-figure.png", (1400, 800),
              ("figures/curves.png",))
        shoot(chromium, runs_url(base, finetune.experiment_id), out / "mlflow-runs.png", (1600, 800),
              (f"Group: {RELATION_TASK}", "test/score"))
        shoot(chromium, f"{base}/#/experiments/{tables.experiment_id}/runs/{table.info.run_id}/artifacts/table.png",
              out / "mlflow-table-run.png", (1400, 1000), ("table.png",))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


if __name__ == "__main__":
    main()
