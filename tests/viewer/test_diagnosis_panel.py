"""The Diagnosis tab shows the analyzers' verdicts of every loaded run, fired ones first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from analyzers.diagnosis import diagnose
from tracer.core.runfolder import RunFolder
from viewer.export import export_widget
from viewer.panels.diagnosis import DIAGNOSING, WAITING
from viewer.window import MainWindow

Opener = Callable[..., MainWindow]


def test_diagnosis_tab_lists_the_measured_verdicts(
    open_window: Opener, qtbot: object, tiny_pytorch_run: RunFolder, failed_run: RunFolder, tmp_path: Path
) -> None:
    window = open_window([tiny_pytorch_run.path, failed_run.path])
    panel = window.diagnosis
    assert window.tabs.tabText(window.tabs.indexOf(panel)) == "Diagnosis"
    waiting = (WAITING, DIAGNOSING)
    qtbot.waitUntil(lambda: all(r[4] not in waiting for r in panel.rows()), timeout=60_000)  # type: ignore[attr-defined]
    rows = panel.rows()
    for index, folder in enumerate((tiny_pytorch_run, failed_run)):
        expected = [v for v in diagnose(folder) if v.measured]
        mine = [r for r in rows if r[0] == index]
        assert sorted(r[2] for r in mine) == sorted(v.title for v in expected)
        fired = [r[7] for r in mine]
        assert fired == sorted(fired, reverse=True)  # fired verdicts first
    crash = next(r for r in rows if r[0] == 1 and r[2] == "crash or refusal")
    assert crash[3] == "fired" and "injected fault at epoch 2" in crash[4]
    window.tabs.setCurrentWidget(panel)
    png = export_widget(panel, tmp_path / "diagnosis-tab.png")
    assert png.stat().st_size > 0
