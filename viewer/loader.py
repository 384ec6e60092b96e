"""Loading off the GUI thread: each run folder is read by `viewer.data.load_run` in a QThreadPool worker,
and its result comes back to the GUI thread as a queued signal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6 import QtCore

from viewer.data import RunData, load_run


class Task(QtCore.QRunnable):
    """`done` is always called, with `fn()` or, if fn raised, with `failed(exception)`: an exception in
    a pool thread must not leave the window waiting for a result that never comes."""

    def __init__(
        self, fn: Callable[[], Any], done: Callable[[Any], None], failed: Callable[[Exception], Any] = repr
    ) -> None:
        super().__init__()
        self.fn = fn
        self.done = done
        self.failed = failed

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as e:  # noqa: BLE001 - reported through `failed`, in the window
            result = self.failed(e)
        self.done(result)


def _load_failed(path: Path) -> Callable[[Exception], RunData]:
    def failed(e: Exception) -> RunData:
        return RunData(path=path, messages=[f"{path} could not be loaded: {type(e).__name__}: {e}"])

    return failed


def deliver(signal: QtCore.SignalInstance, *args: object) -> None:
    """Emits from a pool thread; a window closed while its run was loading has nothing to deliver to (Qt
    says "Signal source has been deleted"): the result is dropped, not raised into the next event loop."""
    try:
        signal.emit(*args)
    except RuntimeError:
        pass


class RunLoader(QtCore.QObject):
    """`progress(fraction, text)` covers every pending run; `loaded(RunData)` per run; `idle` when none is left."""

    progress = QtCore.Signal(float, str)
    loaded = QtCore.Signal(object)
    idle = QtCore.Signal()
    _finished = QtCore.Signal(str, object)
    _step = QtCore.Signal(str, float, str)

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.pool = QtCore.QThreadPool(self)
        self.pool.setMaxThreadCount(max(2, min(4, QtCore.QThread.idealThreadCount())))
        self._fractions: dict[str, float] = {}
        self._finished.connect(self._on_finished)
        self._step.connect(self._on_step)

    @property
    def pending(self) -> int:
        return len(self._fractions)

    def load(self, path: Path) -> None:
        key = str(path)
        self._fractions[key] = 0.0
        self.progress.emit(self._overall(), f"loading {path.name}")

        def report(fraction: float, text: str) -> None:
            deliver(self._step, key, fraction, f"{path.name}: {text}")

        done = lambda data: deliver(self._finished, key, data)  # noqa: E731
        self.pool.start(Task(lambda: load_run(path, report), done, _load_failed(path)))

    def _overall(self) -> float:
        return sum(self._fractions.values()) / len(self._fractions) if self._fractions else 1.0

    def _on_step(self, key: str, fraction: float, text: str) -> None:
        if key in self._fractions:
            self._fractions[key] = fraction
            self.progress.emit(self._overall(), text)

    def _on_finished(self, key: str, data: object) -> None:
        self._fractions.pop(key, None)
        self.loaded.emit(data)
        self.progress.emit(self._overall(), "")
        if not self._fractions:
            self.idle.emit()

    def wait(self, timeout_ms: int = -1) -> bool:
        return bool(self.pool.waitForDone(timeout_ms))
