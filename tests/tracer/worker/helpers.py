"""Test helpers for framework tests."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import require_framework
from tracer.environments import env_python, find_python, status
from tracer.frameworks import FRAMEWORKS
from tracer.runner import worker_pythonpath


def run_in_framework(framework: str, code: str, *args: str, timeout: float = 600) -> str:
    """`python -c code args` in the framework's environment with the worker package importable (from
    `/`, so the checkout is not on the path by accident); its stdout, or the test fails with its stderr."""
    env = dict(os.environ, PYTHONPATH=str(worker_pythonpath()), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [str(env_python(framework)), "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def require_singa() -> None:
    """SINGA's only PyPI build needs a CPython 3.6: where none exists, skip saying so, unless CI demands
    SINGA (TRACER_REQUIRE_FRAMEWORKS names it: then fail, as for any framework)."""
    required = "singa" in os.environ.get("TRACER_REQUIRE_FRAMEWORKS", "").split(",")
    version = FRAMEWORKS["singa"].python_version
    if not status("singa").installed and not required and find_python(version) is None:
        pytest.skip(
            f"no CPython {version} here (python{version} on PATH or in pyenv's versions folder): SINGA needs it"
        )
    require_framework("singa")
