"""The small shared core every layer may import: user errors, content fingerprints, console quieting,
distributed-process helpers, YAML validation against dataclass schemas and the one generic registry.

It imports nothing from the project's other packages, so imports only go down:
`ablations` -> `lightning_modules` -> `datamodules` -> `bioablate_core` (checked by
tests/bioablate_core/test_layering.py).
"""
