"""The run configuration: one structured schema, each layer merged and validated through bioablate_core.schema.

A fine-tuning run's config is built in layers, later ones winning:

    schema defaults  ->  the packaged profiles/<profile>.yaml  ->  `key=value` overrides  ->  CLI flags

Unknown keys and wrongly typed values are `ConfigError`s that name the key and list the valid ones, so a
typo never silently falls back to a default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from omegaconf import MISSING, DictConfig, OmegaConf

from ablations.checks import check_names, check_run_config
from bioablate_core.errors import ConfigError
from bioablate_core.fingerprints import digest
from bioablate_core.identity import marked, markers, marks
from bioablate_core.limits import MAX_ACCUMULATE, MAX_ALUM_STEPS, MAX_BATCH, MAX_STEPS
from bioablate_core.packaged import resolve_config
from bioablate_core.schema import bounded, choice, defaults, dotlist, load_yaml, merge
from datamodules.pretrain.choice_names import MASKING_MODES, SCHEDULES
from datamodules.qa_merges import QA_MERGES
from datamodules.relation_inputs import RE_INPUTS
from datamodules.spec import MAX_SEQUENCE, MIN_SEQUENCE
from datamodules.tagging import SCHEMES, SUBTOKEN_LABELS
from lightning_modules.choice_names import CLASSIFIERS, HEADS, OBJECTIVES, OPTIMIZERS, RE_FEATURES

PRETRAIN_EXPERIMENT = "pretrain"  # the MLflow experiment of pretraining runs (`bioablate pretrain`, experiment stages)

# The folder holding the packages: the checkout, or site-packages once installed. Packaged YAML files are
# found through bioablate_core.packaged, never from here.
REPO_ROOT = Path(__file__).resolve().parents[1]
PROFILES = ("micro", "mini", "base")
# Below this, a run trains on nothing meaningful: a corpus cap under one document's worth of words keeps a
# single document (MIN_SEQUENCE, the fewest input positions, is the data layer's: datamodules/spec.py).
MIN_CORPUS_WORDS = 1000
# The paper tunes fine-tuning epochs over 2-60; far above, a typo (epochs=1000000) would run for months.
MAX_EPOCHS = 1000


# One rule for every run's identity (bioablate_core.identity): each schema field says which kinds of run its value
# decides the result of. A fine-tuning run's fingerprint hashes the keys that decide fine-tuning results, a
# pretraining run's those that decide pretraining results (`result_keys`); everything else (how a run is shown,
# speed knobs that never change a number) is left out, so changing it finds the same finished run. `place`:
# where a run goes or how it is launched, left out of a recorded plan's config digest too.
FINETUNE_RUN, PRETRAIN_RUN = "finetune", "pretrain"
_GROUPS = {"finetune": frozenset({FINETUNE_RUN}), "pretrain": frozenset({PRETRAIN_RUN}),
           "both": frozenset({FINETUNE_RUN, PRETRAIN_RUN}), "none": frozenset(), "place": frozenset()}
ft, pt, both, inert, place = markers(*_GROUPS)  # each marks a field with its group, in this order


@dataclass
class ModelConfig:
    # A Hugging Face-format directory, a named model (see lightning_modules/models.py), or `random-bert`:
    # a freshly initialised BERT of the size below, with the vocabulary `vocab`.
    name_or_path: str = ft("random-bert")
    vocab: str = ft("bert-base-uncased")  # random-bert only: a staged vocabulary name or a vocab.txt path
    lowercase: bool = ft(True)
    hidden_size: int = both(bounded(64, ge=1))
    num_layers: int = both(bounded(2, ge=1))
    num_heads: int = both(bounded(2, ge=1))
    intermediate_size: int = both(bounded(256, ge=1))
    max_position_embeddings: int = both(bounded(512, ge=MIN_SEQUENCE, le=MAX_SEQUENCE))
    # A model folder whose tokenizer has more tokens than its embedding matrix has rows is an error (a
    # vocabulary of another model); true: the deliberate case, rows added at random (fine-tuning learns them).
    # It permits a run the model check refuses, and computes what it always did: in no fingerprint.
    resize_embeddings: bool = inert(False)


@dataclass
class FinetuneConfig:
    lr: float = ft(bounded(5e-5, gt=0))
    batch_size: int = ft(bounded(32, ge=1, le=MAX_BATCH))
    eval_batch_size: int = ft(bounded(64, ge=1, le=MAX_BATCH))
    epochs: int = ft(bounded(3, ge=1, le=MAX_EPOCHS))
    warmup_ratio: float = ft(bounded(0.1, ge=0, le=1))
    weight_decay: float = ft(bounded(0.01, ge=0))
    dropout: float = ft(bounded(0.1, ge=0, lt=1))
    # above the model's position embeddings is an error at run time (ablations/run/finetune.py)
    # None: the dataset's own (paper: 128 GAD, 256 ChemProt/DDI, 512 QA)
    max_length: Optional[int] = ft(bounded(None, ge=MIN_SEQUENCE, le=MAX_SEQUENCE))
    # Subsampling for quick runs (micro profile); None keeps the whole split. A fixed, seed-independent
    # prefix of a seeded shuffle, so every seed and variant sees the same examples.
    max_train_examples: Optional[int] = ft(bounded(None, ge=1))
    max_eval_examples: Optional[int] = ft(bounded(None, ge=1))
    # Modeling choices of the paper's Sec. 2.4 (Tables 12-14); `bioablate list variants` shows the choices.
    # Each names an option of its registry (`choice`: the default and the options are the registry's).
    tagging: str = ft(choice(SCHEMES))  # NER/PICO tagging scheme
    head: str = ft(choice(HEADS))  # NER/PICO classification layer
    subtoken_labels: str = ft(choice(SUBTOKEN_LABELS))  # the sub-tokens a word's loss is on (its first, or all)
    re_input: str = ft(choice(RE_INPUTS))  # relation input transform
    re_feature: str = ft(choice(RE_FEATURES))  # relation featurizer (entity-start: markers only)
    classifier: str = ft(choice(CLASSIFIERS))  # [CLS]/relation classifier
    # Extractive QA (datamodules/qa_spans.py): context tokens shared by overlapping windows (null: a third
    # of the window, BioBERT's 128 of 384) and the longest answer span, in tokens (BioBERT: 30).
    qa_stride: Optional[int] = ft(bounded(None, ge=0))
    max_answer_length: int = ft(bounded(30, ge=1))
    qa_merge: str = ft(choice(QA_MERGES))  # a question's answers over its snippets
    # Speed (docs/performance.md): length-bucketed training batches (sorted within large random chunks,
    # batches shuffled); the tokenization cache under <work_dir>/cache/tokenized (never changes a result).
    bucketing: bool = ft(True)
    cache_tokenized: bool = inert(True)
    # Static batch shapes (datamodules/finetune_data.py `Shapes`): widths in multiples of 32 and full
    # training batches (filler rows that add nothing to the loss), so a compiled step meets one shape per
    # width bucket. The same sums, other dropout draws: a result key.
    static_shapes: bool = ft(False)
    # ALUM adversarial fine-tuning (lightning_modules/algorithms/alum.py); same defaults as pretraining.
    # AlumConfig is defined below: the factory looks it up when a config is built.
    adversarial: bool = ft(False)
    alum: AlumConfig = ft(field(default_factory=lambda: AlumConfig()))
    # Class-weighted cross-entropy for single-label classification (Bio-ELECTRA's yes/no, 80% yes):
    # null (off) | balanced (n / (classes * count), from the training split) | [w, ...] in the dataset's label
    # order | {class: w} (others 1). datamodules/class_weights.py.
    class_weights: Any = ft(None)


@dataclass
class TrainerConfig:
    accelerator: str = ft("auto")
    devices: Any = ft(1)
    num_nodes: int = ft(bounded(1, ge=1))
    strategy: str = ft("auto")
    precision: str = both("32-true")
    num_workers: int = inert(bounded(0, ge=0))
    progress_bar: bool = inert(True)
    log_every_n_steps: int = inert(bounded(10, ge=1))  # every step's loss is logged; stored this many steps at a time
    compile: bool = inert(False)  # torch.compile the encoder (dynamic shapes); pays off on GPUs and long runs
    # pretraining with compile: torch.compile's mode; reduce-overhead replays the step as CUDA graphs
    compile_mode: str = inert("default")


@dataclass
class AlumConfig:
    """Adversarial pretraining (ALUM, Liu et al. 2020): see lightning_modules/algorithms/alum.py. Under
    finetune.alum and pretrain.alum, whose fields mark which runs it decides."""
    alpha: float = both(bounded(10.0, ge=0))  # weight of the symmetric-KL term added to the MLM loss
    sigma: float = both(bounded(1e-5, ge=0))  # std of the initial random perturbation
    epsilon: float = both(bounded(1e-5, ge=0))  # radius of the L-inf ball the perturbation is projected onto
    step_size: float = both(bounded(1e-3, gt=0))  # ascent step size
    steps: int = both(bounded(1, ge=1, le=MAX_ALUM_STEPS))  # K ascent steps


@dataclass
class PretrainConfig:
    """`bioablate pretrain`: see docs/pretraining.md. Model size comes from `model.*`."""
    corpus: str = pt("pubmed")  # pubmed | pmc | general | pubmed+pmc | general>pubmed (stages in order)
    # cap on corpus words (corpus-size curves); split evenly over parts
    max_words: Optional[int] = pt(bounded(None, ge=MIN_CORPUS_WORDS))
    min_words: int = pt(bounded(128, ge=0))  # drop documents with fewer words (the paper: abstracts under 128 words)
    dedup: bool = pt(True)  # drop exact duplicate documents
    exclude_eval_pmids: bool = pt(True)  # drop documents whose PMID is in a BLURB dataset
    vocab: str = pt("bert-base-uncased")  # staged name | vocab.txt path | train:SIZE[:cased] | init
    lowercase: bool = pt(True)
    seq_len: int = pt(bounded(128, ge=MIN_SEQUENCE, le=MAX_SEQUENCE))
    objective: str = pt(choice(OBJECTIVES))  # what is pretrained (docs/pretraining.md)
    nsp: bool = pt(False)  # bert only: next-sentence prediction (albert always uses SOP)
    masking: str = pt(choice(MASKING_MODES))  # whole words or single word pieces
    mask_rate: float = pt(bounded(0.15, gt=0, lt=1))
    mask_schedule: str = pt(choice(SCHEDULES))  # the rate over training (ramp: 5% -> 25%, +5% every 20%)
    adversarial: bool = pt(False)
    alum: AlumConfig = pt(field(default_factory=AlumConfig))
    init: str = pt("scratch")  # scratch | an HF-format directory | a named model (general-minilm)
    optimizer: str = pt(choice(OPTIMIZERS))  # with linear warmup and decay
    lr: float = pt(bounded(6e-4, gt=0))
    weight_decay: float = pt(bounded(0.01, ge=0))
    warmup_ratio: float = pt(bounded(0.1, ge=0, le=1))
    batch_size: int = pt(bounded(32, ge=1, le=MAX_BATCH))  # sequences per micro-batch (per device)
    accumulate: int = pt(bounded(1, ge=1, le=MAX_ACCUMULATE))  # micro-batches per optimizer step
    max_steps: int = pt(bounded(1000, ge=1, le=MAX_STEPS))  # optimizer steps
    checkpoint_every: int = pt(bounded(100, ge=1))  # optimizer steps between checkpoints
    grad_clip: float = pt(bounded(1.0, ge=0))  # 0: no clipping
    embedding_size: int = pt(bounded(128, ge=1))  # albert: factorized embedding size
    share_layers: bool = pt(True)  # albert: cross-layer parameter sharing
    # electra: generator width, heads and feed-forward size as a fraction of the discriminator's (ELECTRA's
    # and Bio-ELECTRA's 1/4), and the weight of replaced-token detection vs the generator's MLM loss (50)
    generator_size: float = pt(bounded(0.25, gt=0, le=1))
    discriminator_weight: float = pt(bounded(50.0, ge=0))
    # Predicted positions per row (BERT's max_predictions_per_seq): a fixed number, so the training step
    # has one static shape; a row whose draw selects more keeps this many. 32 keeps 99.99% of a 15% draw
    # on rows of 128 (whole words or pieces; BERT's 20 loses 2-4%), 48 of a 25% one. null: as many as
    # drawn (the width then changes from batch to batch). Part of the run's identity only when set.
    max_predictions: Optional[int] = pt(bounded(None, ge=1))
    # Speed choices that change the numbers (docs/performance.md), off by default. packing: several short
    # sequences to a row, attention kept within each (a block-diagonal mask, positions restarting): fewer pad
    # tokens, more sequences per batch; bert without nsp, and electra. master_weights: bf16 parameters with
    # fp32 master weights in the optimizer (needs trainer.precision=bf16-true). fused_qkv: one Linear for each
    # attention layer's query, key and value (bert, electra); split again on export.
    packing: bool = pt(False)
    master_weights: bool = pt(False)
    fused_qkv: bool = pt(False)


@dataclass
class LauncherConfig:
    """Where `--launcher slurm` sends runs (ablations/launch/, docs/cluster.md). Never part of a run's
    fingerprint: the same run computed on a laptop or a cluster is the same run."""
    partition: Optional[str] = inert(None)
    account: Optional[str] = inert(None)
    qos: Optional[str] = inert(None)
    time: str = inert("4:00:00")  # per job: minutes, H:MM:SS or D-HH:MM:SS
    gpus_per_run: int = inert(bounded(1, ge=0))  # 0 on CPU-only partitions
    cpus_per_run: int = inert(bounded(8, ge=1))  # per task (per GPU under multi-node pretraining)
    mem_gb: Optional[int] = inert(bounded(None, ge=1))  # per node; None: the partition's default
    nodes: int = inert(bounded(1, ge=1))  # pretraining: nodes per job (`bioablate pretrain --nodes`)
    gpus_per_node: Optional[int] = inert(bounded(None, ge=1))  # pretraining: tasks (ranks) per node; None: gpus_per_run
    array_parallelism: int = inert(bounded(64, ge=1))  # fine-tuning arrays: runs at a time
    max_requeues: int = inert(bounded(3, ge=0))  # preemptions / time limits survived by requeueing
    signal_delay_s: int = inert(bounded(120, ge=10))  # SIGUSR2 this long before the time limit: checkpoint and requeue
    sbatch: dict = inert(field(default_factory=dict))  # any further sbatch option, e.g. {constraint: a100}
    setup: list = inert(field(default_factory=list))  # shell lines before the job's srun (module loads, ...)


@dataclass
class RunConfig:
    task: str = ft(MISSING)
    seed: int = both(bounded(42, ge=0, lt=2**32))  # numpy's seed range
    profile: str = inert("micro")
    data_dir: Optional[str] = place(None)  # else $BIOABLATE_DATA
    work_dir: Optional[str] = place(None)  # else $BIOABLATE_WORK, else ./outputs
    tracking_uri: Optional[str] = place(None)  # else sqlite:///<work_dir>/mlruns.db
    experiment_name: str = inert("finetune")
    datasets: list[str] = inert(field(default_factory=list))  # YAML files of user datasets to register
    keep_checkpoints: bool = inert(False)  # a finished run deletes its checkpoints unless this is set
    keep_model: bool = inert(True)  # a finished fine-tuning run keeps its best weights (`bioablate export`)
    # each run's figures and each table's (PNG, SVG, PDF); the micro profile draws none: its numbers mean
    # nothing, and drawing was a quarter of a micro experiment's time (docs/performance.md)
    figures: bool = inert(True)
    model: ModelConfig = both(field(default_factory=ModelConfig))
    finetune: FinetuneConfig = ft(field(default_factory=FinetuneConfig))
    trainer: TrainerConfig = both(field(default_factory=TrainerConfig))
    pretrain: PretrainConfig = pt(field(default_factory=PretrainConfig))
    launcher: LauncherConfig = place(field(default_factory=LauncherConfig))


def result_keys(kind: str | None, cls: type = RunConfig, prefix: str = "") -> set[str]:
    """The schema's leaf keys whose value decides the result of a `kind` run (FINETUNE_RUN or
    PRETRAIN_RUN): marked so on the field and on every dataclass field above it (`ft`, `both`, ...); every
    leaf key for `kind` None."""
    import dataclasses
    keys: set[str] = set()
    for f in dataclasses.fields(cls):
        if kind is not None and kind not in _GROUPS[marks(cls)[f.name]]:
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        keys |= (result_keys(kind, type(default), f"{prefix}{f.name}.") if dataclasses.is_dataclass(default)
                 else {f"{prefix}{f.name}"})
    return keys


FINETUNE_RESULT_KEYS = result_keys(FINETUNE_RUN)
PRETRAIN_RESULT_KEYS = result_keys(PRETRAIN_RUN)
# Keys that change no fine-tuning run's result (moving the work directory, the progress bar, the
# pretraining settings: a pretrained model enters a fine-tuning run through model.name_or_path, whose files
# are fingerprinted): what `vary` refuses as an axis and `sweep best` leaves out of the file it writes.
NON_RESULT_KEYS = result_keys(None) - FINETUNE_RESULT_KEYS
# Where a run goes or how it was launched, not what it computes: the same run from any of them.
LOCATION_KEYS = tuple(marked(RunConfig, "place"))


def merge_layer(base: DictConfig, layer: DictConfig, source: str) -> DictConfig:
    """`layer` (from `source`, named in messages) merged onto a run config, validated against RunConfig
    by `bioablate_core.schema.merge`."""
    try:
        return merge(RunConfig, source, layer, base=base)
    except ConfigError as error:
        # the CLI has always called these "config keys" (they are `key=value` overrides); same message
        raise ConfigError(str(error).replace(": unknown key '", ": unknown config key '", 1)) from None


def profile_path(profile: str) -> Path:
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile '{profile}'; known: {', '.join(PROFILES)}")
    return resolve_config(profile, "profile")


def profile_config(profile: str) -> DictConfig:
    return load_yaml(profile_path(profile))


def merge_file(base: DictConfig, path: Path | str, label: str = "") -> DictConfig:
    """A YAML file of config keys (a profile, a `--config` file) merged onto `base`; a mistake in it is
    one line naming the file (after `label`, e.g. "profile 'mini'", where given)."""
    return merge_layer(base, load_yaml(path), f"{label} ({path})" if label else str(path))


def with_profile(base: DictConfig, profile: str) -> DictConfig:
    return merge_file(base, profile_path(profile), f"profile '{profile}'")


def parse_overrides(overrides: list[str]) -> DictConfig:
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"override '{bad[0]}' is not of the form key=value (e.g. finetune.lr=3e-5)")
    try:
        return dotlist(RunConfig, overrides)
    except Exception as e:
        raise ConfigError(f"could not parse overrides {overrides}: {str(e).splitlines()[0]}") from None


def dotted_layer(dotted: dict[str, Any]) -> DictConfig:
    """`{'finetune.lr': 1e-5, 'work_dir': 'runs: v2'}` as a config layer, each value taken as it is (a
    command-line path stays a string: never parsed as YAML, as a `key=value` override is)."""
    cfg = OmegaConf.create({})
    for key, value in dotted.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    return cfg


def build_config(profile: str = "micro", overrides: list[str] | None = None,
                 config_files: Iterable[Path | str] = (), **flags: Any) -> DictConfig:
    """Schema defaults, then the profile, then `config_files` (YAML layers of config keys, e.g. the one
    `bioablate sweep best` writes), then `key=value` overrides, then explicit flags (not None)."""
    cfg = defaults(RunConfig)
    cfg = with_profile(cfg, profile)
    for path in config_files:
        cfg = merge_file(cfg, path)
    cfg = merge_layer(cfg, parse_overrides(list(overrides or [])), "overrides")
    set_flags = dotted_layer({k: v for k, v in flags.items() if v is not None})
    cfg = merge_layer(cfg, set_flags, "command-line options")
    cfg.profile = profile
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"missing required config value(s): {', '.join(missing)}")
    check_names(cfg)  # first: it imports nothing heavy (check_run_config imports Lightning)
    check_run_config(cfg)
    return cfg


def flatten(cfg: DictConfig | dict, prefix: str = "") -> dict[str, Any]:
    """`{'finetune': {'lr': 1e-5}}` -> `{'finetune.lr': 1e-5}` (for MLflow params and fingerprints)."""
    container = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    out: dict[str, Any] = {}
    for key, value in container.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def under_key(key: str, names: Iterable[str]) -> bool:
    """`key` is one of `names` or inside one (`launcher.sbatch.constraint` is inside `launcher.sbatch`)."""
    return any(key == name or key.startswith(name + ".") for name in names)


# Keys that change what is drawn, not what is computed: out of a recorded plan's config digest as well as the
# fingerprints, so a table rendered with or without figures reads the same plan
DRAWING_KEYS = ("figures",)


def fingerprint(cfg: DictConfig, data_fingerprint: str, exclude: Iterable[str] = ()) -> str:
    """A fine-tuning run's identity: hash of the keys that decide its result (FINETUNE_RESULT_KEYS, less
    `exclude`: keys whose content the caller has put into `data_fingerprint` instead) and the data."""
    items = {k: v for k, v in flatten(cfg).items() if under_key(k, FINETUNE_RESULT_KEYS)
             and not under_key(k, exclude)}
    return digest({"config": items, "data": data_fingerprint})
