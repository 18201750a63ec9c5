"""The import graph: no cycle among chronus_py modules, every module importable in any order, and
``placement`` / ``solvers`` independent of ``chronus_py`` (issue 12, item 1).

Two graphs: the load-time graph (imports at module level, including inside a module-level
``if``/``try``: what runs when a module is loaded), and the full graph, which also counts imports
inside functions (issue 25: a deferred import is still a dependency; two modules importing each
other inside functions are one tangle, not two parts). Imports under ``if TYPE_CHECKING:`` never
run and count in neither. Neither graph may have a cycle.
"""

from __future__ import annotations

import ast
import random
import subprocess
import sys
from pathlib import Path
from typing import Collection

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("chronus_py", "placement", "solvers")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((REPO / package).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def load_time_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is loaded."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody"):  # try, with, for, class bodies
                    visit(getattr(node, field, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return found


def all_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at load time or when a function is called."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(nodes) -> None:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
            else:
                visit(ast.iter_child_nodes(node))

    visit(tree.body)
    return found


def imported_names(
    module: str, path: Path, node: ast.Import | ast.ImportFrom, known: Collection[str]
) -> set[str]:
    """The modules of ``known`` an import statement names: ``from a.b import c`` names the
    module ``a.b.c`` if there is one, else ``a.b`` (parent packages loaded on the way are not
    edges: a package's ``__init__`` importing its own submodules is no cycle)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & set(known)
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    names = {f"{base}.{alias.name}" for alias in node.names}
    return {name if name in known else base for name in names} & set(known)


def import_graph(package: str, imports=load_time_imports) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (at load time, unless ``imports`` is
    :func:`all_imports`)."""
    known = modules(package)
    graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = {
            target for node in imports(tree) for target in imported_names(name, path, node, known)
        } - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules (first == last), or None."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in colour:
                cycle = dfs(nxt)
                if cycle:
                    return cycle
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if node not in colour:
            cycle = dfs(node)
            if cycle:
                return cycle
    return None


def test_the_graph_parser_sees_what_runs_at_load_time():
    tree = ast.parse(
        "import chronus_py.jobs.model\n"
        "from chronus_py.selector import leases, ChronusSettings\n"
        "from .jobs import state\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from chronus_py.round import run_round\n"
        "else:\n    from chronus_py import plan\n"
        "try:\n    from chronus_py import errors\n"
        "except ImportError:\n    from chronus_py.jobs import overhead\n"
        "def f():\n    from chronus_py import scheduler\n"
        "class C:\n    from chronus_py import samples\n"
    )
    path = REPO / "chronus_py" / "x.py"
    names = {
        n
        for node in load_time_imports(tree)
        for n in imported_names("chronus_py.x", path, node, modules("chronus_py"))
    }
    assert names == {
        "chronus_py.jobs.model",
        "chronus_py.selector",
        "chronus_py.selector.leases",
        "chronus_py.jobs.state",
        "chronus_py.plan",
        "chronus_py.errors",
        "chronus_py.jobs.overhead",
        "chronus_py.samples",
    }
    everything = {
        n
        for node in all_imports(tree)
        for n in imported_names("chronus_py.x", path, node, modules("chronus_py"))
    }
    assert everything == names | {"chronus_py.scheduler"}  # TYPE_CHECKING still never runs
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_chronus_py_has_no_import_cycle():
    graph = import_graph("chronus_py")
    assert len(graph) > 50
    assert graph["chronus_py.round"] >= {"chronus_py.scheduler", "chronus_py.plan"}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_chronus_py_has_no_import_cycle_counting_imports_inside_functions():
    graph = import_graph("chronus_py", all_imports)
    # a deferred import is an edge here (the CLI imports its replay inside a function)
    assert "chronus_py.cli.elastic" in graph["chronus_py.cli.replay"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle (imports inside functions count): " + " -> ".join(cycle)


@pytest.mark.parametrize("package", ["placement", "solvers"])
def test_placement_and_solvers_never_import_chronus_py(package):
    """Anywhere in the file, not only at load time: these packages stand on their own."""
    offenders = []
    for name, path in modules(package).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            offenders += [f"{name}: {t}" for t in targets if t.split(".")[0] == "chronus_py"]
    assert offenders == []
    code = (
        "import importlib, sys\n"
        f"for m in {sorted(modules(package))!r}: importlib.import_module(m)\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] == 'chronus_py']\n"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=120)


def test_every_module_imports_in_any_order():
    """Three shuffles of every module of the three packages, each in a fresh interpreter (run
    side by side): a hidden cycle or a missing import fails one of them with its traceback."""
    names = sorted(
        m for package in PACKAGES for m in modules(package) if not m.endswith("__main__")
    )
    runs = []
    for seed in (1, 2, 3):
        order = list(names)
        random.Random(seed).shuffle(order)
        code = f"import importlib\nfor m in {order!r}: importlib.import_module(m)\n"
        runs.append(
            subprocess.Popen(
                [sys.executable, "-c", code], cwd=REPO, stderr=subprocess.PIPE, text=True
            )
        )
    for seed, run in zip((1, 2, 3), runs):
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, f"order of seed {seed} failed:\n{err}"


def test_one_event_loop_owns_the_clock():
    """Issue 25: rigid and elastic replays run one loop; the elastic scheduler is a stage behind
    it (no clock, no loop of its own) and its allocation moves have their own module."""
    graph = import_graph("chronus_py", all_imports)
    assert {m for m, targets in graph.items() if "chronus_py.engine.clock" in targets} == {
        "chronus_py.engine.loop"
    }
    assert graph["chronus_py.engine.loop"] >= {
        "chronus_py.engine.elastic",
        "chronus_py.scheduler",
    }
    assert "chronus_py.engine.resize" in graph["chronus_py.engine.elastic"]
