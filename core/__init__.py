"""The small shared core every layer may import: user errors, content fingerprints, console quieting,
distributed-process helpers, YAML validation against dataclass schemas and the one generic registry.

It imports nothing from the project's other packages, so imports only go down:
`ablations` -> `lightning_modules` -> `datamodules` -> `core` (checked by tests/core/test_layering.py).
"""
