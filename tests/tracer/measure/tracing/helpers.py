"""Shared by the trace-backend tests: where the tools are, and and what a test needs to skip without them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracer.core.errors import UserError
from tracer.measure.environments import has_nvidia_gpu
from tracer.measure.tracing.nsys import find_nsys


def require_nsys() -> Path:
    """nsys, or a skip saying how to get it; TRACER_REQUIRE_NSYS=1 (CI) turns its absence into a failure."""
    try:
        return find_nsys()
    except UserError as e:
        if os.environ.get("TRACER_REQUIRE_NSYS") == "1":
            pytest.fail(f"nsys must be installed for this test run (TRACER_REQUIRE_NSYS=1): {e}")
        pytest.skip(f"no nsys here: run scripts/install_nsys.sh ({e})")


def require_gpu() -> None:
    if not has_nvidia_gpu():
        pytest.skip("needs an NVIDIA GPU with CUDA; none here (run these tests on a machine with one)")
