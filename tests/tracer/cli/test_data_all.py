"""Issue 26: `tracer profile --data all` makes three linked runs (one per data mode, a pair by spec)
and `tracer compare` shows what the input pipeline costs."""

from __future__ import annotations

import dataclasses
import re

from analyzers.comparison.pairs import data_pairs
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder
from tracer.core.schema import DATA_MODES


def test_data_all_makes_one_run_per_mode_of_one_spec(data_all_runs: tuple[list[RunFolder], str]) -> None:
    folders, printed = data_all_runs
    records = [f.read_record() for f in folders]
    assert [r.spec.data for r in records] == list(DATA_MODES)  # files, memory, synthetic in turn
    assert all(r.outcome.status.value == "ok" for r in records)
    as_files = {dataclasses.replace(r.spec, data="files") for r in records}
    assert len(as_files) == 1  # the same spec but for --data: a pair
    assert "input share of the epoch" in printed and "fed from memory " in printed


def test_compare_shows_the_input_share(data_all_runs: tuple[list[RunFolder], str]) -> None:
    folders, _ = data_all_runs
    result = run_tracer("compare", *(str(f.path) for f in folders))
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "data modes: runs that differ only in --data" in out
    assert "input share of the epoch" in out
    (pair,) = data_pairs(folders)
    # the share, or where the runs were contended or within noise, why it is not measurable (never negative)
    assert ("not measurable here" if pair.share_unmeasurable() else "the input pipeline costs") in out
    assert "fed from memory " in out
    assert not re.search(r"(?<![\w.)])-\d+ %", out)
    for mode in DATA_MODES:
        assert f"data {mode}" in out  # each column says how it was fed
    assert "decode into memory" in out
