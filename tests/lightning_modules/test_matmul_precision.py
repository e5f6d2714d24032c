"""lightning_modules/matmul_precision.py: after a precision chosen through torch's new per-backend API, the
legacy getter Lightning asks at every CUDA `fit` answers again, and the choice is kept."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.matmul_precision import answerable_matmul_precision

BACKENDS = [torch.backends, torch.backends.cuda.matmul, torch.backends.cudnn, torch.backends.mkldnn,
            torch.backends.mkldnn.matmul]


@pytest.fixture(autouse=True)
def fresh_precision():
    """A fresh process's state (nothing chosen) for the test, the worker's own restored after it."""
    before = [b.fp32_precision for b in BACKENDS]
    for backend in BACKENDS:
        backend.fp32_precision = "none"
    yield
    for backend, value in zip(BACKENDS, before):
        backend.fp32_precision = value


def test_tf32_chosen_through_the_new_api_is_kept_and_the_getter_answers():
    torch.backends.cuda.matmul.fp32_precision = "tf32"  # PyTorch's recommended spelling
    with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
        torch.get_float32_matmul_precision()  # what Lightning's CUDA accelerator met
    answerable_matmul_precision()
    assert torch.get_float32_matmul_precision() == "high"
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"


def test_the_cuda_matmuls_own_choice_wins_over_transformers_global_switch():
    """The first GPU session's sequence: fp32 matmuls through the legacy API, then transformers' switch
    (TrainingArguments with torch_compile and bf16) turning TF32 on for every backend at once."""
    from transformers.utils.import_utils import enable_tf32

    torch.backends.cuda.matmul.allow_tf32 = False
    enable_tf32.__wrapped__(True)  # lru_cache'd: the function itself
    with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
        torch.get_float32_matmul_precision()
    answerable_matmul_precision()
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.fp32_precision == "ieee"


def test_nothing_changes_where_the_getter_answers():
    answerable_matmul_precision()
    assert [b.fp32_precision for b in BACKENDS] == ["none"] * len(BACKENDS)
    assert torch.get_float32_matmul_precision() == "highest"
