"""Reading the stores back, for the commands' reports (ablations/api/ re-exports these): where a finished
run can be browsed, which invocations of an experiment a store has runs of, a sweep's best configuration
and the commands that follow a sweep, the MLflow UI and server, and a tracking store's failures as one line.
Heavy imports stay inside the functions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional


def browse_lines(result, cfg) -> list[str]:
    """Where a finished run (the `finetune` or `pretrain` result of `cfg`) can be browsed: its page on a
    tracking server, else `bioablate ui` over its store and the page's address."""
    from ablations.places import resolve_work_dir
    from ablations.run.dashboard import browse_lines as lines

    return lines(result.tracking_uri, result.experiment_id, result.run_id, resolve_work_dir(cfg))


def stored_invocations(experiment: str, work_dir: Optional[str] = None, tracking_uri: Optional[str] = None):
    """(its name, the store's URI, the invocations (profile and overrides) of `experiment` the store has
    runs of, newest first), read from the YAML's name and the store alone, without loading the experiment
    under any profile (its model's package may be missing where the runs are of another profile). No name,
    or not a fine-tuning experiment: (None, URI, [])."""
    from omegaconf import OmegaConf

    from ablations.experiment import experiment_header
    from ablations.experiment import stored_invocations as found
    from ablations.places import resolve_tracking_uri, resolve_work_dir

    _, name, kind = experiment_header(experiment)
    probe = OmegaConf.create({"work_dir": work_dir, "tracking_uri": tracking_uri})
    work = resolve_work_dir(probe)
    uri = resolve_tracking_uri(probe, work)
    if name is None or kind != "finetune":  # no name: loading the experiment says what is wrong; vocab: no runs
        return None, uri, []
    return name, uri, found(uri, work, name)


@dataclass(frozen=True)
class BestSweep:
    text: str  # the YAML layer of the best trial's keys
    path: Path  # where it was written
    rerun: str  # the `bioablate finetune` command that reruns it


def sweep_best(study: str, work_dir: Optional[str] = None, storage: Optional[str] = None,
               data_dir: Optional[str] = None, tracking_uri: Optional[str] = None,
               output: Optional[str] = None) -> BestSweep:
    """The best configuration of `study` as a YAML layer, written to `output` (default
    `<work dir>/sweeps/<study>.yaml`)."""
    from ablations.places import resolve_work_dir
    from ablations.sweep import Place, best_config, finetune_command, study_storage

    work = resolve_work_dir() if work_dir is None else Path(work_dir).expanduser().resolve()
    place = Place(str(work), storage, data_dir, tracking_uri)
    best = best_config(study, study_storage(storage, work))
    out = Path(output).resolve() if output else work / "sweeps" / f"{study}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(best.text)
    return BestSweep(best.text, out, finetune_command(out, best.profile, best.seeds[0], place))


def sweep_commands(summary, storage: Optional[str] = None, data_dir: Optional[str] = None,
                   tracking_uri: Optional[str] = None) -> tuple[str, str]:
    """The commands that browse a finished sweep (`summary`) and export its best configuration."""
    from ablations.sweep import Place, best_command, ui_command

    place = Place(summary.work_dir, storage, data_dir, tracking_uri)
    return ui_command(place), best_command(summary.study, place)


def ui(host: str = "127.0.0.1", port: int = 5000, allow_remote: bool = False, work_dir: Optional[str] = None,
       tracking_uri: Optional[str] = None, storage: Optional[str] = None, optuna: bool = False,
       optuna_port: Optional[int] = None) -> int:
    """Serve the MLflow UI over the work directory's store (and the Optuna dashboard) until stopped."""
    from ablations.serve.ui import serve

    return serve(host, port, allow_remote, work_dir, tracking_uri, storage, optuna, optuna_port)


def server(backend_store_uri: str, artifacts: str, host: str = "127.0.0.1", port: int = 5000, workers: int = 4,
           allow_remote: bool = False) -> None:
    """A shared MLflow tracking server (a database backend, artifacts on a shared filesystem) until stopped."""
    from ablations.serve.ui import serve_shared

    serve_shared(backend_store_uri, artifacts, host, port, workers, allow_remote)


def store_failure(error: BaseException) -> Optional[str]:
    """One line for an error of the tracking store itself (locked, full, its server gone); None otherwise."""
    from ablations.run.tracking import store_failure as failure

    return failure(error)


def table_from_bundle(folder: Path | str, out_dir: Path | str, fmt: str = "markdown") -> str:
    """The table of the bundle in `folder` (a rendered table's folder), rendered with no store into `out_dir`."""
    from ablations.tables.publish import render_bundle

    return render_bundle(Path(folder), Path(out_dir), fmt)


def import_bundle(folder: Path | str, work_dir: Optional[str] = None, tracking_uri: Optional[str] = None):
    """The finished runs of the bundle in `folder` put into the store (`tables.bundle_import.Imported`), with the
    store it went to."""
    from omegaconf import OmegaConf

    from ablations.places import resolve_tracking_uri, resolve_work_dir
    from ablations.tables.bundle_import import import_bundle as put

    probe = OmegaConf.create({"work_dir": work_dir, "tracking_uri": tracking_uri})
    work = resolve_work_dir(probe)
    uri = resolve_tracking_uri(probe, work)
    return put(Path(folder), uri, work / "mlartifacts"), uri

