"""Each framework's models module declares every declared model once, and its trainer builds from it: adding a
model is one line in tracer/core/options.py plus one entry in each framework's `MODELS` (the parity test,
tests/tracer/worker/test_parity.py, then builds it in every framework). Read from the source, without the
frameworks, so it runs everywhere in a moment."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tracer.core.frameworks import FRAMEWORKS
from tracer.core.options import MODELS
from tracer.worker.workload import REFERENCE_PARAMS


def source(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module.rpartition(".")[0])
    assert spec is not None and spec.submodule_search_locations, module
    path = Path(next(iter(spec.submodule_search_locations))) / (module.rpartition(".")[2] + ".py")
    assert path.is_file(), f"{module}: no {path}"
    return ast.parse(path.read_text())


def declared_models(tree: ast.Module) -> list[str]:
    """The keys of the module's top-level `MODELS = {...}` (a dict literal, annotated or not)."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "MODELS":
            value = node.value
            assert isinstance(value, ast.Dict), "MODELS is a dict literal, so that it can be read here"
            return [k.value for k in value.keys if isinstance(k, ast.Constant)]
    raise AssertionError("no MODELS")


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_models_module_declares_every_model_once(framework: str) -> None:
    module = FRAMEWORKS[framework].models_module
    assert module.startswith("tracer.worker.models."), framework
    tree = source(module)
    assert sorted(declared_models(tree)) == sorted(MODELS)
    assert any(isinstance(n, ast.FunctionDef) and n.name == "model_params" for n in tree.body)


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_trainer_builds_from_its_declared_models_module(framework: str) -> None:
    info = FRAMEWORKS[framework]
    tree = source(info.worker_module)
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert info.models_module in imported
    assert not [n for n in tree.body if isinstance(n, ast.Assign) and "MODELS" in ast.unparse(n.targets[0])]


def test_every_model_has_its_reference_count() -> None:
    assert sorted(REFERENCE_PARAMS) == sorted(MODELS)
