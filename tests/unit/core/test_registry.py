"""core.registry: lazy name tables with checked keyword arguments."""

from __future__ import annotations

import pytest

from lmms_genbench.core.args import ArgumentError, as_int
from lmms_genbench.core.registry import Registry, parameter_names


class Thing:
    def __init__(self, size: int = 1, colour: str = "red", *, hidden: int = 0) -> None:
        self.size = as_int("size", size, minimum=1)
        self.colour = colour


TABLE = {"thing": "tests.unit.core.test_registry:Thing", "other": "json:JSONDecoder"}


def test_names_sorted_and_nothing_imported_to_list_them():
    reg = Registry({**TABLE, "lazy": "tests.no_such_module:Missing"})  # importing it would fail
    assert reg.names() == ["lazy", "other", "thing"]
    assert reg.dotted(" Lazy ") == "tests.no_such_module.Missing"
    assert "thing" in reg and "nope" not in reg
    with pytest.raises(ModuleNotFoundError):
        reg.load("lazy")


def test_relative_modules_resolve_against_the_package():
    reg = Registry({"keys": ".keys:slug"}, package="lmms_genbench.core")
    from lmms_genbench.core.keys import slug

    assert reg.dotted("keys") == "lmms_genbench.core.keys.slug" and reg.load("keys") is slug


def test_build_checks_arguments_by_name():
    reg = Registry(TABLE, context="{} widget")
    assert reg.build("THING", size="3").size == 3
    assert parameter_names(Thing) == ["size", "colour"]
    with pytest.raises(ArgumentError) as err:
        reg.build("gadget")
    assert str(err.value) == "name: expected one of 'other', 'thing'; got 'gadget'"
    with pytest.raises(ArgumentError) as err:
        reg.build("thing", sise=2, hidden=1)
    assert str(err.value) == "thing widget: unknown argument(s) 'hidden', 'sise'; allowed: size, colour"
    with pytest.raises(ArgumentError) as err:
        reg.build("thing", size=0)
    assert str(err.value) == "thing widget: size: expected an integer >= 1; got 0"


def test_a_prefix_spells_arguments_as_on_the_command_line():
    reg = Registry(TABLE, what="widget", context="widget={}", prefix="widget.")
    with pytest.raises(ArgumentError) as err:
        reg.build("nope")
    assert str(err.value) == "widget: expected one of 'other', 'thing'; got 'nope'"
    with pytest.raises(ArgumentError) as err:
        reg.build("thing", sise=2)
    assert str(err.value) == "widget=thing: unknown argument(s) widget.sise; allowed: widget.size, widget.colour"
    with pytest.raises(ArgumentError) as err:
        reg.build("thing", size="x")
    assert str(err.value) == "widget=thing: widget.size: expected an integer >= 1; got 'x'"
