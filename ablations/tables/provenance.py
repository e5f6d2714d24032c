"""What produced a table, as the footer of its files: the experiment, profile, runs by status, their
wall time (MLflow's start/end times), the machine that rendered it and the code's git state; and the line
under a table's title saying what its runs were (`setup_line`: model and size, epochs, learning rate, batch
size, capped example counts, extractive QA's answer merging rule), written from the runs' resolved configs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ablations.results import CellRun
from ablations.tables.stats import STATUSES
from bioablate_core.hardware import machine


def _fetch_runs(tracking_uri: str, run_ids: list[str]) -> dict[str, Any]:
    """The stored runs by id, each read once (a table's header sums them three ways); missing ones left out."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    found = {}
    for run_id in dict.fromkeys(run_ids):
        try:
            found[run_id] = client.get_run(run_id)
        except MlflowException:
            continue
    return found


def _run_times(runs: dict[str, Any], run_ids: list[str]) -> dict[str, Any]:
    """Total and span of the runs' wall times, from MLflow's start/end times; their code commits."""
    total, starts, ends, commits = 0.0, [], [], []
    for run_id in run_ids:
        run = runs.get(run_id)
        if run is None:
            continue
        if run.info.start_time and run.info.end_time:
            total += (run.info.end_time - run.info.start_time) / 1000
            starts.append(run.info.start_time)
            ends.append(run.info.end_time)
        commit = run.data.tags.get("git_commit")
        if commit and commit not in commits:
            commits.append(commit)
    span = (max(ends) - min(starts)) / 1000 if starts else 0.0
    return {"total_s": total, "span_s": span, "commits": commits, "timed": len(starts)}


CODE_DIRS = ("ablations", "bioablate_core", "lightning_modules", "datamodules", "experiments")


def code_state() -> str:
    """The commit, and the code files that differ from it (modified or untracked), if any: numbers
    rendered from a dirty tree are not reproducible from the commit alone."""
    import subprocess

    from ablations.config import REPO_ROOT
    from ablations.run.tracking import git_commit

    commit = git_commit()
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", *CODE_DIRS], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return f"{commit} (working tree state unknown)"
    # tracked files changed, and new Python files: an untracked YAML in experiments/ (another experiment, a
    # probe) changes nothing this table was computed with
    changed = [line[3:] for line in out.stdout.splitlines()
               if not line.startswith("??") or line.endswith(".py")] if out.returncode == 0 else []
    if not changed:
        return commit
    shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
    return f"{commit} plus uncommitted changes to {shown}"


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _status_counts(statuses: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{counts[s]} {s.lower().replace('_', ' ')}" for s in STATUSES if s in counts) or "none"


def provenance(name: str, profile: str | None, runs: Sequence[CellRun], tracking_uri: str,
               stages: Sequence[tuple[str, str, str | None]] = ()) -> list[str]:
    """Lines saying what produced a table: experiment, profile, runs by status (fine-tuning runs, and the
    pretraining stages as (name, status, MLflow run id)), wall time, machine, code."""
    finetune_ids = list(dict.fromkeys(r.run_id for r in runs if r.run_id))
    stage_ids = list(dict.fromkeys(run_id for _, _, run_id in stages if run_id))
    stored = _fetch_runs(tracking_uri, finetune_ids + stage_ids)
    finetune, pretrain = _run_times(stored, finetune_ids), _run_times(stored, stage_ids)
    both = _run_times(stored, finetune_ids + stage_ids)
    counts = f"{len(runs)} fine-tuning runs planned ({_status_counts(r.status for r in runs)})"
    if stages:
        counts += f"; {len(stages)} pretraining stage(s) ({_status_counts(status for _, status, _ in stages)})"
    split = (f" (pretraining {duration(pretrain['total_s'])}, fine-tuning {duration(finetune['total_s'])})"
             if stages else "")
    return [
        f"experiment: {name}",
        f"profile: {profile or 'unknown'}",
        f"runs: {counts}",
        f"wall time: {duration(both['total_s'])} summed over {both['timed']} runs{split}; first start to last "
        f"end {duration(both['span_s'])} (MLflow's start/end times)",
        f"machine (rendering host): {machine()}",
        f"code: rendered at commit {code_state()}; runs logged at commit(s) "
        f"{', '.join(c[:12] for c in both['commits']) or 'unknown'}",
        f"tracking store: {shown_store(tracking_uri)}",
    ]


def rendered_from_runs(table_md: Path) -> bool:
    """Whether the markdown table file `table_md` (its header, `provenance`) counts any fine-tuning run
    other than those not run ("runs: 6 fine-tuning runs planned (6 finished)"): a table that shows
    results. False where there is no such file or line."""
    try:
        lines = table_md.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    for line in lines:
        counts = re.match(r"- runs: \d+ fine-tuning runs planned \(([^()]*)\)", line)
        if counts:
            return any(not part.strip().endswith("not run") for part in counts.group(1).split(","))
    return False


def shown_store(tracking_uri: str) -> str:
    """The store as a shipped header may show it: a local file by its scheme and file name (its folder is
    a path on the machine that rendered it, often a temporary one), a server without its password."""
    from bioablate_core.databases import redact

    scheme, _, rest = tracking_uri.partition("://")
    if not rest:  # a bare path: MLflow's file store
        return f"file store {Path(tracking_uri).name} (a local folder)"
    if scheme in ("sqlite", "file"):
        return f"{scheme} store {Path(rest).name} (a local file, in the work directory by default)"
    return redact(tracking_uri)


def vocab_provenance(name: str, seconds: float | None, profile: str | None = None,
                     datasets: Sequence[str] = ()) -> list[str]:
    """The header of a vocabulary table (Table 1 or 8): no runs, computed in `seconds`; over the `datasets`
    its `profile` lists where it reads any (Table 8 under micro: three of the thirteen)."""
    what = "no runs: computed from the staged vocabularies" + (" and datasets" if datasets else "")
    listed = (f"profile: {profile} ({len(datasets)} datasets: {', '.join(datasets)}; {what})" if datasets
              else f"profile: none applies ({what})")
    return [f"experiment: {name}", listed,
            *([f"wall time: {duration(seconds)} to compute"] if seconds is not None else []),
            f"machine: {machine()}", f"code: commit {code_state()}"]


def file_footer(lines: list[str], fmt: str) -> str:
    """The provenance lines as the foot of a table file in `fmt`, after the table and its notes: a markdown
    list under a rule, LaTeX comments, nothing in a CSV (it stays plain CSV)."""
    if fmt == "markdown":
        return "\n---\n\n" + "\n".join(f"- {line}" for line in lines) + "\n"
    if fmt == "latex":
        return "".join(f"% {line}\n" for line in lines)
    return ""  # csv stays plain csv


@dataclass(frozen=True)
class RunSetup:
    """What one planned run of a table is, from its resolved config (built by tables/report.py)."""

    task: str
    row: str  # the row and column it goes to, as the table shows them
    column: str
    model: str  # its name or path, and size: "random-bert (2 layers × 64 hidden)"
    epochs: int
    lr: float
    batch_size: int
    max_train_examples: int | None  # None: the whole training split
    max_eval_examples: int | None
    # its task is scored by question (ranking, BioASQ): a capped evaluation keeps whole questions
    eval_by_question: bool = False
    answers: str = ""  # extractive QA: the rule its answers are merged by, named after its source


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _cap(value: int | None) -> str:
    return "all" if value is None else f"{value:,}"


# (RunSetup field, one value for every run, the name before several values, how a value reads)
_SETUP_FIELDS: tuple[tuple[str, Callable[[Any], str], str, Callable[[Any], str]], ...] = (
    ("model", str, "models", str),
    ("epochs", lambda v: _plural(v, "epoch"), "epochs", str),
    ("lr", lambda v: f"learning rate {v:g}", "learning rate", lambda v: f"{v:g}"),
    ("batch_size", lambda v: f"batch size {v}", "batch size", str),
    ("max_train_examples", lambda v: f"at most {v:,} training examples", "training examples at most", _cap),
    ("max_eval_examples", lambda v: f"at most {v:,} evaluation examples", "evaluation examples at most",
     _cap),
)


def _several(items: list[tuple[RunSetup, Any]], show: Callable[[Any], str]) -> str:
    """Values that differ between runs, each with where it applies: by task, column or row, whichever the
    value follows ("0.0002 (bc5-chem), 0.0001 (gad)"); else the distinct values."""
    for axis in ("task", "column", "row"):
        value_of: dict[str, Any] = {}
        if all(value_of.setdefault(getattr(run, axis), value) == value for run, value in items):
            groups: dict[Any, list[str]] = {}
            for where, value in value_of.items():
                groups.setdefault(value, []).append(where)
            return ", ".join(f"{show(value)} ({', '.join(where)})" for value, where in groups.items())
    return " / ".join(show(v) for v in dict.fromkeys(value for _, value in items))


def setup_line(runs: Sequence[RunSetup]) -> str:
    """One line saying what a table's runs were: model and size, epochs, learning rate, batch size, the
    training / evaluation examples where a run is capped, and the rule extractive-QA runs merge answers by;
    a value that differs says where."""
    if not runs:
        return ""
    parts = []
    for field, one, name, show in _SETUP_FIELDS:
        items = [(run, getattr(run, field)) for run in runs]
        values = list(dict.fromkeys(value for _, value in items))
        if field.startswith("max_") and values == [None]:
            continue  # not capped: the whole splits
        parts.append(one(values[0]) if len(values) == 1 else f"{name} {_several(items, show)}")
        if field == "max_eval_examples":
            whole = dict.fromkeys(run.task.partition("@fold")[0] for run in runs
                                  if run.eval_by_question and run.max_eval_examples is not None)
            if whole:  # the cap counts instances, but no question is cut: it may take more
                parts[-1] += f" (whole questions for {', '.join(whole)}: all their candidates or snippets)"
    answered = [(run, run.answers) for run in runs if run.answers]
    if answered:
        rules = list(dict.fromkeys(rule for _, rule in answered))
        parts.append(rules[0] if len(rules) == 1 else _several(answered, str))
    return "Runs: " + "; ".join(parts) + " (from the runs' resolved configs)."
