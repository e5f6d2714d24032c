"""`bioablate sweep`: an Optuna study here or as SLURM worker jobs, and `sweep best` (ablations/cli/ parses
its arguments).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ablations.cli.runs import launcher_layer


def cmd_sweep(args: argparse.Namespace) -> int:
    from ablations import api
    from ablations.places import resolve_work_dir
    from ablations.sweep import Place, best_command, best_config, finetune_command, study_storage, ui_command
    from core.errors import ConfigError

    if args.target == "best":
        work_dir = resolve_work_dir() if args.work_dir is None else Path(args.work_dir).expanduser().resolve()
        place = Place(str(work_dir), args.storage, args.data_dir, args.tracking_uri)
        if len(args.rest) != 1:
            raise ConfigError("usage: bioablate sweep best STUDY [--work-dir DIR] [--storage URL] [--output FILE]")
        storage = study_storage(args.storage, work_dir)
        best = best_config(args.rest[0], storage)
        out = Path(args.output).resolve() if args.output else work_dir / "sweeps" / f"{args.rest[0]}.yaml"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(best.text)
        print(best.text, end="")
        print(f"# written to {out}")
        print(f"# rerun it: {finetune_command(out, best.profile, best.seeds[0], place)}")
        return 0
    spec = api.sweep_spec(args.target, task=args.task, overrides=args.rest, n_trials=args.n_trials,
                          study=args.study)
    if args.launcher == "slurm":
        return _sweep_on_slurm(args, spec)
    summary = api.sweep(spec, args.storage, args.workers, args.worker_index, args.data_dir, args.work_dir,
                        args.tracking_uri, verbose=args.verbose)
    counts = ", ".join(f"{n} {state.lower()}" for state, n in sorted(summary.counts.items()))
    print(f"study '{summary.study}' ({summary.storage}): {counts or 'no trials'}; "
          f"target {summary.n_trials} finished")
    if summary.best_value is not None:
        print(f"  best {spec.metric}: {summary.best_value:.4f} with "
              + ", ".join(f"{k}={v}" for k, v in summary.best_params.items()))
    place = Place(summary.work_dir, args.storage, args.data_dir, args.tracking_uri)
    print(f"  MLflow parent run {summary.parent_run_id} in {summary.tracking_uri}")
    print(f"  browse: {ui_command(place)}")
    print(f"  export the best: {best_command(summary.study, place)}")
    failed_workers = [code for code in summary.worker_exit_codes if code != 0]
    return 0 if summary.complete and not failed_workers else 1


def _sweep_on_slurm(args: argparse.Namespace, spec) -> int:
    """K worker jobs on the study's server database (`--workers K`), each `sweep --workers 1`."""
    import optuna

    from ablations.config import build_config
    from ablations.launch import check_shared_store, submit_sweep_workers, wait_for
    from ablations.launch.jobs import SweepWorkerJob
    from ablations.places import resolve_tracking_uri, resolve_work_dir
    from ablations.sweep import STORAGE_ENV, SweepPaths
    from core.databases import redact, with_driver
    from core.errors import ConfigError

    url = args.storage or os.environ.get(STORAGE_ENV)
    url = with_driver(url) if url else url  # postgresql:// names the installed driver, as in the jobs
    if not url or url.startswith("sqlite"):
        raise ConfigError("--launcher slurm: worker jobs share the study through a server database; pass "
                          "--storage postgresql+psycopg2://user:password@host/db (or set BIOABLATE_SWEEP_STORAGE)")
    redact(url)
    cfg = launcher_layer(build_config("micro", [o for o in spec.cli_overrides if o.startswith("launcher.")],
                                       task=spec.task, work_dir=args.work_dir, tracking_uri=args.tracking_uri), args)
    work_dir = resolve_work_dir(cfg)
    tracking_uri = resolve_tracking_uri(cfg, work_dir)
    check_shared_store(tracking_uri)
    os.environ[STORAGE_ENV] = url  # the jobs inherit it (sbatch exports the environment): no password in argv
    paths = SweepPaths(args.data_dir, str(work_dir), tracking_uri)
    workers = [SweepWorkerJob(str(spec.path), spec.task, spec.study, spec.n_trials, list(spec.cli_overrides),
                              paths.data_dir, str(paths.work_dir), str(paths.tracking_uri), args.worker_index + i,
                              cfg.launcher.max_requeues) for i in range(args.workers)]
    folder = work_dir / "slurm" / f"sweep-{spec.study}"
    jobs = submit_sweep_workers(workers, cfg.launcher, folder, f"sweep:{spec.study}")
    print(f"study '{spec.study}' ({redact(url)}): submitted {len(jobs)} worker job(s) {', '.join(jobs)}; "
          f"logs: {folder / 'logs'}")
    if not args.follow:
        return 0
    wait_for(jobs)
    study = optuna.load_study(study_name=spec.study, storage=url)
    states = [t.state.name for t in study.get_trials(deepcopy=False)]
    counts = ", ".join(f"{states.count(s)} {s.lower()}" for s in sorted(set(states)))
    print(f"study '{spec.study}': {counts or 'no trials'}; target {spec.n_trials} finished")
    return 0 if states.count("COMPLETE") + states.count("PRUNED") >= spec.n_trials else 1
