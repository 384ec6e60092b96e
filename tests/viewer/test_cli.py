"""`tracer view` as a user runs it: a real process that renders offscreen, saves and exits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tracer.core.runfolder import RunFolder


def _tracer(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return subprocess.run([sys.executable, "-m", "tracer", *args], capture_output=True, text=True, timeout=300, env=env)


def test_screenshot_of_a_run(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    result = _tracer("view", str(tiny_pytorch_run.path), "--screenshot", str(out))
    assert result.returncode == 0, result.stderr
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 50_000


def test_unknown_run_is_a_user_error(tmp_path: Path) -> None:
    result = _tracer("view", "no-such-run", "--runs", str(tmp_path), "--screenshot", str(tmp_path / "x.png"))
    assert result.returncode == 2
    assert "no run 'no-such-run'" in result.stderr
    assert not (tmp_path / "x.png").exists()


def test_a_window_without_x_libraries_or_server_is_one_line(tiny_pytorch_run: RunFolder) -> None:
    """Where Qt's xcb plugin lacks libxcb-icccm4/keysyms1 (as on this machine), or the X server is absent,
    `tracer view` says which in one line (exit 2) instead of Qt's abort."""
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["DISPLAY"] = ":987"  # no server there
    result = subprocess.run(
        [sys.executable, "-m", "tracer", "view", str(tiny_pytorch_run.path)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("tracer: error:"), result.stderr
    assert "libxcb-" in lines[0] or "no X server at DISPLAY=:987" in lines[0]


def test_screenshot_renders_offscreen_under_xvfb_or_any_display(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    """#28: `xvfb-run tracer view RUN --screenshot x.png` aborted in Qt's xcb plugin (exit 134) where the X
    libraries it loads are missing; a screenshot renders offscreen whatever DISPLAY says."""
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    commands = [[sys.executable, "-m", "tracer", "view", str(tiny_pytorch_run.path), "--screenshot"]]
    xvfb = shutil.which("xvfb-run")
    if xvfb:  # Debian's xvfb package; without it the unreachable DISPLAY below stands for it
        commands.append([xvfb, "-a", *commands[0]])
    for i, command in enumerate(commands):
        out = tmp_path / f"shot{i}.png"
        result = subprocess.run(
            [*command, str(out)], capture_output=True, text=True, timeout=300, env=env | {"DISPLAY": ":987"}
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert out.read_bytes().startswith(b"\x89PNG")


def test_a_screenshot_on_an_unusable_platform_asked_for_is_one_line(
    tiny_pytorch_run: RunFolder, tmp_path: Path
) -> None:
    """QT_QPA_PLATFORM=xcb is taken at its word: where xcb cannot work here, one line says what is missing."""
    env = {k: v for k, v in os.environ.items() if k != "WAYLAND_DISPLAY"} | {
        "QT_QPA_PLATFORM": "xcb",
        "DISPLAY": ":987",
    }
    result = subprocess.run(
        [sys.executable, "-m", "tracer", "view", str(tiny_pytorch_run.path), "--screenshot", str(tmp_path / "x.png")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("tracer: error:"), result.stderr
    assert "libxcb-" in lines[0] or "no X server at DISPLAY=:987" in lines[0]
    assert not (tmp_path / "x.png").exists()
