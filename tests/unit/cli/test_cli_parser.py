"""The ``lmms-genbench`` parser: each command's ``--help`` description is its handler's
docstring (cli/common.py's ``command``), and the arguments several commands share are
declared alike."""

import argparse

from lmms_genbench.cli import build_parser


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


COMMANDS = {" ".join(path): parser for path, parser in _parsers(build_parser())
            if parser.get_default("func") is not None}


def test_every_command_has_a_description_from_its_handler():
    assert "plot" in COMMANDS and "store merge" in COMMANDS and "chef summary" in COMMANDS and "upstream export" in COMMANDS
    for name, parser in COMMANDS.items():
        if name.startswith("autobench"):  # its actions share one description, the group's
            continue
        handler = parser.get_default("func")
        assert handler.__doc__ and parser.description == handler.__doc__, name


def test_shared_arguments_are_declared_alike():
    def option(parser, dest):
        return next((a for a in parser._actions if a.dest == dest), None)

    for dest, nargs, metavar in (("results", "+", "RESULTS"), ("label", "+", "NAME"), ("json", None, "FILE")):
        found = [(n, option(p, dest)) for n, p in COMMANDS.items() if option(p, dest) is not None]
        assert len(found) >= 2, dest
        for name, action in found:
            if name.startswith("autobench"):  # autobench bias: RESULTS.json, its own
                continue
            assert (action.nargs, action.metavar, action.default) == (nargs, metavar, None), (dest, name)
