"""Two-stage fine-tuning (issue 26 item 4): an experiment model `finetuned: {from: M, task: X}` is the best
checkpoint of fine-tuning M on X, a planned run of its own. Checked on the staged BioASQ data under micro:
Bio-ELECTRA's BioASQ yes/no -> BLURB's BioASQ (the same labels, yes/no: the head is carried over) and
PubMedQA -> BioASQ (yes/no/maybe vs yes/no: a new head), with the second stage's weights at its start
compared, tensor by tensor, with the first stage's best checkpoint."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from mlflow.tracking import MlflowClient

from ablations import results
from ablations.experiment import FINETUNE, Store, load_experiment, plan_lines, resolve
from ablations.experiment.runner import run_experiment
from ablations.places import shown_place
from ablations.run.export import HeadInit
from ablations.run.finetune import run_finetune
from bioablate_core.errors import ConfigError
from tests.cli import bioablate_in_process

EXPERIMENT = """
name: two_stage
overrides: {keep_checkpoints: true}  # the first stages' best.ckpt stays, to compare with
models:
  base: {name_or_path: random-bert, finetune: false}
  yesno-first: {finetuned: {from: base, task: bioelectra-yesno}}
  pubmedqa-first: {finetuned: {from: base, task: pubmedqa, seed: 2}}
tasks: [bioasq]
table: {rows: task, columns: model}
"""


def load(tmp_path, data_dir, text: str = EXPERIMENT):
    path = tmp_path / "two_stage.yaml"
    path.write_text(text)
    return load_experiment(path, profile="micro", data_dir=str(data_dir), work_dir=str(tmp_path / "work"))


def finetune_runs(uri: str) -> list:
    client = MlflowClient(uri)
    found = client.get_experiment_by_name("finetune")
    return client.search_runs([found.experiment_id], "tags.fingerprint != ''") if found else []


def test_first_stages_are_planned_runs_and_the_second_stages_wait_for_them(tmp_path, data_dir):
    experiment = load(tmp_path, data_dir)
    assert experiment.stage_order() == ["yesno-first", "pubmedqa-first"]
    plan = resolve(experiment, Store(experiment.store()[1]))
    first = plan.stages["yesno-first"]
    assert (first.kind, first.status, first.cell) == (FINETUNE, results.NOT_RUN, None)
    assert (first.config.task, first.config.seed, first.config.model.name_or_path) == ("bioelectra-yesno", 1,
                                                                                        "random-bert")
    assert plan.stages["pubmedqa-first"].config.seed == 2
    # where the run keeps its best weights: the second stage's model
    assert first.model_dir == tmp_path / "work" / "runs" / first.fingerprint / "model"
    assert [(c.name, c.status, c.reason) for c in plan.cells] == [
        ("yesno-first/bioasq/s1", results.BLOCKED,
         "needs first-stage fine-tuning 'yesno-first', which has not finished"),
        ("pubmedqa-first/bioasq/s1", results.BLOCKED,
         "needs first-stage fine-tuning 'pubmedqa-first', which has not finished")]
    assert list(plan_lines(experiment))[1:] == [
        "  compute       finetune yesno-first = base fine-tuned on bioelectra-yesno (s1), first stage",
        "  compute       finetune pubmedqa-first = base fine-tuned on pubmedqa (s2), first stage",
        "  compute later finetune yesno-first/bioasq/s1 (after first stage 'yesno-first')",
        "  compute later finetune pubmedqa-first/bioasq/s1 (after first stage 'pubmedqa-first')",
        "  2 compute, 2 compute later"]


def test_a_first_stage_shared_with_a_plain_run_of_the_same_config_is_one_run(tmp_path, data_dir):
    """The first stage is fingerprinted as `bioablate finetune` of its config: the same run as the base
    model's own cell on that task (keep_model does not enter a fingerprint)."""
    experiment = load(tmp_path, data_dir, EXPERIMENT.replace("finetune: false", "finetune: true")
                      .replace("tasks: [bioasq]", "tasks: [bioasq, bioelectra-yesno]"))
    plan = resolve(experiment, Store(experiment.store()[1]))
    [base_yesno] = [c for c in plan.cells if c.name == "base/bioelectra-yesno/s1"]
    assert base_yesno.fingerprint == plan.stages["yesno-first"].fingerprint


@pytest.mark.parametrize("models, message", [
    ("{base: {name_or_path: random-bert}, two: {finetuned: {from: nobody, task: bioasq}}}",
     "models.two.finetuned.from: 'nobody' is not a model of this experiment (base, two)"),
    ("{base: {name_or_path: random-bert}, two: {finetuned: {from: base}}}",
     "models.two.finetuned.task: missing; give the dataset of the first stage (bioablate list tasks)"),
    ("{base: {name_or_path: random-bert}, two: {finetuned: {from: base, task: squad-v9}}}",
     "models.two.finetuned.task: unknown task 'squad-v9'; known: "),
    ("{base: {name_or_path: random-bert}, two: {finetuned: {from: base, task: bioasq, epochs: 3}}}",
     "models.two.finetuned: unknown key 'epochs'; valid keys: from, task, seed"),
    ("{base: {name_or_path: random-bert}, two: {name_or_path: random-bert, finetuned: {from: base, task: gad}}}",
     "models.two: give exactly one of `name_or_path`"),
    ("{a: {finetuned: {from: b, task: gad}}, b: {finetuned: {from: a, task: gad}}}",
     "models: `init` / `finetuned.from` cycle a -> b -> a"),
])
def test_a_wrong_two_stage_model_is_one_line_naming_the_key(tmp_path, data_dir, models, message):
    text = f"name: bad\nmodels: {models}\ntasks: [bioasq]\ntable: {{rows: task, columns: model}}\n"
    with pytest.raises(ConfigError) as error:
        load(tmp_path, data_dir, text)
    assert message in str(error.value) and "\n" not in str(error.value)


