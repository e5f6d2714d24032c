"""`trainer.compile` for pretraining (lightning_modules/compiling.py `check_pretrain_compile`, called by the
run's config check): one static shape, and CUDA graphs only where the gradients they produce are copied
out before the next replay. Each refusal is one line naming the keys to change."""

from __future__ import annotations

import pytest

from ablations.config import build_config
from ablations.run.pretrain_checks import check_config
from bioablate_core.errors import ConfigError

GRAPHED = ["trainer.compile=true", "trainer.compile_mode=reduce-overhead", "pretrain.max_predictions=16"]


@pytest.mark.parametrize("overrides, message", [
    (["trainer.compile=true"], "trainer.compile=true pretrains at one static shape: set pretrain.max_predictions"),
    ([*GRAPHED, "pretrain.accumulate=4"], "trainer.compile_mode=reduce-overhead (CUDA graphs) with "
                                          "pretrain.accumulate=4 would sum gradients into the graph's memory"),
])
def test_a_compiled_pretraining_step_that_could_recompile_or_lose_gradients_is_one_line(overrides, message):
    with pytest.raises(ConfigError) as error:
        check_config(build_config("micro", overrides, task="pretrain"))
    assert str(error.value).startswith(message) and "\n" not in str(error.value), str(error.value)


@pytest.mark.parametrize("overrides", [
    ["trainer.compile=true", "pretrain.max_predictions=16", "pretrain.accumulate=4"],  # no graphs: no pool
    [*GRAPHED, "pretrain.accumulate=1"],  # each gradient read by the step before the next replay
    [*GRAPHED, "pretrain.accumulate=4", "pretrain.master_weights=true", "trainer.precision=bf16-true"],
    ["pretrain.accumulate=4", "trainer.compile_mode=reduce-overhead"],  # not compiled: the mode is unused
])
def test_the_compiled_combinations_that_are_safe_pass(overrides):
    check_config(build_config("micro", overrides, task="pretrain"))
