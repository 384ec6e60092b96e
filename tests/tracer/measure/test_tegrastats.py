"""The tegrastats parser on every line of the shared fixture (values written by hand from the lines),
lines broken in new ways, and the sampler running a real child process in place of tegrastats."""

from __future__ import annotations

import os
import stat
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from analyzers.figures.energy import energy
from tracer.core.records import EpochRecord
from tracer.core.runfolder import RunFolder
from tracer.core.schema import RAILS_TABLE, TEGRA_CORES_TABLE, TEGRA_TABLE, TEMPS_TABLE
from tracer.measure.tegrastats import (
    RAILS_SUM,
    TegrastatsSampler,
    TegrastatsWarning,
    find_tegrastats,
    parse_line,
    parse_lines,
)

# Per fixture line, in file order, read off the line by hand:
# (board, timestamp, RAM used/total, SWAP used/total, cores (load %, MHz; None = off), EMC %/MHz,
#  GR3D %/MHz, (a temperature, °C), number of temperatures, rails {name: (instant, average)},
#  board input (rail, instant mW, average mW)).
EXPECTED: list[tuple[Any, ...]] = [
    (
        "TX2",
        None,
        (1873, 3830),
        (None, None),
        [(8, 2016), (26, 2034), (24, 2035), (7, 2026), (7, 2034), (6, 2034)],
        (0, 1600),
        (0, 114),
        ("thermal", 38.5),
        8,
        {
            "VDD_SYS_GPU": (77, 77),
            "VDD_SYS_SOC": (539, 539),
            "VDD_IN": (2930, 3405),
            "VDD_SYS_CPU": (539, 937),
            "VDD_SYS_DDR": (727, 758),
        },
        ("VDD_IN", 2930, 3405),
    ),
    (
        "TX2",
        None,
        (2019, 7853),
        (0, 1024),
        [(0, 2036), None, None, (0, 2034), (0, 2034), (0, 2033)],
        (0, 1600),
        (0, 1122),
        ("Tdiode", 21.75),
        8,
        {
            "VDD_IN": (2455, 2455),
            "VDD_CPU": (306, 306),
            "VDD_GPU": (153, 153),
            "VDD_SOC": (613, 613),
            "VDD_WIFI": (76, 76),
            "VDD_DDR": (806, 806),
        },
        ("VDD_IN", 2455, 2455),
    ),
    (
        "Nano",
        None,
        (1923, 3964),
        (191, 1982),
        [(5, 1224), (4, 1224), (3, 1224), (6, 1224)],
        (0, 1600),
        (0, 76),
        ("AO", 45.0),
        6,
        {"POM_5V_IN": (1750, 1628), "POM_5V_GPU": (0, 0), "POM_5V_CPU": (366, 406)},
        ("POM_5V_IN", 1750, 1628),
    ),
    (
        "Nano",
        None,
        (534, 3964),
        (5, 1982),
        [(16, 204), (9, 204), (0, 204), (0, 204)],
        (0, 204),
        (0, 76),
        ("thermal", 36.25),
        6,
        {"POM_5V_IN": (1022, 1022), "POM_5V_GPU": (0, 0), "POM_5V_CPU": (204, 204)},
        ("POM_5V_IN", 1022, 1022),
    ),
    (
        "AGX Xavier",
        None,
        (721, 31927),
        (0, 15963),
        [(2, 1190), (0, 1190), (0, 1190), (0, 1190), None, None, None, None],
        (0, 665),
        (0, 318),
        ("thermal", 36.9),
        8,
        {"GPU": (0, 0), "CPU": (311, 311), "SOC": (932, 932), "CV": (0, 0), "VDDRQ": (621, 621), "SYS5V": (1482, 1482)},
        (RAILS_SUM, 0 + 311 + 932 + 0 + 621 + 1482, 3346),
    ),
    (
        "Xavier NX",
        None,
        (4412, 7772),
        (139, 3886),
        [(9, 1190), (6, 1190), (6, 1190), (5, 1190), (4, 1190), (8, 1267)],
        (10, 1600),
        (62, 306),
        ("thermal", 42.55),
        6,
        {"VDD_IN": (4067, 4067), "VDD_CPU_GPU_CV": (738, 738), "VDD_SOC": (1353, 1353)},
        ("VDD_IN", 4067, 4067),
    ),
    (
        "Xavier NX (JetPack 5, mW)",
        None,
        (2690, 6854),
        (479, 3427),
        [(3, 1904), (7, 1906), (1, 1905), (0, 1907), None, None],
        (0, 1600),
        (0, 510),
        ("GPU", 37.5),
        5,
        {"VDD_IN": (5079, 5079), "VDD_CPU_GPU_CV": (696, 696), "VDD_SOC": (1104, 1104)},
        ("VDD_IN", 5079, 5079),
    ),
    (
        "AGX Orin",
        "07-29-2026 12:21:57",
        (2189, 62827),
        (0, 31413),
        [(1, 729), (0, 729), (1, 729), (1, 729), (1, 2201), (0, 2201), (100, 2201), (0, 2201)]
        + [(0, 1420), (0, 1420), (1, 1420), (1, 1420)],
        (None, None),
        (0, None),
        ("tj", 51.031),
        6,
        {"VDD_GPU_SOC": (3342, 3342), "VDD_CPU_CV": (1909, 1909), "VIN_SYS_5V0": (3717, 3717)},
        ("VIN_SYS_5V0", 3717, 3717),
    ),
]

