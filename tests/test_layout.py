"""The layout shows the pipeline (docs/ARCHITECTURE.md): no import cycles, no module past 600 lines, few top-level
modules, and an installed distribution that adds no top-level package but `postmortem`.

The import graph is read with `ast` (no import is executed), so a cycle that only shows at run time in one order
is caught too. `parsers/` and `reports/` are the `postmortem.parsers` and `postmortem.reports` packages."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# package name -> folder, as pyproject's package-dir maps them
PACKAGE_DIRS = {"postmortem": "postmortem", "postmortem.parsers": "parsers", "postmortem.reports": "reports"}
MAX_LINES = 600
MAX_TOP_LEVEL = 8


def module_files() -> dict[str, str]:
    """Every module of the three packages: dotted name -> file path."""
    found = {}
    for pkg, folder in PACKAGE_DIRS.items():
        base = os.path.join(ROOT, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and
                                 os.path.isfile(os.path.join(dirpath, d, "__init__.py")))
            rel = os.path.relpath(dirpath, base)
            prefix = pkg if rel == "." else pkg + "." + rel.replace(os.sep, ".")
            for name in filenames:
                if not name.endswith(".py"):
                    continue
                mod = prefix if name == "__init__.py" else f"{prefix}.{name[:-3]}"
                found[mod] = os.path.join(dirpath, name)
    return found


def _resolve(name: str, modules: dict[str, str]) -> str | None:
    """The module a dotted import name lands on (the longest known prefix)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: dict[str, str] | None = None) -> dict[str, set[str]]:
    """module -> the project modules it imports (at any depth in the file: lazy imports count)."""
    modules = modules or module_files()
    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        is_pkg = path.endswith("__init__.py")
        here = mod if is_pkg else mod.rpartition(".")[0]
        edges = set()
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                # `from pkg import sub` imports the submodule when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                hit = _resolve(t, modules)
                if hit and hit != mod:
                    edges.add(hit)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _without_parent_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    # A package's __init__ re-exporting its own submodules is not a cycle of the design: drop edges from a package
    # to modules inside it when those modules import the package only for a sibling.
    return {m: {t for t in ts if not (t.startswith(m + ".") and m in graph)} for m, ts in graph.items()}


def test_the_graph_sees_imports():
    """The graph is not empty: the API reaches the parsers and the reports (the test can fail)."""
    graph = import_graph()
    assert "postmortem.api" in graph and graph["postmortem.api"]
    reach, todo = set(), ["postmortem.api"]
    while todo:
        m = todo.pop()
        if m in reach:
            continue
        reach.add(m)
        todo.extend(graph.get(m, ()))
    assert any(m.startswith("postmortem.parsers.") for m in reach)
    assert any(m.startswith("postmortem.reports.") for m in reach)


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(_without_parent_packages(import_graph()))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_module_past_600_lines():
    long = {m: n for m, p in module_files().items() if (n := sum(1 for _ in open(p, encoding="utf-8"))) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_few_top_level_modules():
    top = sorted(n for n in os.listdir(os.path.join(ROOT, "postmortem")) if n.endswith(".py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_no_top_level_import_of_the_old_names():
    """Code imports `postmortem.parsers` / `postmortem.reports`, never the generic top-level names."""
    bad = []
    for mod, path in module_files().items():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bad += [f"{mod}: {n}" for n in names if n.split(".")[0] in ("parsers", "reports")]
    assert not bad, bad


@pytest.mark.skipif(os.environ.get("PM_SKIP_WHEEL") == "1", reason="PM_SKIP_WHEEL=1")
def test_wheel_installs_only_postmortem(tmp_path):
    """A built wheel holds one top-level package, `postmortem`, with its parsers and reports inside."""
    # build from a copy: an in-tree build leaves build/ and *.egg-info in the checkout
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("postmortem", "parsers", "reports"):
        shutil.copytree(os.path.join(ROOT, name), src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                        "-w", str(tmp_path), str(src)], capture_output=True, text=True)
    if r.returncode != 0 and "No module named" in r.stderr:
        pytest.skip("setuptools/wheel not importable here: " + r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, r.stderr
    wheel = next(tmp_path.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"postmortem"}, tops
    assert "postmortem/parsers/textlog.py" in names and "postmortem/reports/render.py" in names
    assert any(n.startswith("postmortem/reports/templates/") for n in names)


def test_pyproject_lists_every_package():
    """Every folder with an __init__.py is installed: pyproject's explicit `packages` names them all."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {m for m, p in module_files().items() if p.endswith("__init__.py")}
    assert listed == found, (sorted(found - listed), sorted(listed - found))
