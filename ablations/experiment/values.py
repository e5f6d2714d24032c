"""Experiment YAML values written per profile: `{micro: 1, mini: 3, default: 5}` gives each profile its own,
and a nested mapping of config keys becomes dotted keys with the profile's values."""

from __future__ import annotations

from typing import Any

from ablations.config import PROFILES

DEFAULT_ONLY = "default"  # in a per-profile value: the value for profiles not listed


def is_per_profile(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= {*PROFILES, DEFAULT_ONLY}


UNSET = object()


def per_profile(value: Any, profile: str) -> Any:
    """`{micro: 1, mini: 3, default: 5}` -> the value for `profile` (else `default`); any other value as
    is. A per-profile mapping that names neither gives `UNSET`: the key is left as the profile has it."""
    if not is_per_profile(value):
        return value
    if profile in value:
        return value[profile]
    return value.get(DEFAULT_ONLY, UNSET)


def dotted(mapping: dict[str, Any], profile: str, prefix: str = "") -> dict[str, Any]:
    """`{finetune: {lr: 1}, model.vocab: x, pretrain.max_steps: {micro: 10}}` -> dotted keys with the
    profile's values; keys whose per-profile value does not name this profile are left out."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not is_per_profile(value):
            out.update(dotted(value, profile, name + "."))
            continue
        value = per_profile(value, profile)
        if value is not UNSET:
            out[name] = value
    return out
