"""The probe runs inside any Python process of a user's command (SINGA's and JetPack 4's Python 3.6
included), beside the user's own packages: Python 3.6 syntax, standard library only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tracer

PROBE = Path(tracer.__file__).resolve().parent / "probe"


def test_probe_code_is_python_3_6() -> None:
    vermin = Path(sys.executable).parent / "vermin"
    files = sorted(str(p) for p in PROBE.rglob("*.py"))
    assert len(files) >= 6
    result = subprocess.run(
        [str(vermin), "-t=3.6-", "--no-tips", "--violations", "--eval-annotations", *files],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_probe_imports_only_the_standard_library() -> None:
    for path in PROBE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                # dltracer_probe: the probe's own name in a command's processes (sitecustomize starts it)
                assert top in sys.stdlib_module_names or top == "dltracer_probe", f"{path.name} imports {name}"
