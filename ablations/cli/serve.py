"""The `bioablate` commands that serve what was computed: the MLflow UI (`ui`) and shared server (`server`),
and fine-tuned models (`export`, `predict`) (ablations/cli/ parses their arguments).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ablations import api


def cmd_ui(args: argparse.Namespace) -> int:
    return api.ui(args.host, args.port, args.allow_remote, args.work_dir, args.tracking_uri, args.storage,
                  args.optuna, args.optuna_port)


def cmd_server(args: argparse.Namespace) -> int:
    api.server(args.backend_store_uri, args.artifacts, args.host, args.port, args.workers, args.allow_remote)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    print(api.export(args.run, Path(args.to), args.work_dir, args.tracking_uri, args.datasets or ()))
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    api.predict(Path(args.model), Path(args.input), Path(args.output) if args.output else None, args.task,
                args.datasets or ())
    return 0
