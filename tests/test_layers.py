"""Layers import downwards only, checked by import-linter's contracts in pyproject.toml; each layer is a package."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_contracts_name_packages_only() -> None:
    """A layer is a package, so a module added to it is checked with it; the exhaustive contracts fail
    for a package (or a loose module) under tracer/ or analyzers/ that is in no layer."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    named = []
    for contract in config:
        containers = contract.get("containers", [""])
        names = [n.strip() for layer in contract.get("layers", []) for n in layer.replace(":", "|").split("|")]
        names += contract.get("source_modules", []) + contract.get("forbidden_modules", [])
        named += [f"{c}.{n}" if c else n for c in containers for n in names]
    mine = [n for n in named if n.split(".")[0] in ("tracer", "analyzers", "viewer")]
    modules = [n for n in mine if not (ROOT / n.replace(".", "/") / "__init__.py").is_file()]
    assert mine and not modules, f"contracts name modules, not packages: {modules}"
    layered = [c for c in config if c.get("containers")]
    assert {c["containers"][0] for c in layered if c.get("exhaustive")} == {"tracer", "analyzers"}


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


def test_every_module_over_400_lines_says_why() -> None:
    """One responsibility per module: a module past 400 lines is split, or the architecture page says why
    it is one module (a line naming its path)."""
    page = (ROOT / "docs" / "development" / "architecture.md").read_text()
    long = [
        p.relative_to(ROOT).as_posix()
        for top in ("tracer", "analyzers", "viewer")
        for p in sorted((ROOT / top).rglob("*.py"))
        if len(p.read_text().splitlines()) > 400
    ]
    unnamed = [p for p in long if f"`{p}`" not in page]
    assert long and not unnamed, f"split these or say why in docs/development/architecture.md: {unnamed}"
