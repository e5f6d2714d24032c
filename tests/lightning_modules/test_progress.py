"""The pretraining bar counts optimizer steps over the whole run (not per epoch) and shows no `v_num`."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

from lightning_modules.progress import StepProgressBar


class _Regression(pl.LightningModule):
    """Two batches per epoch, logging what PretrainModule puts on the bar."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train/loss", loss, on_step=True, prog_bar=True)
        self.log("train/tokens_per_s", 1234.6, on_step=True, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(4, 4), torch.randn(4, 1)), batch_size=2)


def test_bar_counts_steps_across_epochs_and_hides_v_num(tmp_path):
    bar = StepProgressBar()
    trainer = pl.Trainer(max_steps=5, max_epochs=-1, callbacks=[bar], logger=CSVLogger(tmp_path),
                         enable_model_summary=False, enable_checkpointing=False, accelerator="cpu",
                         default_root_dir=tmp_path)
    trainer.fit(_Regression())
    assert trainer.current_epoch >= 2  # the run spanned several epochs ...
    tqdm = bar.train_progress_bar
    assert (tqdm.n, tqdm.total) == (5, 5)  # ... and one bar counted its steps
    assert tqdm.desc.startswith("pretrain")
    metrics = bar.get_metrics(trainer, trainer.lightning_module)
    assert "v_num" not in metrics and metrics["tokens/s"] == 1235 and "loss" in metrics


def test_bar_redraws_at_most_every_refresh_interval(tmp_path, monkeypatch):
    """Each redraw reads the logged metrics back from the device: 20 fast steps of one epoch draw at the
    first step, at the last, and at most once between."""

    class OneEpoch(_Regression):
        def train_dataloader(self):
            return DataLoader(TensorDataset(torch.randn(40, 4), torch.randn(40, 1)), batch_size=2)

    bar = StepProgressBar()
    drawn = []
    monkeypatch.setattr(bar, "get_metrics", lambda *args: drawn.append(1) or {})
    trainer = pl.Trainer(max_steps=20, max_epochs=-1, callbacks=[bar], logger=False, enable_model_summary=False,
                         enable_checkpointing=False, accelerator="cpu", default_root_dir=tmp_path)
    trainer.fit(OneEpoch())
    assert bar.train_progress_bar.n == 20 and len(drawn) <= 3  # the first step, the last, at most one between
