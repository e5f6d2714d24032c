"""The `bioablate` commands that compute runs or read them back: `finetune`, `pretrain`, `run`, `status` and
`table` (ablations/cli/ parses their arguments). Heavy imports stay inside the commands: `--help` loads none.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ablations import api
from bioablate_core import threads
from bioablate_core.claims import EXIT_CLAIM_HELD
from bioablate_core.databases import hide_passwords
from bioablate_core.distributed import is_ddp_worker
from bioablate_core.errors import ConfigError, UnknownNameError
from bioablate_core.files import writable_dir
from bioablate_core.limits import check_machine

# the scores `bioablate finetune` prints: the primary one, F1 with its parts, extractive QA's measures
SHOWN = ("score", "f1", "precision", "recall", "strict", "lenient", "mrr", "em")


def table_files(table) -> str:
    """What a rendered table wrote (`api.Table`), for the line that says where."""
    figures = "figure .png, .svg, .pdf" if table.figures else "no figures (figures=false)"
    return f"table.md, .tex, .csv; {figures}"


def cmd_finetune(args: argparse.Namespace) -> int:
    if args.task is None and not args.config:
        raise ConfigError("--task is required (or a --config file that sets `task`)")
    cfg = api.config(args.profile, [*_bar_unless_terminal(), *args.overrides], config_files=args.config,
                     task=args.task, seed=args.seed,
                     data_dir=args.data_dir, work_dir=args.work_dir, tracking_uri=args.tracking_uri,
                     **{"model.name_or_path": args.model, "datasets": args.datasets})
    check_machine(cfg)  # here, before the seconds of importing Lightning
    result = _computed(cfg.task, lambda: api.finetune(cfg, force=args.force, wait=args.wait,
                                                      progress_lines=not sys.stderr.isatty()))
    if result is None:
        return 0
    for line in result.head_init.describe(cfg.model.name_or_path):  # a fine-tuned model folder's head
        print(line)
    print("  best dev: " + (", ".join(f"{k}={v:.4f}" for k, v in sorted(result.best_dev.items()) if k in SHOWN)
                            or "none (the dataset has no dev split: test scores the last epoch)"))
    print("  test:     " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(result.test.items()) if k in SHOWN))
    print("\n".join(api.browse_lines(result, cfg)))
    return 0


def cmd_pretrain(args: argparse.Namespace) -> int:
    cfg = api.pretrain_config(args.profile, [*_bar_unless_terminal(), *args.overrides], seed=args.seed,
                              data_dir=args.data_dir, work_dir=args.work_dir, tracking_uri=args.tracking_uri,
                              **{"pretrain.corpus": args.corpus, "pretrain.vocab": args.vocab,
                                 "pretrain.masking": args.masking, "pretrain.objective": args.objective,
                                 "pretrain.adversarial": args.adversarial, "pretrain.init": args.init,
                                 "trainer.devices": args.devices, "trainer.num_nodes": args.num_nodes,
                                 "trainer.strategy": args.strategy})
    if args.dry_run:
        print("\n".join(api.pretrain_plan(cfg)))
        return 0
    if args.launcher != "slurm":  # a job's node is checked where it runs
        check_machine(cfg)
    if args.launcher == "slurm":
        job = api.pretrain_on_slurm(cfg, args.launcher_config, args.nodes, args.gpus_per_node, args.force)
        return submitted(job, args.follow and api.follow_pretraining)
    result = _computed("pretrain", lambda: api.pretrain(cfg, force=args.force, wait=args.wait))
    if result is None:
        return 0
    if result.losses:
        print(f"  {'loss' if cfg.pretrain.objective == 'electra' else 'MLM loss'}: "
              f"{result.losses[0]:.3f} -> {result.losses[-1]:.3f}")
    print(f"  model: {result.model_dir}  (bioablate finetune --model {result.model_dir} --task ...)")
    print("\n".join(api.browse_lines(result, cfg)))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    api.check_parallelism(args.devices, args.ddp, args.runs_per_device)  # before the experiment loads
    table_statistics(args, None)
    overrides = list(args.overrides)
    if args.ddp:
        overrides += [f"trainer.devices={args.devices}", "trainer.strategy=ddp"]
    experiment = api.experiment(args.experiment, profile=args.profile, overrides=overrides,
                                data_dir=args.data_dir, work_dir=args.work_dir, tracking_uri=args.tracking_uri,
                                **_max_runs(args))
    table_statistics(args, experiment)
    if args.dry_run:
        for line in api.plan(experiment):  # printed as each run is resolved
            print(line, flush=True)
        return 0
    if args.launcher == "slurm":
        return _run_on_slurm(args, experiment)
    for cfg in experiment.machine_configs:  # before the parent run exists
        check_machine(cfg)
    starting()
    summary = api.run(experiment, devices=args.devices, ddp=args.ddp, runs_per_device=args.runs_per_device,
                      wait=args.wait)
    if is_ddp_worker():  # a process Lightning started for another rank: rank 0 reports
        return 0
    print("\n".join(summary.lines()))
    print()
    _print_table(api.table(experiment))
    store = hide_passwords(summary.tracking_uri)
    print(f"MLflow: {store} (bioablate ui --tracking-uri {store}); "
          f"parent run {summary.parent_run_id}")
    if summary.only_held:
        return EXIT_CLAIM_HELD  # as `finetune --no-wait`: another process holds some of the runs
    return 0 if summary.ok else 1


def _computed(label: str, compute):
    """Say the thread choice, compute the run, then its first line; None in a DDP worker (rank 0 reports)."""
    starting()
    result = compute()
    if result.run_id is None:
        return None
    state = "reused finished run" if result.reused else "finished"
    print(f"{label}: {state} {result.run_id} (fingerprint {result.fingerprint})")
    return result


def _bar_unless_terminal() -> list[str]:
    """Lightning's progress bar only on a terminal: written to a file it is one rewritten line per step
    ("Epoch 0/0 ... v_num"). An override given after it still sets the bar."""
    return [] if sys.stderr.isatty() else ["trainer.progress_bar=false"]


def submitted(job, follow) -> int:
    """A SLURM submission's line; with `follow` (the api's follow function), its end: exit 0 if it succeeded."""
    print(job.line())
    if not follow:
        return 0
    line, ok = follow(job)
    print(line)
    return 0 if ok else 1


def starting() -> None:
    """The input is checked and the work starts: say the threads and wait policy chosen (rank 0 only)."""
    if not is_ddp_worker():
        threads.announce()


def _print_table(table) -> None:
    print(table.text, end="")  # also saved and logged
    print(f"table files: {table.out_dir}/ ({table_files(table)})")


def _run_on_slurm(args: argparse.Namespace, experiment) -> int:
    if args.ddp or args.devices != 1 or args.runs_per_device != 1:
        raise ConfigError("--devices/--ddp/--runs-per-device do not apply with --launcher slurm: "
                          "set launcher.gpus_per_run")
    submission = api.experiment_on_slurm(experiment, args.launcher_config)
    print("\n".join(submission.lines()))
    if not args.follow:
        print(f"follow with: bioablate status {experiment.path} --profile {experiment.profile}"
              + (f" --work-dir {args.work_dir}" if args.work_dir else "")
              + (f" --tracking-uri {args.tracking_uri}" if args.tracking_uri else ""))
        return 0
    lines, ok = api.follow_experiment(experiment, submission.job_ids())
    print("\n".join(lines))
    print()
    _print_table(api.table(experiment))
    return 0 if ok else 1


def _max_runs(args: argparse.Namespace) -> dict:
    """`--max-runs N` for the planner; none given: its default limit."""
    return {} if args.max_runs is None else {"max_runs": args.max_runs}


def cmd_status(args: argparse.Namespace) -> int:
    api.register_datasets(getattr(args, "datasets", None) or ())  # a user dataset's tasks, before the plan names them
    experiment = api.experiment(args.experiment, profile=args.profile, overrides=args.overrides,
                                data_dir=args.data_dir, work_dir=args.work_dir, tracking_uri=args.tracking_uri,
                                **_max_runs(args))
    print("\n".join(api.status(experiment)))
    return 0


def table_statistics(args: argparse.Namespace, experiment) -> None:
    """`--correction`, `--effect`, `--cost` over the YAML's table section (checked before anything loads)."""
    from dataclasses import replace

    if getattr(args, "correction", None) is not None and args.correction not in api.corrections():
        raise UnknownNameError("correction", args.correction, api.corrections())
    if experiment is None or experiment.kind != "finetune":
        return
    given = {"correction": args.correction, "effect": args.effect, "cost": args.cost}
    experiment.layout = replace(experiment.layout, **{k: v for k, v in given.items() if v is not None})


