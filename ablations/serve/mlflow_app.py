"""The MLflow server that `bioablate ui` and `bioablate server` run: MLflow's own (`mlflow server` and all its
options), with one change to the page it sends, so that the UI opens as a training dashboard.

    python -m ablations.serve.mlflow_app server --backend-store-uri ... --port 5000   # as `mlflow server ...`

MLflow 3's UI decides about its assistant in the browser, not on the server: on a page whose host is
`localhost`, `127.0.0.1` or `::1` it shows the assistant's button and, on the browser's first visit, opens
its pane beside every page (localStorage `mlflow.assistant.fab.autoOpenedOnFirstLoad_v1`, then
`mlflow.assistant.panelOpen_v1`); on any other host only where the server allows remote use
(`MLFLOW_ENABLE_REMOTE_ASSISTANT`, off by default). No server setting turns it off for a local browser, and
`bioablate ui` is always browsed locally. So the index page this server sends runs a few lines before
MLflow's own script (`PAGE_SETUP`): the first-visit opening counts as done, the pane starts closed, the
assistant's elements (`data-assistant-ui`: its button, its pane) are hidden, and a browser that has not
chosen between MLflow's two views starts in the classic one (`mlflow.workflowType_v1`: experiments, runs,
params, metric charts) instead of the GenAI one. Nothing else differs from `mlflow server`.

How: MLflow's server runs its app in uvicorn worker processes (`mlflow.server.fastapi_app:app`);
`main` runs MLflow's own command line with that app named `ablations.serve.mlflow_app:app` instead, which is
MLflow's app with the index page's view replaced.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

MLFLOW_APP = "mlflow.server.fastapi_app:app"
OUR_APP = "ablations.serve.mlflow_app:app"  # not __name__: run as `-m`, this module is __main__

PAGE_SETUP = """<script>(function () {
  try {  /* bioablate: no assistant pane; the classic view unless the browser chose otherwise */
    var store = window.localStorage;
    store.setItem("mlflow.assistant.fab.autoOpenedOnFirstLoad_v1", "true");
    store.setItem("mlflow.assistant.panelOpen_v1", "false");
    if (store.getItem("mlflow.workflowType_v1") === null) {
      store.setItem("mlflow.workflowType_v1", JSON.stringify("machine_learning"));
    }
  } catch (e) {}
})();</script><style>[data-assistant-ui="true"] { display: none !important; }</style>"""


def index_page(original: str) -> str:
    """MLflow's index.html with `PAGE_SETUP` at the end of its head: run as the page is read, before
    MLflow's script (deferred: it runs once the page is read)."""
    at = original.find("</head>")
    if at < 0:
        raise ValueError("MLflow's index.html has no </head>")
    return original[:at] + PAGE_SETUP + original[at:]


def _serve_index():
    """MLflow's view of every UI route (its Flask endpoint `serve`), with the page set up."""
    from pathlib import Path

    from flask import Response
    from mlflow.server import app as flask_app

    page = Path(flask_app.static_folder) / "index.html"
    if not page.is_file():  # MLflow's own answer (a source install without the built UI)
        return _mlflow_serve()
    return Response(index_page(page.read_text(encoding="utf-8")), mimetype="text/html",
                    headers={"Cache-Control": "no-cache"})


_mlflow_serve: Any = None


def _app() -> Any:
    """MLflow's ASGI app, its index view replaced (imported in the server's worker processes only)."""
    global _mlflow_serve
    from mlflow.server import app as flask_app

    with warnings.catch_warnings():  # MLflow's own import of Starlette's WSGI middleware: nothing a user can
        warnings.filterwarnings("ignore", message=r"starlette\.middleware\.wsgi is deprecated")  # act on
        from mlflow.server.fastapi_app import app as mlflow_app

    if _mlflow_serve is None:
        _mlflow_serve = flask_app.view_functions["serve"]
        flask_app.view_functions["serve"] = _serve_index
    return mlflow_app


def __getattr__(name: str) -> Any:  # `app`, built when uvicorn asks for it, not when `main` imports this
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """`mlflow ARGS` (MLflow's command line), its server running `OUR_APP` in place of `MLFLOW_APP`."""
    import mlflow.server
    from mlflow.cli import cli

    build = mlflow.server._build_uvicorn_command

    def our_app(uvicorn_opts, host, port, workers, app_name, *rest, **options):
        return build(uvicorn_opts, host, port, workers, OUR_APP if app_name == MLFLOW_APP else app_name,
                     *rest, **options)

    mlflow.server._build_uvicorn_command = our_app
    cli.main(args=sys.argv[1:] if argv is None else argv, prog_name="mlflow")


if __name__ == "__main__":
    main()
