"""This machine's CPU peak: measured once (a real BLAS product), cached by machine, and read back; a cache
that cannot be written still gives the figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracer.measure import cpu_peak


def test_measured_once_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACER_CACHE", str(tmp_path))
    key = cpu_peak.machine_key("Some CPU", 2, "here")
    assert cpu_peak.cached(key) is None
    measured = cpu_peak.measure(key)
    assert measured.measured_flops_per_s > 1e8  # any core of this century does 0.1 GFLOP/s in BLAS
    assert cpu_peak.cached(key) == measured
    assert cpu_peak.cached(cpu_peak.machine_key("Some CPU", 2, "elsewhere")) is None


def test_an_unwritable_cache_still_measures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("TRACER_CACHE", str(blocked / "cache"))  # under a file: cannot be created
    assert cpu_peak.measure("k").measured_flops_per_s > 0
    assert cpu_peak.cached("k") is None


def test_nominal_from_the_name_and_flags(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\nflags\t\t: fpu avx2 fma avx512f\n")
    nominal, source = cpu_peak.nominal_peak(info)
    assert nominal is not None and nominal % (2.5e9 * 64) == 0 and "two FMA units assumed" in source
    info.write_text("model name\t: AMD EPYC\nflags\t\t: avx2 fma\n")
    assert cpu_peak.nominal_peak(info) == (None, "not known: the CPU's name states no clock")
