"""Layers import downwards only, checked by import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APART = {"core", "worker", "__init__"}  # core is the bottom layer; the worker has contracts of its own


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
