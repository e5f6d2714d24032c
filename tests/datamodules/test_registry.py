"""The dataset registry: the 13 BLURB datasets are there as soon as it is imported, looked up by name and
task type; an unknown name lists the known ones."""

from __future__ import annotations

import pytest

from core.errors import UnknownNameError
from datamodules.blurb import BLURB_DATASETS
from datamodules.metrics import METRICS
from datamodules.registry import DATASETS, dataset_names, get_dataset, register
from datamodules.spec import TASK_TYPES


def test_blurb_datasets_are_registered_in_order():
    assert dataset_names()[:13] == [spec.name for spec in BLURB_DATASETS] and len(BLURB_DATASETS) == 13
    assert all(get_dataset(spec.name) is spec for spec in BLURB_DATASETS)
    assert dataset_names("re") == ["chemprot", "ddi", "gad"]
    assert {spec.task_type for spec in BLURB_DATASETS} == set(TASK_TYPES)
    assert all(spec.metric in METRICS for spec in BLURB_DATASETS)


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(UnknownNameError) as error:
        get_dataset("bc5chem")
    assert str(error.value).startswith("unknown task 'bc5chem'; known: bc2gm, bc5-chem, bc5-disease, ")
    assert str(error.value).endswith("(did you mean 'bc5-chem'?)")


def test_a_spec_with_an_unknown_metric_or_task_type_is_refused():
    from dataclasses import replace

    gad = get_dataset("gad")
    with pytest.raises(UnknownNameError, match="unknown metric 'f2'"):
        register(replace(gad, name="gad-f2", metric="f2"))
    with pytest.raises(ValueError, match="task type 'tagging'"):
        register(replace(gad, name="gad-tagging", task_type="tagging"))
    assert "gad-f2" not in DATASETS and "gad-tagging" not in DATASETS
