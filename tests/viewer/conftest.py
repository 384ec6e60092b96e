"""Viewer tests run offscreen on real run folders made by the real CLI (see tests/conftest.py)."""

from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before pytest-qt makes the QApplication

from tests.conftest import run_tracer  # noqa: E402
from tracer.core.runfolder import RunFolder, list_runs  # noqa: E402

FAST = ("--limit", "3")


@pytest.fixture(scope="session")
def second_pytorch_run(make_run: Callable[..., RunFolder]) -> RunFolder:
    """A second real run with another model: the side-by-side partner where only PyTorch is installed."""
    return make_run("pytorch", "--model", "mobilenet_v2", *FAST)


@pytest.fixture(scope="session")
def failed_run(make_run: Callable[..., RunFolder]) -> RunFolder:
    """A real run whose worker raised in epoch 2: status failed, one epoch done."""
    return make_run("pytorch", *FAST, "--inject-fault", "raise@2", expect_ok=False)


@pytest.fixture
def missing_files_run(tiny_pytorch_run: RunFolder, tmp_path: Path) -> RunFolder:
    """A copy of a real run that lost its samples and events (a half-copied or damaged folder)."""
    path = tmp_path / tiny_pytorch_run.run_id
    shutil.copytree(tiny_pytorch_run.path, path)
    shutil.rmtree(path / "samples")
    (path / "events.jsonl").unlink()
    return RunFolder(path)


@pytest.fixture(autouse=True)
def collected_between_tests(qapp: object) -> Iterator[None]:
    """A viewer test runs as the viewer does, its garbage collected from the event loop only (`viewer.gui_gc`:
    a collection inside a Qt call can hang); what it leaves is collected here, between two tests, and automatic
    collection is back on for the tests after it in this process."""
    from viewer.gui_gc import collect_on_the_event_loop

    collect_on_the_event_loop()
    yield
    gc.collect()
    gc.enable()


@pytest.fixture
def open_window(qtbot: object) -> Callable[..., object]:
    """Opens the main window on run folders and waits until they are loaded."""
    from viewer.window import MainWindow

    def open_(paths: Iterable[Path], out_dir: Path = Path("runs"), layout_mode: str = "overlay") -> MainWindow:
        window = MainWindow(out_dir)
        qtbot.addWidget(window)  # type: ignore[attr-defined]
        window.set_layout_mode(layout_mode)
        window.resize(1400, 1000)
        window.show()
        paths = list(paths)
        window.add_runs(paths)
        qtbot.waitUntil(lambda: window.loader.pending == 0 and len(window.runs) == len(paths), timeout=60_000)  # type: ignore[attr-defined]
        return window

    return open_


def import_trace(path: Path, out: Path, *args: str) -> RunFolder:
    """`tracer import PATH --out OUT ARGS` as a user runs it; the run folder it made."""
    result = run_tracer("import", str(path), "--out", str(out), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = list_runs(out)
    return folder


@pytest.fixture(scope="session")
def nsys_run(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    """The real nsys trace of ResNet-18 training on an H100 (3 streams, 2,220 kernels, 6 NVTX steps), imported."""
    sqlite = real_fixtures / "nsys-h100" / "resnet18_train_nsys2025.3.1.sqlite"
    return import_trace(sqlite, tmp_path_factory.mktemp("imported"), "--framework", "pytorch")
