"""Every environment variable the package reads is in docs/environment.md's one table, and every
row of the table is read somewhere: a new variable cannot stay undocumented."""

import ast
import re
from pathlib import Path

# the checkout's files, not the installed copy (CI installs the package, not in editable mode)
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lmms_genbench"
ENV_DOC = ROOT / "docs" / "environment.md"
# our own prefixes: any such string literal is a variable name (read through a constant)
OURS = re.compile(r"(LMMS_GENBENCH|MMECEPTION|AUTOBENCH)_[A-Z0-9_]+")
NAME = re.compile(r"[A-Z][A-Z0-9_]*")


def _is_environ(node) -> bool:
    """``os.environ`` or ``environ``."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (isinstance(node, ast.Name) and node.id == "environ")


def _read_names(tree: ast.Module) -> set[str]:
    """Names passed to os.environ.get / [] / in, os.getenv, and defaults of ``*_env`` arguments."""
    constants = {
        target.id: node.value.value
        for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets if isinstance(target, ast.Name) and isinstance(node.value.value, str)
    }

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    keys = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if (node.func.attr in ("get", "pop", "setdefault") and _is_environ(node.func.value)) or node.func.attr == "getenv":
                keys.append(node.args[0])
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            keys.append(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            keys.append(node.left)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # a parameter naming the variable to read (api_key_env="OPENAI_API_KEY")
            params = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults + node.args.kw_defaults
            keys += [d for p, d in zip(params, defaults) if d is not None and p.arg.endswith("_env")]
    return {v for v in map(value, keys) if v and NAME.fullmatch(v)}


def variables_read() -> dict[str, set[str]]:
    """Variable -> the modules that read it."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _read_names(tree)
        names |= {n.value for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and OURS.fullmatch(n.value)}
        for name in names:
            found.setdefault(name, set()).add(str(path.relative_to(PACKAGE.parent)))
    return found


def documented() -> list[str]:
    """The first column of the table under docs/environment.md's "## Environment variables"."""
    section = ENV_DOC.read_text(encoding="utf-8").split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", section, flags=re.MULTILINE)


def test_every_variable_read_is_in_the_readme_table():
    read, table = variables_read(), documented()
    missing = {name: sorted(where) for name, where in read.items() if name not in table}
    assert not missing, f"read but not in docs/environment.md's table: {missing}"


def test_every_row_of_the_table_is_read_and_listed_once():
    read, table = variables_read(), documented()
    assert len(table) == len(set(table)), table
    assert sorted(set(table) - set(read)) == []


def test_the_scanner_sees_each_way_of_reading_a_variable():
    source = '''
import os
ENV_X = "LMMS_GENBENCH_X"
a = os.environ.get(ENV_X)
b = os.environ["PLAIN_B"]
c = "PLAIN_C" in os.environ
d = os.getenv("PLAIN_D")
def f(key_env="PLAIN_E"): return os.environ.get(key_env)
'''
    assert _read_names(ast.parse(source)) == {"LMMS_GENBENCH_X", "PLAIN_B", "PLAIN_C", "PLAIN_D", "PLAIN_E"}
