"""One tracked run, from config to artifacts: the lifecycle every run kind shares (lifecycle.py: found by
fingerprint, claimed, resumed, ended FINISHED / FAILED / KILLED) over the MLflow store (tracking.py); the
two run kinds (finetune.py, pretrain.py); what a run shows in MLflow (dashboard.py, figures.py); and what a
finished fine-tuning run becomes (export.py, cards.py, card_metadata.py) and serves (predict.py).

The study layer (ablations/api/) is the front door; this package imports nothing from its callers.
"""
