"""Jetson boards: `tegrastats` lines parsed into sample tables, and the child process that prints them.

A Jetson has no NVML, so its GPU load, clocks, temperatures and power rails are told by NVIDIA's
`tegrastats` (one line per interval), which every JetPack ships. jetson-stats (`jtop`) gives the same
numbers only through its own root service (`sudo pip3 install jetson-stats`, `jtop.service`,
`/run/jtop.sock`) installed on the board; reading tegrastats needs nothing installed (docs/guide/energy.md).

The format differs per board and JetPack: rails with or without `mW`, `off` cores, `GR3D_FREQ 0%@[510]`
(per-GPC clocks) or no clock at all, an optional `MM-DD-YYYY HH:MM:SS` prefix. A line broken in a way
not foreseen gives one warning and whatever could be read, never an exception.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable

from tracer.core import schema
from tracer.core.runfolder import CsvStream, RunFolder
from tracer.core.schema import RAILS_TABLE, TEGRA_CORES_TABLE, TEGRA_TABLE, TEMPS_TABLE

TEGRA_COLUMNS = schema.TEGRA.columns
TEGRA_CORE_COLUMNS = schema.TEGRA_CORES.columns
TEMP_COLUMNS = schema.TEMPS.columns
RAIL_COLUMNS = schema.RAILS.columns

# The rail that measures the whole board's input, by board family, in the order tried.
INPUT_RAILS = ("VDD_IN", "POM_5V_IN", "VIN_SYS_5V0")
# AGX Xavier has no input rail: its rails (INA3221 pairs) together are the board's consumption.
AGX_XAVIER_RAILS = frozenset({"GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"})
RAILS_SUM = "sum of rails"
TEGRASTATS_FALLBACK = Path("/usr/bin/tegrastats")
FLUSH_EVERY_S = 0.5


class TegrastatsWarning(UserWarning):
    """A tegrastats line with a part this parser does not understand (the rest of it is kept)."""


@dataclass(frozen=True)
class Core:
    core: int
    online: bool
    load_pct: float | None
    mhz: float | None


@dataclass(frozen=True)
class Rail:
    name: str
    instant_mw: float
    average_mw: float


@dataclass(frozen=True)
class TegraLine:
    """Everything one tegrastats line says; None where the board does not print a value."""

    timestamp: str | None
    ram_used_mib: float | None
    ram_total_mib: float | None
    swap_used_mib: float | None
    swap_total_mib: float | None
    cores: tuple[Core, ...]
    emc_pct: float | None
    emc_mhz: float | None
    gpu_pct: float | None
    gpu_mhz: float | None
    temps: tuple[tuple[str, float], ...]
    rails: tuple[Rail, ...]
    problems: tuple[str, ...] = ()

    @property
    def input_rail(self) -> Rail | None:
        """The board's input power: its input rail, or on AGX Xavier the sum of its rails."""
        by_name = {r.name: r for r in self.rails}
        for name in INPUT_RAILS:
            if name in by_name:
                return by_name[name]
        if AGX_XAVIER_RAILS <= set(by_name):
            rails = [by_name[n] for n in sorted(AGX_XAVIER_RAILS)]
            return Rail(RAILS_SUM, sum(r.instant_mw for r in rails), sum(r.average_mw for r in rails))
        return None


