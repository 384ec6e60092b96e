"""Shared by the trace-backend tests: where the tools are, and and what a test needs to skip without them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tracer.core.errors import UserError
from tracer.measure.environments import has_nvidia_gpu
from tracer.measure.lifeguard import end_nsys_agents
from tracer.measure.tracing.nsys import find_nsys
from tracer.measure.tracing.nsys_launch import take_session_lock


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


NSYS_ATTEMPTS, NSYS_ATTEMPT_S = 4, 60
#: The OS runtime's rows are what these reports are for; CPU sampling is what hangs Debian's 2022.4 at shutdown.
NO_SAMPLING = ("--sample=none", "--cpuctxsw=none")


def record_nsys_report(out: Path, app: list[str], trace: str = "osrt") -> Path:
    """A real .nsys-rep of `app`, written by the nsys found here, as robustly as this machine allows.

    Why each part: two nsys sessions at once die or hang ("Local Endpoint is not available", CI of 6 Dec),
    so this takes turns with the tool's own sessions (`take_session_lock`); Debian's nsys 2022.4 now and then
    dies at launch or hangs in its shutdown on a loaded machine (fresh-clone runs of 28 Nov), so a failed
    or hung try (ended at NSYS_ATTEMPT_S; a run takes ~12 s idle) is tried again; its helper agent leaves
    the process group and, left over, hangs later sessions, so it is ended after each try.
    """
    nsys_bin = require_nsys()
    log = out.with_name(out.name + ".nsys.log")  # a file, not a pipe: the helper agent inherits it
    rep = out.with_suffix(".nsys-rep")
    for _attempt in range(NSYS_ATTEMPTS):
        with take_session_lock(), log.open("w") as said:
            proc = subprocess.Popen(
                [str(nsys_bin), "profile", "-t", trace, *NO_SAMPLING, "-f", "true", "-o", str(out), *app],
                stdout=said,
                stderr=subprocess.STDOUT,
            )
            try:
                proc.wait(timeout=NSYS_ATTEMPT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            finally:
                end_nsys_agents([proc.pid])
        if proc.returncode == 0 and rep.exists():
            break
    assert rep.exists(), log.read_text()[-3000:]
    return rep
