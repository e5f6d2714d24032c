"""A `vary` axis with no values is refused when the experiment loads: it plans no cells, and the run
exited 0 with an empty table."""

from __future__ import annotations

import pytest

from ablations.experiment import load_experiment
from bioablate_core.errors import ConfigError

EXPERIMENT = """
name: empty-axis
models:
  random: {{name_or_path: random-bert}}
tasks: [gad]
vary:
  head: {values}
table: {{rows: task, columns: head}}
"""


@pytest.mark.parametrize("values", ["{key: finetune.head, values: []}", "{values: {}}",
                                    "{key: finetune.head, values: {micro: [], default: [linear]}}"],
                         ids=["empty-list", "empty-mapping", "empty-under-the-profile"])
def test_an_empty_vary_axis_is_one_line_naming_the_file_and_key(tmp_path, data_dir, values):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT.format(values=values))
    with pytest.raises(ConfigError) as error:
        load_experiment(path, profile="micro", data_dir=str(data_dir), work_dir=str(tmp_path / "w"))
    assert str(error.value) == f"{path}: vary.head.values: expected a non-empty list or a mapping label -> value"

