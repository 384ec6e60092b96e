"""Test helpers for framework tests."""

from __future__ import annotations

import os

import pytest

from tests.conftest import require_framework
from tracer.environments import status
from tracer.frameworks import FRAMEWORKS


def require_singa() -> None:
    """SINGA cannot be installed on the development machines: skip with what is missing and how to
    point `--python` at an interpreter that has it, unless CI demands it (then fail)."""
    required = "singa" in os.environ.get("TRACER_REQUIRE_FRAMEWORKS", "").split(",")
    if not status("singa").installed and not required:
        pytest.skip("SINGA path unverified here: " + FRAMEWORKS["singa"].missing_hint)
    require_framework("singa")
