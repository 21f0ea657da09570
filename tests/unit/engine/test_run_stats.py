"""Run statistics change in one place: RunStats' event methods; the engine's parts report events."""

from __future__ import annotations

import ast
import threading
from dataclasses import fields
from pathlib import Path

from lmms_genbench.engine.cycle import RunStats

PACKAGE = Path(__file__).resolve().parents[3] / "lmms_genbench"
FIGURES = {f.name for f in fields(RunStats)} - {"_lock"}
_MUTATORS = {"update", "setdefault", "pop", "clear", "popitem", "__setitem__"}


def _is_stats(node: ast.AST) -> bool:
    """``stats``, ``self.stats``, ``model.last_stats``...: an expression naming run statistics."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name == "stats" or name.endswith("_stats")


def _figure_changes(tree: ast.AST) -> list[int]:
    """Lines where a RunStats figure is assigned, augmented, deleted or changed in place."""
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            targets = [node.func.value]  # stats.failures.update(...)
        for target in targets:
            if isinstance(target, ast.Subscript):  # stats.failures[stage] = ...
                target = target.value
            if isinstance(target, ast.Attribute) and target.attr in FIGURES and _is_stats(target.value):
                found.append(node.lineno)
    return found


def test_no_module_sets_a_run_figure_itself():
    """Only RunStats' own methods (through ``self``) change its figures."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        lines = _figure_changes(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[str(path.relative_to(PACKAGE))] = lines
    assert found == {}


def test_the_check_sees_each_kind_of_change():
    source = ("stats.hops_computed += 1\nself.stats.chains = 3\nstats.failures['x'] = 1\n"
              "stats.failures.update(x=1)\nmodel.last_stats.wall_seconds = 0.5\nself.hops_computed += 1\n")
    assert sorted(_figure_changes(ast.parse(source))) == [1, 2, 3, 4, 5]


def test_events_make_the_figures():
    stats = RunStats()
    stats.began(4)
    stats.reused(3)
    stats.reused(2)
    stats.seed_stored()
    stats.hop_computed()
    stats.hop_computed()
    stats.described(1.5, 4)
    stats.description_kept("a red  bus\n")
    stats.description_kept("")
    stats.drew(2.0, 3)
    stats.drew(0.5, 1)
    stats.waited(2)
    stats.repaired(1)
    stats.repaired(0)
    stats.chain_failed("describe")
    stats.chain_failed("describe")
    stats.chain_failed("incomplete")
    stats.finished(9.0)
    assert stats.to_dict() == {
        "chains": 4, "hops_reused": 5, "seeds_stored": 1, "describe_calls": 1, "describe_items": 4,
        "describe_words": 3, "generate_calls": 2, "generate_items": 4, "hops_computed": 2, "chains_waited": 2,
        "chains_repaired": 1, "describe_seconds": 1.5, "generate_seconds": 2.5, "wall_seconds": 9.0,
        "failures": {"describe": 2, "incomplete": 1},
    }
    assert RunStats(chains=4) == RunStats(chains=4)  # the lock takes no part in comparisons


def test_events_from_many_threads_are_all_counted():
    stats = RunStats()

    def work():
        for _ in range(2000):
            stats.hop_computed()
            stats.drew(0.001, 1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stats.hops_computed == stats.generate_calls == stats.generate_items == 8000
