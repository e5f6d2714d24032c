"""Model cards carry the exact command and config, without the paths of the machine that made them."""

from __future__ import annotations

import yaml

from ablations.cards import invoked_command, shareable_config
from ablations.config import build_config


def test_the_command_keeps_every_setting_but_hides_local_paths():
    argv = ["/home/me/.venv/bin/bioablate", "finetune", "--task", "bc5-chem", "--work-dir", "/home/me/w",
            "--data-dir=/data", "tracking_uri=sqlite:////home/me/m.db", "finetune.lr=1e-5"]
    command = invoked_command(argv)
    assert command.startswith("bioablate finetune --task bc5-chem --work-dir '<local>'")
    assert "finetune.lr=1e-5" in command and "'--data-dir=<local>'" in command
    assert "/home/me" not in command and "/data" not in command


def test_the_config_is_the_resolved_one_minus_local_paths(tmp_path):
    cfg = build_config("micro", ["finetune.lr=3e-5"], task="bc5-chem", data_dir=str(tmp_path / "data"),
                       work_dir=str(tmp_path / "work"))
    written = yaml.safe_load(shareable_config(cfg))
    assert written["finetune"]["lr"] == 3e-5 and written["task"] == "bc5-chem"
    assert written["data_dir"] == written["work_dir"] == "<local>"
    assert str(tmp_path) not in shareable_config(cfg)
