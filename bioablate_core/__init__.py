"""The small shared core every layer may import: errors, fingerprints, console, schemas, registries.

It imports nothing from the project's other packages (tests/bioablate_core/test_layering.py).
"""