class StartWeights(pl.Callback):
    """The encoder's and the head's weights as fitting starts."""

    def on_fit_start(self, trainer, module) -> None:
        self.encoder = {k: v.detach().clone() for k, v in module.encoder.state_dict().items()}
        self.head = {k: v.detach().clone() for k, v in module.head.state_dict().items()}


def best_checkpoint(planned) -> dict[str, torch.Tensor]:
    path = planned.model_dir.parent / "checkpoints" / "best.ckpt"
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


def part(state: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


@pytest.mark.slow
def test_two_stage_models_run_carry_the_encoder_and_the_head_where_labels_agree_and_reuse_the_first_stage(
        tmp_path, data_dir):
    experiment = load(tmp_path, data_dir)
    uri = experiment.store()[1]
    summary = run_experiment(experiment, echo=lambda _: None)
    assert summary.ok and summary.count(results.COMPUTED) == 4
    assert [(o.kind, o.name) for o in summary.outcomes[:2]] == [(FINETUNE, "yesno-first"), (FINETUNE, "pubmedqa-first")]
    plan = resolve(experiment, Store(uri))
    assert all(p.status == results.FINISHED for p in [*plan.stages.values(), *plan.cells])
    tags = {(r.data.tags["task"], r.data.tags["model"]): r.data.tags for r in finetune_runs(uri)}
    # the model folders as the tags show them: relative to the work directory
    yesno_dir, pubmedqa_dir = (shown_place(plan.stages[n].model_dir, experiment.store()[0], "work_dir")
                               for n in ("yesno-first", "pubmedqa-first"))
    head_init = {key: HeadInit.from_tag(run_tags["head_init"]) for key, run_tags in tags.items()}
    assert head_init[("bioasq", yesno_dir)] == HeadInit(carried_from="bioelectra-yesno")
    assert head_init[("bioasq", pubmedqa_dir)] == HeadInit(reason="pubmedqa's labels yes, no, maybe are not bioasq's")
    assert head_init[("bioelectra-yesno", "random-bert")] == HeadInit()

    # the second stage starts from the first stage's best checkpoint: the encoder always, the head where the
    # labels agree (exported in the transformers format: its classifier is ours / 1e-4, hence allclose)
    for name, carried in (("yesno-first", True), ("pubmedqa-first", False)):
        [cell] = [c for c in plan.cells if c.cell.model == name]
        start = StartWeights()
        run_finetune(cell.config, force=True, callbacks=[start])
        best = best_checkpoint(plan.stages[name])
        encoder = part(best, "encoder.")
        assert start.encoder.keys() == encoder.keys()
        assert all(torch.equal(start.encoder[k], encoder[k]) for k in encoder), name
        head = part(best, "head.")
        if carried:
            assert all(torch.allclose(start.head[k], head[k], rtol=1e-5, atol=1e-7) for k in head)
        else:  # yes/no/maybe -> yes/no: a new output layer of the second task's size
            assert head["out.weight"].shape[0] == 3 and start.head["out.weight"].shape[0] == 2

    # run again: every run is found by its fingerprint, the first stages are not trained again
    count = len(finetune_runs(uri))
    again = run_experiment(experiment, echo=lambda _: None)
    assert again.ok and again.count(results.REUSED) == 4 and again.count(results.COMPUTED) == 0
    assert len(finetune_runs(uri)) == count

    # the single-run path: a fine-tuned model folder as --model (its path on this machine: the store shows it
    # relative to its work directory), saying what became of the head
    yesno_dir, pubmedqa_dir = (str(plan.stages[n].model_dir) for n in ("yesno-first", "pubmedqa-first"))
    out = bioablate_in_process("finetune", "--task", "bioasq", "--model", yesno_dir, "--profile", "micro",
                               "--data-dir", str(data_dir), "--work-dir", str(tmp_path / "single"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"  head: carried over from bioelectra-yesno (the labels agree); encoder from {yesno_dir}" in out.stdout
    out = bioablate_in_process("finetune", "--task", "bioasq", "--model", pubmedqa_dir, "--profile", "micro",
                               "--data-dir", str(data_dir), "--work-dir", str(tmp_path / "single"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (f"  head: pubmedqa's labels yes, no, maybe are not bioasq's: a new head on the encoder of "
            f"{pubmedqa_dir}") in out.stdout
