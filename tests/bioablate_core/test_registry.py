import pytest

from bioablate_core.errors import ConfigError, UnknownNameError
from bioablate_core.registry import Registry


def test_register_get_and_names_in_order():
    heads = Registry("head")
    heads.register("linear", 1)

    @heads.register("crf")
    def crf():
        return 2

    assert heads.get("linear") == 1 and heads.get("crf") is crf
    assert heads.names() == ["linear", "crf"] and "crf" in heads and len(heads) == 2
    assert heads.names(where=lambda entry: entry == 1) == ["linear"]


def test_unknown_name_lists_the_known_ones_and_the_nearest():
    schemes = Registry("tagging scheme")
    for name in ("bio", "bioul", "io"):
        schemes.register(name, name)
    with pytest.raises(UnknownNameError,
                       match=r"unknown tagging scheme 'bioo'; known: bio, bioul, io \(did you mean 'bio'\?\)"):
        schemes.get("bioo")


def test_a_name_is_never_silently_shadowed():
    tasks = Registry("task")
    tasks.register("bc5-chem", object())
    with pytest.raises(ConfigError, match="task 'bc5-chem' is already defined"):
        tasks.register("bc5-chem", object())
    replacement = object()
    tasks.register("bc5-chem", replacement, replace=True)
    assert tasks.get("bc5-chem") is replacement
    tasks.unregister("bc5-chem")
    assert "bc5-chem" not in tasks
