"""The RAPL reader over a tree laid out like /sys/class/powercap, wrap-around of `energy_uj` included;
and the NVML sources read from the same kind of sample table the sampler writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.figures.energy import energy, from_counter
from tracer.core.records import EpochRecord
from tracer.core.runfolder import CsvStream, RunFolder
from tracer.core.schema import RAPL_TABLE
from tracer.measure.rapl import POWERCAP_ROOT, RAPL_COLUMNS, RaplReader

# The kernel's max_energy_range_uj of a package zone on a Xeon (about 262 kJ).
MAX_UJ = 262143328850


def make_powercap(root: Path) -> dict[str, Path]:
    """intel-rapl:0 (package-0) with its core and dram subzones, as the kernel shows them at top level
    (the subzones also sit inside their package's directory; the top-level names are what is read)."""
    zones = {
        "intel-rapl": None,  # the control type directory: no energy file
        "intel-rapl:0": "package-0",
        "intel-rapl:0:0": "core",
        "intel-rapl:0:1": "dram",
    }
    files = {}
    for zone, name in zones.items():
        d = root / zone
        d.mkdir(parents=True)
        (d / "enabled").write_text("1\n")
        if name is None:
            continue
        (d / "name").write_text(name + "\n")
        (d / "max_energy_range_uj").write_text(f"{MAX_UJ}\n")
        (d / "energy_uj").write_text("1000\n")
        (d / "constraint_0_name").write_text("long_term\n")
        (d / "constraint_0_power_limit_uw").write_text("95000000\n")
        files[name] = d / "energy_uj"
    return files


def test_reader_finds_package_and_dram_and_leaves_out_what_overlaps(tmp_path: Path) -> None:
    make_powercap(tmp_path)
    reader, status = RaplReader.open(tmp_path)
    assert status == "ok" and reader is not None
    assert [(z.zone, z.domain) for z in reader.zones] == [("intel-rapl:0", "package-0"), ("intel-rapl:0:1", "dram")]
    assert reader.sources() == ["RAPL package-0 (intel-rapl:0)", "RAPL dram (intel-rapl:0:1)"]


def test_counter_wrap_at_max_energy_range_is_undone(tmp_path: Path) -> None:
    files = make_powercap(tmp_path / "powercap")
    reader, _ = RaplReader.open(tmp_path / "powercap")
    assert reader is not None
    folder = RunFolder.create(tmp_path, "run")
    stream = CsvStream(folder.sample_stream_path(RAPL_TABLE), RAPL_COLUMNS)
    second = 1_000_000_000
    # package: 3 J/s, wrapping between the 2nd and 3rd reading; dram: 0.5 J/s, no wrap.
    package = [MAX_UJ - 4_000_000, MAX_UJ - 1_000_000, 2_000_000, 5_000_000]
    dram = [1000, 501_000, 1_001_000, 1_501_000]
    for i, (p, d) in enumerate(zip(package, dram)):
        files["package-0"].write_text(f"{p}\n")
        files["dram"].write_text(f"{d}\n")
        reader.append(stream, 10 * second + i * second)
    stream.close()
    folder.finalise_samples()
    epoch = EpochRecord(epoch=1, start_ns=10 * second + second // 2, end_ns=13 * second, images=10, loss=0.0)
    by_source = {s.source: s for s in energy(folder, [epoch])}
    assert by_source["RAPL package-0 (intel-rapl:0)"].epoch_j[0] == pytest.approx(3.0 * 2.5)
    assert by_source["RAPL dram (intel-rapl:0:1)"].epoch_j[0] == pytest.approx(0.5 * 2.5)
    assert by_source["RAPL package-0 (intel-rapl:0)"].j_per_image == pytest.approx(0.75)


def test_a_counter_that_went_down_without_a_wrap_value_counts_zero_not_negative() -> None:
    series = from_counter([0, 1, 2], [5.0, 7.0, 1.0])
    assert series.joules == (0.0, 2.0, 2.0)


def test_no_powercap_is_named(tmp_path: Path) -> None:
    reader, status = RaplReader.open(tmp_path / "absent")
    assert reader is None and "does not exist" in status
    (tmp_path / "empty").mkdir()
    reader, status = RaplReader.open(tmp_path / "empty")
    assert reader is None and "no intel-rapl zone" in status


def test_this_machine_says_what_it_has() -> None:
    """Whatever the host: a reader with zones, or a reason; never an exception."""
    reader, status = RaplReader.open(POWERCAP_ROOT)
    assert (reader is not None) == (status == "ok")
    assert status == "ok" or status.startswith("RAPL: ")


def test_nvml_counter_and_power_and_only_the_gpus_the_run_used(tmp_path: Path) -> None:
    """GPU 0: counter (the run's memory there); GPU 1: power only (the run's too); GPU 2: idle, left out."""
    from tracer.core.schema import GPUS

    folder = RunFolder.create(tmp_path, "run")
    stream = CsvStream(folder.sample_stream_path(GPUS.name), GPUS.columns)
    s = 1_000_000_000
    for i in range(5):
        t = i * s
        stream.append((t, 0, 50, 10, 100, 1000, 200.0, 1_000_000 + 150_000 * i, 60, 300))
        stream.append((t, 1, 50, 10, 100, 1000, 40.0 + 20 * i, "", 60, 200))
        stream.append((t, 2, 0, 0, 0, 1000, 30.0, 7_000_000 + 30_000 * i, 40, 0))
    stream.close()
    epoch = EpochRecord(epoch=1, start_ns=s, end_ns=3 * s, images=4, loss=0.0)
    by_source = {e.source: e for e in energy(folder, [epoch])}
    assert set(by_source) == {"NVML GPU 0 (energy counter)", "NVML GPU 1 (power integrated)"}
    assert by_source["NVML GPU 0 (energy counter)"].epoch_j[0] == pytest.approx(300.0)  # 150 J/s x 2 s
    assert by_source["NVML GPU 1 (power integrated)"].epoch_j[0] == pytest.approx(
        70.0 + 90.0
    )  # 60, 80, 100 W at 1, 2, 3 s
