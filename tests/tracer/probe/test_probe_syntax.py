"""The probe runs inside any Python process of a user's command (SINGA's and JetPack 4's Python 3.6
included), beside the user's own packages: Python 3.6 syntax, standard library only."""

from __future__ import annotations

import sys
from pathlib import Path

import tracer
from tests.python36 import absolute_imports, vermin_violations

PROBE = Path(tracer.__file__).resolve().parent / "probe"


def test_probe_code_is_python_3_6() -> None:
    files = sorted(PROBE.rglob("*.py"))
    assert len(files) >= 6
    assert vermin_violations(files) == ""


def test_probe_imports_only_the_standard_library() -> None:
    for path in PROBE.rglob("*.py"):
        for name in absolute_imports(path):
            top = name.split(".")[0]
            # dltracer_probe: the probe's own name in a command's processes (sitecustomize starts it)
            assert top in sys.stdlib_module_names or top == "dltracer_probe", f"{path.name} imports {name}"
