"""Worker-side code runs in the framework's interpreter, which for SINGA and on JetPack 4 boards is Python 3.6."""

from __future__ import annotations

import sys
from pathlib import Path

import tracer.worker
from tests.python36 import absolute_imports, vermin_violations
from tracer.core.frameworks import FRAMEWORKS

WORKER = Path(tracer.worker.__file__).resolve().parent
ALLOWED_TOP_LEVEL = {"__future__", "tracer", "numpy", "PIL", "torchvision"}
ALLOWED_TOP_LEVEL |= {f.import_name for f in FRAMEWORKS.values()}  # each declared framework
ALLOWED_TOP_LEVEL |= {"jaxlib", "flax", "optax", "grain"}  # JAX's model, optimiser, pipeline libraries
ALLOWED_TOP_LEVEL |= {"absl"}  # grain's command-line flags (absl-py is a dependency of grain)


# Modules that only ever run on newer Pythons, with the reason; every other worker module is held to 3.6.
NOT_3_6: dict[str, str] = {}


def test_worker_code_is_python_3_6() -> None:
    files = sorted(p for p in WORKER.rglob("*.py") if p.name not in NOT_3_6)
    assert len(files) > 10
    # dataclasses: the 3.6 environments install its backport (see tracer/core/frameworks.py, singa).
    assert vermin_violations(files, backports=["dataclasses"]) == ""


def test_worker_imports_only_stdlib_numpy_pillow_and_its_framework() -> None:
    for path in WORKER.rglob("*.py"):
        for name in absolute_imports(path):
            top = name.split(".")[0]
            assert top in ALLOWED_TOP_LEVEL or top in sys.stdlib_module_names, f"{path.name} imports {name}"
