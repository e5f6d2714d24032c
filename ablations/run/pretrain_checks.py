"""A pretraining run's config checked before anything is built: by `bioablate pretrain` (ablations/run/pretrain.py)
and by an experiment for each of its stages (ablations/experiment/checks.py). A module of its own, free of
Lightning and MLflow, so that checking an experiment (`run --dry-run`, `table`) does not import them."""

from __future__ import annotations

from omegaconf import DictConfig

from ablations.checks import check_run_config
from bioablate_core.errors import ConfigError
from datamodules.pretrain.corpora import parse_corpus
from datamodules.pretrain.masking import MaskingSpec
from lightning_modules.choice_names import OPTIMIZERS
from lightning_modules.compiling import check_pretrain_compile
from lightning_modules.model_checks import check_weights
from lightning_modules.models import resolve_model_dir
from lightning_modules.pretrain_models import ObjectiveSpec, check_init, check_speed_choices


def check_config(cfg: DictConfig) -> None:
    """A pretraining config's names and values, and its starting model where it has one: each mistake one
    ConfigError line, before a run exists."""
    check_run_config(cfg)  # trainer.* names (compile_mode among them) and sizes
    p = cfg.pretrain
    parse_corpus(p.corpus)
    MaskingSpec.from_config(p)  # an unknown masking mode or schedule: UnknownNameError listing the known
    ObjectiveSpec.from_config(p)  # an unknown objective: UnknownNameError listing the known ones
    OPTIMIZERS.check_name(p.optimizer)  # by name: its implementation would import Lightning
    if p.max_predictions is not None and p.max_predictions > p.seq_len:
        raise ConfigError(f"pretrain.max_predictions={p.max_predictions} is more than the {p.seq_len} positions of "
                          f"a row (pretrain.seq_len); set it to at most {p.seq_len} (a quarter of the row, "
                          f"{p.seq_len // 4}, keeps a 15% masking rate), or null")
    check_pretrain_compile(compile=cfg.trainer.compile, mode=cfg.trainer.compile_mode, accumulate=p.accumulate,
                           master_weights=p.master_weights, max_predictions=p.max_predictions)
    # numeric ranges (seq_len, mask_rate, ...) are checked by the schema (ablations/config.py)
    if p.objective == "electra":
        if p.nsp:
            raise ConfigError("pretrain.nsp=true needs objective=bert (electra has no sentence-pair task)")
        if p.adversarial:
            raise ConfigError("pretrain.adversarial=true (ALUM) is implemented for objective=bert and albert, "
                              "not electra")
    check_speed_choices(ObjectiveSpec.from_config(p), packing=p.packing, master_weights=p.master_weights,
                        fused_qkv=p.fused_qkv, precision=cfg.trainer.precision)
    if p.init != "scratch":  # what loading it would fail on once the run exists (a FAILED run, a traceback)
        init_dir = resolve_model_dir(p.init)
        check_init(init_dir, p.objective)
        check_weights(init_dir)