_TIMESTAMP = re.compile(r"^\s*(\d\d-\d\d-\d{4} \d\d:\d\d:\d\d)\s+")
_RAM = re.compile(r"\bRAM (\d+)/(\d+)MB")
_SWAP = re.compile(r"\bSWAP (\d+)/(\d+)MB")
_CPU = re.compile(r"\bCPU \[([^\]]*)\]")
_CORE = re.compile(r"^(\d+)%(?:@(\d+))?$")
_EMC = re.compile(r"\bEMC_FREQ (\d+)%(?:@(\d+))?")
_GR3D = re.compile(r"\bGR3D_FREQ (\d+)%(?:@(\[[\d,]+\]|\d+))?")
_TEMP = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C\b")
_RAIL = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*) (\d+)(?:mW)?/(\d+)(?:mW)?(?=\s|$)")
_NOT_RAILS = frozenset({"RAM", "SWAP", "IRAM"})
_IGNORED = re.compile(r"\((?:lfb|cached) [^)]*\)|\bIRAM \d+/\d+kB(?:\(lfb \d+kB\))?")
# What may remain once every known field is taken out: engine names and their numbers (APE 150,
# MTS fg 0% bg 1%, VIC_FREQ 601, NVENC 1075 ...). Anything else is a part not understood.
_HARMLESS = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?%?|\d+%@\d+)$")


def parse_line(line: str) -> TegraLine:
    """One line; `problems` lists what could not be understood (empty for a well-formed line)."""
    text = line.strip()
    problems: list[str] = []
    taken: list[tuple[int, int]] = []

    def find(pattern: re.Pattern[str]) -> re.Match[str] | None:
        m = pattern.search(text)
        if m:
            taken.append(m.span())
        return m

    stamp = find(_TIMESTAMP)
    ram = find(_RAM)
    swap = find(_SWAP)
    cores: list[Core] = []
    cpu = find(_CPU)
    if cpu:
        for i, entry in enumerate(e.strip() for e in cpu.group(1).split(",")):
            if entry == "off":
                cores.append(Core(i, False, None, None))
                continue
            m = _CORE.match(entry)
            if m is None:
                problems.append(f"CPU core {i} is '{entry}'")
                cores.append(Core(i, True, None, None))
                continue
            cores.append(Core(i, True, float(m.group(1)), _num(m.group(2))))
    emc = find(_EMC)
    gr3d = find(_GR3D)
    gpu_mhz = None
    if gr3d and gr3d.group(2):
        clocks = [float(c) for c in gr3d.group(2).strip("[]").split(",") if c]
        gpu_mhz = max(clocks) if clocks else None
    temps = []
    for m in _TEMP.finditer(text):
        taken.append(m.span())
        temps.append((m.group(1), float(m.group(2))))
    rails = []
    for m in _RAIL.finditer(text):
        if m.group(1) in _NOT_RAILS:
            continue
        taken.append(m.span())
        rails.append(Rail(m.group(1), float(m.group(2)), float(m.group(3))))
    for m in _IGNORED.finditer(text):
        taken.append(m.span())
    rest = _remove_spans(text, taken)
    odd = [tok for tok in rest.split() if not _HARMLESS.match(tok)]
    if odd:
        problems.append("not understood: " + " ".join(odd))
    if ram is None and not rails:
        problems.append("no RAM figure and no power rail: not a tegrastats line")
    return TegraLine(
        timestamp=stamp.group(1) if stamp else None,
        ram_used_mib=_num(ram.group(1)) if ram else None,
        ram_total_mib=_num(ram.group(2)) if ram else None,
        swap_used_mib=_num(swap.group(1)) if swap else None,
        swap_total_mib=_num(swap.group(2)) if swap else None,
        cores=tuple(cores),
        emc_pct=_num(emc.group(1)) if emc else None,
        emc_mhz=_num(emc.group(2)) if emc else None,
        gpu_pct=_num(gr3d.group(1)) if gr3d else None,
        gpu_mhz=gpu_mhz,
        temps=tuple(temps),
        rails=tuple(rails),
        problems=tuple(problems),
    )


def parse_lines(lines: Iterable[str]) -> list[TegraLine]:
    """Every non-empty line; each line with problems gives exactly one TegrastatsWarning."""
    out = []
    for line in lines:
        if not line.strip():
            continue
        parsed = parse_line(line)
        if parsed.problems:
            warnings.warn(_warning_text(line, parsed), TegrastatsWarning, stacklevel=2)
        out.append(parsed)
    return out


