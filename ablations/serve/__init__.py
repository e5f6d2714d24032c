"""Browsing the store: `bioablate ui` (ui.py, the MLflow UI over the work directory's store, plus Optuna's
dashboard) and `bioablate server` (a shared MLflow server), both through mlflow_app.py, MLflow's own server
with bioablate's page changes."""
