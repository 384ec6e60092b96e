"""Energy per epoch and per image on real tiny PyTorch runs: one on this VM as it is (no energy source,
said plainly), one with a Jetson's tegrastats (a real child printing fixture lines) and a powercap tree
whose package counter runs at 10 W and wraps, both pointed at by the environment as on a real machine."""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from analyzers.figures.energy import NO_SOURCE
from analyzers.figures.run_summary import summarise
from tests.conftest import TINY, require_framework, run_tracer
from tests.tracer.measure.test_tegrastats import install_fake_tegrastats
from tracer.core.runfolder import RunFolder, list_runs
from tracer.core.schema import RAILS_TABLE, RAPL_TABLE
from tracer.measure.supervisor import POWERCAP_ROOT_ENV

PACKAGE_W = 10.0
WRAP_UJ = 10_000_000  # a 10 J range: the counter wraps every second of the run
BOARD_W = 5.079  # the Xavier NX fixture line: VDD_IN 5079mW/5079mW


class RunningPackage:
    """A powercap tree whose package-0 counter advances at PACKAGE_W, as the kernel's would."""

    def __init__(self, root: Path) -> None:
        zone = root / "intel-rapl:0"
        zone.mkdir(parents=True)
        (zone / "name").write_text("package-0\n")
        (zone / "max_energy_range_uj").write_text(f"{WRAP_UJ}\n")
        self.energy = zone / "energy_uj"
        self.energy.write_text("0\n")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            uj = int((time.monotonic() - self._started) * PACKAGE_W * 1e6) % WRAP_UJ
            tmp = self.energy.with_suffix(".tmp")
            tmp.write_text(f"{uj}\n")
            os.replace(tmp, self.energy)  # whole values only, as the kernel's file reads

    def __enter__(self) -> RunningPackage:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def board_run(tmp_path_factory: pytest.TempPathFactory, real_fixtures: Path) -> Iterator[RunFolder]:
    require_framework("pytorch")
    tmp = tmp_path_factory.mktemp("board")
    nx_line = (real_fixtures / "tegrastats" / "lines.txt").read_text().splitlines()[6]
    lines = tmp / "lines.txt"
    lines.write_text(nx_line + "\n")
    with pytest.MonkeyPatch.context() as mp, RunningPackage(tmp / "powercap"):
        install_fake_tegrastats(tmp / "bin", lines, mp, repeat=100_000)
        mp.setenv(POWERCAP_ROOT_ENV, str(tmp / "powercap"))
        out = tmp / "runs"
        result = run_tracer(
            "profile", "--framework", "pytorch", *TINY, "--model", "alexnet", "--batch", "2", "--out", str(out)
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "energy, tegrastats VDD_IN (board input)" in result.stdout  # the end of `tracer profile`
    (folder,) = list_runs(out)
    yield folder


def test_sources_are_named_in_run_json(board_run: RunFolder, tiny_pytorch_run: RunFolder) -> None:
    env = json.loads(board_run.run_json.read_text())["environment"]
    assert env["energy_sources"][0] == "RAPL package-0 (intel-rapl:0)"
    assert env["energy_sources"][1].startswith("tegrastats board input rail (")
    plain = json.loads(tiny_pytorch_run.run_json.read_text())["environment"]
    assert plain["energy_sources"] == []
    assert any(u.startswith("RAPL: ") for u in plain["energy_unavailable"])
    assert board_run.sample_parquet_path(RAILS_TABLE).exists()
    assert board_run.sample_parquet_path(RAPL_TABLE).exists()


def test_energy_per_epoch_matches_the_sources_own_numbers(board_run: RunFolder) -> None:
    s = summarise(board_run)
    by_source = {e.source: e for e in s.energy}
    assert set(by_source) == {"RAPL package-0 (intel-rapl:0)", "tegrastats VDD_IN (board input)"}
    epochs = board_run.epochs()
    board = by_source["tegrastats VDD_IN (board input)"]
    package = by_source["RAPL package-0 (intel-rapl:0)"]
    for e, board_j, package_j in zip(epochs, board.epoch_j, package.epoch_j):
        assert board_j == pytest.approx(BOARD_W * e.duration_s, rel=1e-6)  # constant power: exact
        # the counter is written every 10 ms and read at 10 Hz: a few per cent at most, over wraps
        assert package_j == pytest.approx(PACKAGE_W * e.duration_s, rel=0.05)
    assert sum(e.duration_s for e in epochs) * PACKAGE_W > 2 * WRAP_UJ / 1e6  # it did wrap, twice at least
    assert s.energy_source == "tegrastats VDD_IN (board input)"  # the board's input holds everything
    steady_board = {e.source: e for e in s.steady.energy}["tegrastats VDD_IN (board input)"]  # the headline
    assert s.energy_j_per_image == pytest.approx(steady_board.j_per_image)
    assert steady_board.epoch_j == board.epoch_j[len(epochs) - len(steady_board.epoch_j) :]


def test_show_prints_each_source_and_a_plain_no_source(board_run: RunFolder, tiny_pytorch_run: RunFolder) -> None:
    shown = run_tracer("show", str(board_run.path))
    assert shown.returncode == 0, shown.stderr
    s = summarise(board_run)
    for e in s.steady.energy:
        assert f"energy, {e.source} (steady)" in shown.stdout
        assert f"{e.j_per_epoch:.3f} J/epoch, {e.j_per_image:.4f} J/image" in shown.stdout
    plain = run_tracer("show", str(tiny_pytorch_run.path))
    assert plain.returncode == 0, plain.stderr
    (line,) = [ln for ln in plain.stdout.splitlines() if ln.lstrip().startswith("energy")]
    assert NO_SOURCE in line and " 0 J" not in plain.stdout and "0.000 J" not in plain.stdout


def test_compare_names_the_source_and_the_run_without_one(
    board_run: RunFolder, tiny_pytorch_run: RunFolder, tmp_path: Path
) -> None:
    table = tmp_path / "c.csv"  # outside the runs: compare writes nothing into a run folder
    result = run_tracer("compare", str(tiny_pytorch_run.path), str(board_run.path), "--csv", str(table))
    assert result.returncode == 0, result.stderr
    assert "energy per epoch, tegrastats VDD_IN (board input) (steady) (J)" in result.stdout
    assert "energy per image, RAPL package-0 (intel-rapl:0) (steady) (J)" in result.stdout
    assert f"energy of A: {NO_SOURCE}" in result.stdout
    assert "energy of B" not in result.stdout
    with table.open() as f:
        rows = list(csv.reader(f))
    (row,) = [r for r in rows if r[0] == "energy per epoch, tegrastats VDD_IN (board input) (steady)"]
    assert row[2] == "" and float(row[5]) > 0  # A (columns 2-4) had no such source: empty, not 0; B: 5


def test_report_tables_give_energy_per_epoch_and_per_image_per_framework(
    board_run: RunFolder, tiny_pytorch_run: RunFolder, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    result = run_tracer("report", str(board_run.path), str(tiny_pytorch_run.path), "--out", str(out))
    assert result.returncode == 0, result.stderr
    table = (out / "table1-cpu.md").read_text()
    assert "Energy/epoch, steady (J)" in table and "Energy/image, steady (J)" in table
    assert "tegrastats VDD_IN (board input)" in table
    assert NO_SOURCE in table
    s = summarise(board_run)
    assert f"{s.energy_j_per_epoch:.1f}" in table
