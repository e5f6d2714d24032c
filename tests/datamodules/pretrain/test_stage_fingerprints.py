"""The pretraining stages' fingerprints on the staged corpora, pinned. A stage's fingerprint hashes its
config, its corpus's fingerprint (the files, their definitions and the corpus code's declared version,
datamodules/pretrain/corpora.py `CORPUS_CODE_VERSION`), its vocabulary and its starting model, so an edit
of any of them gives every pretraining run a new fingerprint and recomputes hours (mini) to days (base) of
pretraining. This test makes such an edit fail here, not silently in a user's store. A deliberate change
updates the pins and says so in its commit.
"""

from __future__ import annotations

import pytest

from ablations.experiment import load_experiment
from ablations.experiment.plan import identify

# (experiment, profile, stage) -> fingerprint, as 0.2.0 computes them
PINNED = {
    ("table9_corpora_time", "mini", "wiki-books"): "82bf3752bcd8439d",
    ("table9_corpora_time", "mini", "pubmed-half"): "37089b09487e8cd8",
    ("table9_corpora_time", "mini", "pubmedbert"): "e26b5feb9ad476d3",
    ("table13_tagging", "mini", "pubmedbert"): "e26b5feb9ad476d3",
}


@pytest.mark.parametrize("experiment,profile,stage", list(PINNED), ids=["-".join(k) for k in PINNED])
def test_a_stage_from_scratch_keeps_its_fingerprint(experiment, profile, stage, data_dir):
    loaded = load_experiment(experiment, profile=profile, data_dir=str(data_dir))
    assert identify("pretrain", loaded.stage_config(stage)).fingerprint == PINNED[experiment, profile, stage]
