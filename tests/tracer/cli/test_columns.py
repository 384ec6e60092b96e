"""Piped output keeps within COLUMNS where the user set it (`COLUMNS=120 tracer show ... | less` ran to
126-216 columns); piped without it, a line stays whole (grep finds it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _tracer(*args: str, columns: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | ({"COLUMNS": columns} if columns else {})
    result = subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True, text=True, env=env,
                            timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + result.stderr


@pytest.mark.parametrize("command", ["show", "compare", "runs", "diagnose"])
def test_piped_output_keeps_within_columns(real_fixtures: Path, command: str) -> None:
    runs = {p.name[-4:]: p for p in (real_fixtures / "gpu-h100").iterdir() if (p / "run.json").exists()}
    args = {
        "show": [str(runs["7a96"])],
        "compare": [str(runs["7ff0"]), str(runs["7a96"])],
        "runs": ["--runs", str(real_fixtures / "gpu-h100")],
        "diagnose": [str(runs["7a96"])],
    }[command]
    fitted = _tracer(command, *args, columns="120")
    assert max(len(line) for line in fitted.splitlines()) <= 120
    whole = _tracer(command, *args, columns=None)
    assert max(len(line) for line in whole.splitlines()) > 120  # the fixtures' output needs the room