def _warning_text(line: str, parsed: TegraLine) -> str:
    return f"tegrastats line partly read ({'; '.join(parsed.problems)}): {line.strip()[:160]}"


def _num(value: str | None) -> float | None:
    return float(value) if value is not None else None


def _remove_spans(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            chars[i] = " "
    return "".join(chars)


def find_tegrastats(has_nvml: bool) -> str | None:
    """The board's tegrastats where this is a Jetson: no NVML, and tegrastats on PATH or in /usr/bin."""
    if has_nvml:
        return None
    found = shutil.which("tegrastats")
    if found:
        return found
    if TEGRASTATS_FALLBACK.is_file() and os.access(TEGRASTATS_FALLBACK, os.X_OK):
        return str(TEGRASTATS_FALLBACK)
    return None


class TegrastatsSampler:
    """Runs `tegrastats --interval MS` as a child for the length of the run and streams each line it
    prints into the tegra, tegra_cores, temps and rails tables (time-stamped when the line is read)."""

    def __init__(self, folder: RunFolder, executable: str, hz: float) -> None:
        self.folder = folder
        self.executable = executable
        self.interval_ms = max(1, round(1000.0 / hz)) if hz > 0 else 1000
        self.lines = 0
        self.warnings: list[str] = []
        self.error: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._thread = threading.Thread(target=self._run, name="tracer-tegrastats", daemon=True)

    def start(self) -> None:
        try:
            self._proc = subprocess.Popen(
                [self.executable, "--interval", str(self.interval_ms)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        except OSError as e:
            self.error = f"cannot start {self.executable}: {e}"
            return
        self._thread.start()

    def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        streams = {
            name: CsvStream(self.folder.sample_stream_path(name), columns)
            for name, columns in (
                (TEGRA_TABLE, TEGRA_COLUMNS),
                (TEGRA_CORES_TABLE, TEGRA_CORE_COLUMNS),
                (TEMPS_TABLE, TEMP_COLUMNS),
                (RAILS_TABLE, RAIL_COLUMNS),
            )
        }
        try:
            self._read(self._proc.stdout, streams)
        except Exception as e:  # noqa: BLE001 - the run goes on; the cause is recorded
            self.error = f"{type(e).__name__}: {e}"
        finally:
            for s in streams.values():
                s.close()

    def _read(self, stdout: IO[str], streams: dict[str, CsvStream]) -> None:
        last_flush = time.monotonic()
        for line in stdout:
            if not line.strip():
                continue
            t_ns = time.time_ns()
            parsed = parse_line(line)
            if parsed.problems:
                self.warnings.append(_warning_text(line, parsed))
            self.lines += 1
            append_rows(streams, t_ns, parsed)
            if time.monotonic() - last_flush >= FLUSH_EVERY_S:
                for s in streams.values():
                    s.flush()
                last_flush = time.monotonic()


def append_rows(streams: dict[str, CsvStream], t_ns: int, p: TegraLine) -> None:
    """One parsed line as rows of the four tables (empty cells where the board says nothing)."""
    streams[TEGRA_TABLE].append(
        (t_ns, p.ram_used_mib, p.ram_total_mib, p.swap_used_mib, p.swap_total_mib)
        + (p.emc_pct, p.emc_mhz, p.gpu_pct, p.gpu_mhz)
    )
    for c in p.cores:
        streams[TEGRA_CORES_TABLE].append((t_ns, c.core, int(c.online), c.load_pct, c.mhz))
    for name, temp in p.temps:
        streams[TEMPS_TABLE].append((t_ns, name, temp))
    board = p.input_rail
    for r in p.rails:
        streams[RAILS_TABLE].append((t_ns, r.name, r.instant_mw, r.average_mw, int(board is r)))
    if board is not None and board.name == RAILS_SUM:
        streams[RAILS_TABLE].append((t_ns, board.name, board.instant_mw, board.average_mw, 1))