# One line per format, broken in a way the parser was not written for, and what must still be read.
BROKEN = [
    ("TX2, last rail cut short", 0, lambda s: s[: s.index("VDD_SYS_DDR 727/") + len("VDD_SYS_DDR 727/")]),
    ("Nano, a core without its clock digits", 2, lambda s: s.replace("4%@1224", "4%@")),
    ("AGX Xavier, a core state never seen", 4, lambda s: s.replace("off,off]", "off,parked]")),
    ("Xavier NX, GR3D clock missing after the @", 5, lambda s: s.replace("GR3D_FREQ 62%@306", "GR3D_FREQ 62%@")),
    ("AGX Orin, temperature without its unit", 7, lambda s: s.replace("cpu@51.031C", "cpu@51.031")),
    ("timestamp cut", 7, lambda s: s.replace("07-29-2026 12:21:57", "07-29-2026 12:2")),
]


@pytest.fixture(scope="module")
def lines(real_fixtures: Path) -> list[str]:
    text = (real_fixtures / "tegrastats" / "lines.txt").read_text().splitlines()
    assert len(text) == len(EXPECTED)
    return text


@pytest.mark.parametrize("index", range(len(EXPECTED)), ids=[e[0] + f" #{i}" for i, e in enumerate(EXPECTED)])
def test_every_fixture_line_gives_the_values_written_in_it(lines: list[str], index: int) -> None:
    _, stamp, ram, swap, cores, emc, gr3d, temp, ntemps, rails, board = EXPECTED[index]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (p,) = parse_lines([lines[index]])
    assert p.problems == ()
    assert p.timestamp == stamp
    assert (p.ram_used_mib, p.ram_total_mib) == ram
    assert (p.swap_used_mib, p.swap_total_mib) == swap
    got_cores = [(c.load_pct, c.mhz) if c.online else None for c in p.cores]
    assert got_cores == cores
    assert [c.core for c in p.cores] == list(range(len(cores)))
    assert (p.emc_pct, p.emc_mhz) == emc
    assert (p.gpu_pct, p.gpu_mhz) == gr3d
    assert dict(p.temps)[temp[0]] == temp[1]
    assert len(p.temps) == ntemps
    assert {r.name: (r.instant_mw, r.average_mw) for r in p.rails} == rails
    assert p.input_rail is not None
    assert (p.input_rail.name, p.input_rail.instant_mw, p.input_rail.average_mw) == board


