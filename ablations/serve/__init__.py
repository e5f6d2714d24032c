"""Browsing the store: `bioablate ui` (ui.py, the MLflow UI over the work directory's store, plus Optuna's
dashboard) and `bioablate server` (a shared MLflow server), both MLflow's own `mlflow server`."""
