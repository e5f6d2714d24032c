"""Lightning's check of torch's matmul precision, made answerable before a `fit`.

Lightning asks `torch.get_float32_matmul_precision()` at every CUDA `fit`, and that legacy getter raises
once anything set the precision through the new per-backend API (`torch.backends.cuda.matmul.fp32_precision`).
"""

from __future__ import annotations


def answerable_matmul_precision() -> None:
    """Where the legacy getter raises, state the user's CUDA matmul precision again through the legacy setter,
    so Lightning's check can read it; nothing changes where the getter answers."""
    import torch

    try:
        torch.get_float32_matmul_precision()
    except RuntimeError:
        chosen = torch.backends.cuda.matmul.fp32_precision
        if chosen == "none":  # inherits the global switch
            chosen = torch.backends.fp32_precision
        torch.set_float32_matmul_precision("high" if chosen == "tf32" else "highest")
