"""Lightning's check of torch's matmul precision, made answerable before a `fit`.

At every `fit` on a CUDA device Lightning asks `torch.get_float32_matmul_precision()`. Since torch 2.9 that
legacy getter raises ("mix of the legacy and new APIs") once anything chose the precision through the new
per-backend API (`torch.backends.cuda.matmul.fp32_precision = "tf32"`, PyTorch's recommended spelling;
transformers' `TrainingArguments(tf32=...)` sets `torch.backends.fp32_precision`): a user's script that
did so, then called bioablate on a GPU, failed inside Lightning.
"""

from __future__ import annotations


def answerable_matmul_precision() -> None:
    """Where the legacy getter raises, state the precision the CUDA matmuls were given again through the
    legacy setter ("high" for TF32, "highest" for IEEE fp32), which leaves every backend consistent: the
    user's choice is kept, and Lightning's check can read it. Nothing changes where the getter answers."""
    import torch

    try:
        torch.get_float32_matmul_precision()
    except RuntimeError:
        chosen = torch.backends.cuda.matmul.fp32_precision
        if chosen == "none":  # inherits the global switch
            chosen = torch.backends.fp32_precision
        torch.set_float32_matmul_precision("high" if chosen == "tf32" else "highest")
