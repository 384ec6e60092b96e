"""Layers import downwards only, checked by import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APART = {
    "core",
    "worker",
    "probe",
    "__init__",
}  # core is the bottom layer; the worker and the probe have contracts of their own


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_every_tracer_module_sits_in_a_layer() -> None:
    """A module added under tracer/ must be placed in a layer, or the contract would not see it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in config if c["type"] == "layers"]
    named = {m.strip() for layer in layers for m in layer.replace(":", "|").split("|")}
    modules = {p.stem for p in (ROOT / "tracer").glob("*.py")} | {
        p.name for p in (ROOT / "tracer").iterdir() if (p / "__init__.py").exists()
    }
    missing = sorted(f"tracer.{m}" for m in modules - APART if f"tracer.{m}" not in named)
    assert not missing, f"name these in a layer of pyproject.toml's import-linter contract: {missing}"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            nxt = next(todo, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycles() -> None:
    """No two modules of the tool import each other, directly or round a loop, function-level imports
    included (the nsys ingest once did: issue #25)."""
    import grimp

    packages = ("analyzers", "viewer", "tracer")
    graph = grimp.build_graph(*packages, cache_dir=None)
    mods = {m for m in graph.modules if m.split(".")[0] in packages}
    edges = {m: {n for n in graph.find_modules_directly_imported_by(m) if n in mods} for m in mods}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert not _cycles(edges), _cycles(edges)
