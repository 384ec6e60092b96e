"""Why the probe will not load in a Python a command starts, read from its argv and environment alone
(`tracer.worker.probe_reach.kept_out`, shared by the probe and the tool)."""

from __future__ import annotations

import pytest

from tracer.core.schema import PROBE_RUN_DIR_ENV
from tracer.worker.probe_reach import kept_out

STAGE, RUN_DIR = "/stage", PROBE_RUN_DIR_ENV
GIVEN = {"PYTHONPATH": f"{STAGE}:/theirs", RUN_DIR: "/runs/r"}


@pytest.mark.parametrize(
    "argv,words",
    [(["python", "-I", "x.py"], "python -I"), (["python3.11", "-u", "-E", "x.py"], "python -E"),
     (["/usr/bin/python3", "-W", "ignore", "-IS", "x.py"], "python -I"), (["python", "-Wignore", "-S"], "python -S"),
     (["env", "-i", "python", "x.py"], "cleared"), (["env", "PYTHONPATH=/y", "python", "x.py"], "replaced"),
     (["env", "-u", RUN_DIR, "python", "x.py"], f"dropped {RUN_DIR}"),
     (["bash", "-c", "PYTHONPATH=/y exec python x.py"], "replaced"), (["sh", "-c", "python -S x.py"], "python -S")],
)  # fmt: skip
def test_a_python_the_probe_cannot_enter_is_named_with_why(argv: list[str], words: str) -> None:
    assert words in kept_out(argv, GIVEN, STAGE, RUN_DIR)


@pytest.mark.parametrize(
    "argv",
    [["python", "x.py"], ["python", "x.py", "-I"], ["python", "-c", "-I"], ["python", "-m", "pkg", "-S"],
     ["torchrun", "--nproc-per-node=2", "x.py"], ["bash", "-c", "python x.py"], ["bash", "-c", "unclosed 'quote"]],
)  # fmt: skip
def test_a_python_the_probe_enters_or_no_python_is_not_named(argv: list[str]) -> None:
    """Options after the script, `-c` or `-m` are the script's; programs that are no Python are not followed."""
    assert kept_out(argv, GIVEN, STAGE, RUN_DIR) == ""
