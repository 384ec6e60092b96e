"""Worker-side code runs in the framework's interpreter, which for SINGA and on JetPack 4 boards is Python 3.6."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tracer.worker
from tracer.core.frameworks import FRAMEWORKS

WORKER = Path(tracer.worker.__file__).resolve().parent
ALLOWED_TOP_LEVEL = {"__future__", "tracer", "numpy", "PIL", "torchvision"}
ALLOWED_TOP_LEVEL |= {f.import_name for f in FRAMEWORKS.values()}  # each declared framework
ALLOWED_TOP_LEVEL |= {"jaxlib", "flax", "optax", "grain"}  # JAX's model, optimiser, pipeline libraries
ALLOWED_TOP_LEVEL |= {"absl"}  # grain's command-line flags (absl-py is a dependency of grain)


# Modules that only ever run on newer Pythons, with the reason; every other worker module is held to 3.6.
NOT_3_6: dict[str, str] = {}


def test_worker_code_is_python_3_6() -> None:
    vermin = Path(sys.executable).parent / "vermin"
    files = sorted(str(p) for p in WORKER.rglob("*.py") if p.name not in NOT_3_6)
    assert len(files) > 10
    result = subprocess.run(
        # dataclasses: the 3.6 environments install its backport (see tracer/core/frameworks.py, singa).
        [
            str(vermin),
            "-t=3.6-",
            "--no-tips",
            "--violations",
            "--eval-annotations",
            "--backport",
            "dataclasses",
            *files,
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_worker_imports_only_stdlib_numpy_pillow_and_its_framework() -> None:
    for path in WORKER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in ALLOWED_TOP_LEVEL or top in sys.stdlib_module_names, f"{path.name} imports {name}"