def cmd_table(args: argparse.Namespace) -> int:
    if args.format not in api.table_formats():  # before loading anything
        raise UnknownNameError("table format", args.format, api.table_formats())
    if args.from_dir is not None:
        return _table_from_bundle(args)
    if args.experiment is None:
        raise ConfigError("table: name an EXPERIMENT, or render a bundle with --from DIR --out OUT")
    if args.out:  # before the store is read: a table with nowhere to go is refused first
        writable_dir(Path(args.out), "table folder (--out)")
    table_statistics(args, None)
    profile, overrides = args.profile, list(args.overrides)
    if profile is None:  # the invocation the store has runs of, before loading under any profile
        profile, overrides = _stored_invocation(args)
    experiment = api.experiment(args.experiment, profile=profile, overrides=overrides, data_dir=args.data_dir,
                                work_dir=args.work_dir, tracking_uri=args.tracking_uri, **_max_runs(args))
    table_statistics(args, experiment)
    table = api.table(experiment, "stats" if args.stats else args.format, Path(args.out) if args.out else None)
    print(table.text, end="")
    if table.recorded is not None:
        print(f"bioablate: used the plan recorded at {table.recorded.recorded_at} ({table.recorded.path}) because "
              "no data directory was given", file=sys.stderr)
    print(f"written to {table.out_dir}/ ({table_files(table)}); MLflow: "
          f"{hide_passwords(table.tracking_uri)}, experiment 'tables'",
          file=sys.stderr)  # stderr: stdout is the table alone (`--format csv > t.csv`)
    return 0