@pytest.mark.parametrize("what,index,breaking", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_line_broken_in_a_new_way_gives_one_warning_and_the_rest(
    lines: list[str], what: str, index: int, breaking: object
) -> None:
    broken = breaking(lines[index])  # type: ignore[operator]
    assert broken != lines[index]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (p,) = parse_lines([broken])
    assert len([w for w in caught if issubclass(w.category, TegrastatsWarning)]) == 1, what
    assert p.problems
    assert p.ram_used_mib == EXPECTED[index][2][0]  # what was fine is still read
    assert p.input_rail is not None


def test_text_that_is_not_tegrastats_gives_one_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parsed = parse_lines(["tegrastats: permission denied\n", "\n"])
    assert len(caught) == 1
    assert parsed[0].rails == () and parsed[0].ram_used_mib is None


FAKE_TEGRASTATS = """#!{python}
# Stands in for the board's tegrastats: prints the lines of $FAKE_TEGRASTATS_LINES at --interval ms.
import os, sys, time
interval = int(sys.argv[sys.argv.index("--interval") + 1]) / 1000.0
with open(os.environ["FAKE_TEGRASTATS_ARGS"], "w") as f:
    f.write(" ".join(sys.argv[1:]))
lines = open(os.environ["FAKE_TEGRASTATS_LINES"]).read().splitlines()
repeat = int(os.environ.get("FAKE_TEGRASTATS_REPEAT", "1"))
for line in lines * repeat:
    print(line, flush=True)
    time.sleep(interval)
time.sleep(60)
"""


def install_fake_tegrastats(bin_dir: Path, lines_file: Path, monkeypatch: pytest.MonkeyPatch, repeat: int = 1) -> Path:
    """A script named `tegrastats` first on PATH that prints fixture lines as the board's binary does."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "tegrastats"
    script.write_text(FAKE_TEGRASTATS.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_TEGRASTATS_LINES", str(lines_file))
    monkeypatch.setenv("FAKE_TEGRASTATS_ARGS", str(bin_dir / "args.txt"))
    monkeypatch.setenv("FAKE_TEGRASTATS_REPEAT", str(repeat))
    return script


def _sample(tmp_path: Path, lines: list[str], monkeypatch: pytest.MonkeyPatch, repeat: int = 1) -> RunFolder:
    lines_file = tmp_path / "lines.txt"
    lines_file.write_text("\n".join(lines) + "\n")
    script = install_fake_tegrastats(tmp_path / "bin", lines_file, monkeypatch, repeat)
    found = find_tegrastats(has_nvml=False)
    assert found == str(script)
    assert find_tegrastats(has_nvml=True) is None  # a machine with NVML is not a Jetson
    folder = RunFolder.create(tmp_path, "run")
    sampler = TegrastatsSampler(folder, found, hz=10.0)
    sampler.start()
    deadline = time.monotonic() + 30
    while sampler.lines < len(lines) * repeat and time.monotonic() < deadline:
        time.sleep(0.05)
    sampler.stop()
    assert sampler.error is None
    assert sampler.lines == len(lines) * repeat
    assert (tmp_path / "bin" / "args.txt").read_text() == "--interval 100"  # 10 Hz asked of tegrastats
    folder.finalise_samples()
    return folder


def test_sampler_writes_every_line_of_a_real_child_into_the_tables(
    tmp_path: Path, lines: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _sample(tmp_path, lines, monkeypatch)
    rails = folder.samples(RAILS_TABLE)
    assert rails is not None
    times = sorted(set(rails.column("t_ns").to_pylist()))
    assert len(times) == len(EXPECTED)
    rows = rails.to_pylist()
    for t, expected in zip(times, EXPECTED):
        at_t = [r for r in rows if r["t_ns"] == t]
        written = {r["rail"]: (r["instant_mw"], r["average_mw"]) for r in at_t if r["rail"] != RAILS_SUM}
        assert written == expected[9]
        (board,) = [r for r in at_t if r["board_input"] == 1]
        assert (board["rail"], board["instant_mw"], board["average_mw"]) == expected[10]
    tegra = folder.samples(TEGRA_TABLE)
    assert tegra is not None
    assert tegra.column("ram_used_mib").to_pylist() == [e[2][0] for e in EXPECTED]
    assert tegra.column("gpu_pct").to_pylist() == [e[6][0] for e in EXPECTED]
    cores = folder.samples(TEGRA_CORES_TABLE)
    assert cores is not None
    assert cores.num_rows == sum(len(e[4]) for e in EXPECTED)
    assert sum(1 - o for o in cores.column("online").to_pylist()) == 2 + 4 + 2  # the `off` cores
    temps = folder.samples(TEMPS_TABLE)
    assert temps is not None and temps.num_rows == sum(e[8] for e in EXPECTED)


def test_board_energy_is_the_input_rail_integrated_over_the_epoch(
    tmp_path: Path, lines: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Xavier NX line says 5079 mW in; over any span of its samples the energy is 5.079 W x span."""
    folder = _sample(tmp_path, [lines[6]], monkeypatch, repeat=12)
    rails = folder.samples(RAILS_TABLE)
    assert rails is not None
    times = sorted({r["t_ns"] for r in rails.to_pylist() if r["board_input"]})
    assert len(times) == 12
    start, end = times[1] + 30_000_000, times[-2] - 10_000_000  # epoch boundaries between samples
    epoch = EpochRecord(epoch=1, start_ns=start, end_ns=end, images=40, loss=0.0)
    (source,) = energy(folder, [epoch])
    assert source.source == "tegrastats VDD_IN (board input)"
    expected_j = 5.079 * (end - start) / 1e9
    assert source.epoch_j[0] == pytest.approx(expected_j, rel=1e-9)
    assert source.j_per_image == pytest.approx(expected_j / 40, rel=1e-9)
    outside = EpochRecord(epoch=2, start_ns=times[-1] + 1, end_ns=times[-1] + 10**9, images=1, loss=0.0)
    assert energy(folder, [outside])[0].epoch_j == (None,)  # not measured is not 0 J


def test_parse_line_keeps_lines_with_nothing_but_rails() -> None:
    p = parse_line("VDD_IN 100/200")
    assert p.problems == () and p.input_rail is not None and p.input_rail.instant_mw == 100


def test_agx_xavier_with_a_rail_unreadable_has_no_board_total_rather_than_a_partial_one(lines: list[str]) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (p,) = parse_lines([lines[4].replace("VDDRQ 621/621", "VDDRQ 621/")])
    assert len(caught) == 1
    assert "VDDRQ" not in {r.name for r in p.rails}
    assert p.input_rail is None  # the sum of five of its six rails is not the board's power
