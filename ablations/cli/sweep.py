"""`bioablate sweep`: an Optuna study here or as SLURM worker jobs, and `sweep best` (ablations/cli/ parses
its arguments).
"""

from __future__ import annotations

import argparse

from ablations import api
from ablations.cli.runs import starting
from ablations.cli.runs import submitted as report_submission
from bioablate_core.databases import hide_passwords
from bioablate_core.errors import ConfigError


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.target == "best":
        if len(args.rest) != 1:
            raise ConfigError("usage: bioablate sweep best STUDY [--work-dir DIR] [--storage URL] [--output FILE]")
        best = api.sweep_best(args.rest[0], args.work_dir, args.storage, args.data_dir, args.tracking_uri,
                              args.output)
        print(best.text, end="")
        print(f"# written to {best.path}")
        print(f"# rerun it: {best.rerun}")
        return 0
    spec = api.sweep_spec(args.target, task=args.task, overrides=args.rest, n_trials=args.n_trials,
                          study=args.study, datasets=args.datasets or ())
    if args.launcher == "slurm":
        submitted = api.sweep_on_slurm(spec, args.storage, args.workers, args.worker_index, args.launcher_config,
                                       args.data_dir, args.work_dir, args.tracking_uri)
        return report_submission(submitted, args.follow and api.follow_sweep)
    starting()
    summary = api.sweep(spec, args.storage, args.workers, args.worker_index, args.data_dir, args.work_dir,
                        args.tracking_uri, verbose=args.verbose)
    counts = ", ".join(f"{n} {state.lower()}" for state, n in sorted(summary.counts.items()))
    print(f"study '{summary.study}' ({summary.storage}): {counts or 'no trials'}; "
          f"target {summary.n_trials} finished")
    if summary.best_value is not None:
        print(f"  best {spec.metric}: {summary.best_value:.4f} with "
              + ", ".join(f"{k}={v}" for k, v in summary.best_params.items()))
    browse, export = api.sweep_commands(summary, args.storage, args.data_dir, args.tracking_uri)
    print(f"  MLflow parent run {summary.parent_run_id} in {hide_passwords(summary.tracking_uri)}")
    print(f"  browse: {browse}")
    print(f"  export the best: {export}")
    failed_workers = [code for code in summary.worker_exit_codes if code != 0]
    return 0 if summary.complete and not failed_workers else 1