def _table_from_bundle(args: argparse.Namespace) -> int:
    """`table --from DIR --out OUT`: the bundle's table alone, no store read or written."""
    if args.experiment is not None or args.out is None:
        raise ConfigError("table --from DIR renders that bundle alone: give --out OUT and no EXPERIMENT")
    writable_dir(Path(args.out), "table folder (--out)")
    print(api.table_from_bundle(args.from_dir, args.out, "stats" if args.stats else args.format), end="")
    print(f"written to {args.out}/ (table.md, .tex, .csv, figures and bundle.jsonl) from the bundle in "
          f"{args.from_dir}/", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    done, uri = api.import_bundle(args.folder, args.work_dir, args.tracking_uri)
    print(f"imported {done.imported} finished run(s) of {done.table} into {hide_passwords(uri)} "
          f"({done.present} already there); `bioablate run {done.table}` reuses them by fingerprint")
    return 0


def _stored_invocation(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """`table` without --profile: the (profile, overrides) of the one invocation of the experiment the store
    has runs of (only those with the given overrides, if any were given), said on stderr; none: the
    experiment's default profile, said too; several: a one-line error naming them and how to pick one. Read
    from the YAML's name and the store alone: loading the experiment under its default profile can fail
    (its model's package not installed) where the runs in the store are of another profile."""
    overrides = list(args.overrides)
    name, tracking_uri, found = api.stored_invocations(args.experiment, args.work_dir, args.tracking_uri)
    if name is None:  # no name: loading the experiment says what is wrong; not fine-tuning: no runs
        return None, overrides
    if overrides:
        found = [i for i in found if list(i.overrides) == overrides]
    given = f" with overrides {' '.join(overrides)}" if overrides else ""
    if not found:
        print(f"bioablate: no run of experiment '{name}'{given} is in {tracking_uri}: rendering its default "
              "profile (pick another with --profile P)", file=sys.stderr)
        return None, overrides
    if len(found) > 1:
        raise ConfigError(f"experiment '{name}'{given} has runs of {len(found)} invocations in {tracking_uri}: "
                          f"{'; '.join(i.describe() for i in found)}; pick one with --profile P and its overrides "
                          f"(e.g. bioablate table {args.experiment} {found[0].options()})")
    invocation = found[0]
    print(f"bioablate: rendering the runs of {invocation.options()}, the one invocation of experiment '{name}' "
          f"in {tracking_uri}", file=sys.stderr)
    return invocation.profile, list(invocation.overrides)
