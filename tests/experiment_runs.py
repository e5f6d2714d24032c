"""Running a packaged experiment YAML under the micro profile into a shared store and checking what it
left there: used by tests/e2e/test_experiments.py (Gu et al.'s tables) and
tests/e2e/test_seed_paper_experiments.py (BioBERT's, BioALBERT's and Bio-ELECTRA's)."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from mlflow.tracking import MlflowClient

from ablations import results
from ablations.cli import main
from ablations.experiment import collect, load_experiment

SEED_PAPER_PREFIXES = ("biobert_table", "bioalbert_", "bioelectra_")


def runs_in_store(tracking_uri: str, kind: str | None = None) -> list:
    """The store's runs of one `kind` (tag), or of every kind."""
    client = MlflowClient(tracking_uri)
    out = []
    for experiment in client.search_experiments():
        out += client.search_runs([experiment.experiment_id], f"tags.kind = '{kind}'" if kind else "",
                                  max_results=5000)
    return out


@contextmanager
def single_threaded() -> Iterator[None]:
    """Micro models are too small to gain from intra-op threads, and a second thread spinning on a shared
    CI core costs more than it gives: the experiment modules' runs go single-threaded."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_under_micro_and_check(path: Path, shared_work: Path, data_dir: Path, capsys) -> None:
    """`bioablate run PATH --profile micro` into `shared_work`: it exits 0, prints and writes its table, every
    cell finished with a value, and no pretraining or fine-tuning run is in the store twice (shared models
    and cells are computed once across the experiments run into it so far)."""
    code = main(["run", str(path), "--profile", "micro", "--work-dir", str(shared_work), "--data-dir", str(data_dir)])
    out = capsys.readouterr().out
    assert code == 0, out
    experiment = load_experiment(path, profile="micro", data_dir=str(data_dir), work_dir=str(shared_work))
    _, tracking_uri = experiment.store()
    assert experiment.layout.title in out and f"MLflow: {tracking_uri}" in out
    assert (shared_work / "tables" / f"{experiment.name}-micro" / "table.md").is_file()
    if experiment.kind == "finetune":
        cells = collect(experiment)
        assert cells and all(c.status == results.FINISHED and c.value is not None for c in cells), \
            [(c.row, c.column, c.status, c.reason) for c in cells if c.status != results.FINISHED]
        assert len(cells) == len(experiment.cells()) * max(1, len(experiment.layout.metrics))  # a metric axis
    stored = runs_in_store(tracking_uri)  # one read of a store that grows to ~250 runs, not one per kind
    for kind in ("pretrain", "finetune"):
        fingerprints = Counter(r.data.tags["fingerprint"] for r in stored if r.data.tags.get("kind") == kind)
        assert not [fp for fp, n in fingerprints.items() if n > 1], kind
