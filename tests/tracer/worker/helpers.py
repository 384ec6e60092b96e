"""Test helpers for framework tests."""

from __future__ import annotations

import os

import pytest

from tests.conftest import require_framework
from tracer.environments import find_python, status
from tracer.frameworks import FRAMEWORKS


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
