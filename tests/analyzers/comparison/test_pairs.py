"""Issue 26: runs differing only in --data are a pair; the input pipeline's share comes from the pair,
and the report, Table 1 and the diagnosis use it. On real `tracer profile --data all` runs of a model
starved by large photos (files waits for its batches; synthetic does not)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from analyzers.comparison.pairs import data_pairs, pair_beside, pair_key
from analyzers.diagnosis import diagnose
from analyzers.figures.steady import throughput
from analyzers.report import collect_runs, write_report
from analyzers.report.tables import table_rows
from tracer.core.runfolder import RunFolder
from tracer.core.schema import DATA_FILES, DATA_MEMORY, DATA_MODES, DATA_SYNTHETIC


def test_the_three_runs_are_one_pair(data_all_runs: tuple[list[RunFolder], str]) -> None:
    folders, _ = data_all_runs
    (pair,) = data_pairs(folders)
    assert pair.modes == DATA_MODES
    assert pair.run_ids == tuple((f.run_id,) for f in folders)
    rates = {m: throughput([f.epochs()]).images_per_s for m, f in zip(DATA_MODES, folders)}
    assert all(pair.rate(m) == pytest.approx(rates[m].median) for m in DATA_MODES)  # type: ignore[union-attr]
    share = pair.input_share
    assert share == pytest.approx(1 - pair.rate(DATA_FILES) / pair.rate(DATA_SYNTHETIC))  # type: ignore[operator]
    assert share is not None and share > 0.5  # 2000 x 1500 photos for a 32 px input: the loader is most of it
    assert pair.speedup(DATA_MEMORY) is not None and pair.speedup(DATA_MEMORY) > 1  # type: ignore[operator]
    assert pair_beside(folders[0]) == pair  # found among the runs beside it
    assert data_pairs(folders[:1]) == []  # one mode alone is no pair


def _share_words(folders: list[RunFolder]) -> str:
    """What the sentence says of the input share: its value, or, where the runs were contended (a busy
    machine) or within noise, that it is not measurable here (never a share outside [0, 100])."""
    (pair,) = data_pairs(folders)
    return "not measurable here" if pair.share_unmeasurable() else "the input pipeline costs"


def _memory_words(folders: list[RunFolder]) -> str:
    (pair,) = data_pairs(folders)
    return "fed from memory it runs within noise" if any(pair.contended) else "fed from memory this framework runs"


def test_pair_key_ignores_only_data(data_all_runs: tuple[list[RunFolder], str]) -> None:
    record = data_all_runs[0][0].read_record()
    memory = record.with_spec(dataclasses.replace(record.spec, data=DATA_MEMORY))
    other_batch = record.with_spec(dataclasses.replace(record.spec, batch=record.spec.batch + 1))
    assert pair_key(memory) == pair_key(record)
    assert pair_key(other_batch) != pair_key(record)


def test_input_bound_names_the_paired_runs(data_all_runs: tuple[list[RunFolder], str]) -> None:
    folders, _ = data_all_runs
    verdict = next(v for v in diagnose(folders[0]) if v.rule == "input-bound")
    assert verdict.fired, verdict
    assert _share_words(folders) in verdict.finding and _memory_words(folders) in verdict.finding
    names = [e.name for e in verdict.evidence]
    assert all(f"images/s fed from {m} (paired run)" in names for m in DATA_MODES)
    synthetic = next(v for v in diagnose(folders[2]) if v.rule == "input-bound")
    assert not synthetic.fired  # one batch on the device: nothing to wait for


def test_table1_and_the_report_show_the_modes_side_by_side(
    data_all_runs: tuple[list[RunFolder], str], tmp_path: Path
) -> None:
    folders, _ = data_all_runs
    runs, _ = collect_runs([folders[0].path.parent])
    rows = table_rows(runs, "cpu")
    assert [r.data for r in rows] == list(DATA_MODES)
    assert [("data " in r.settings) for r in rows] == [False, True, True]  # files is the default, unnamed
    out = tmp_path / "report"
    write_report(runs, out, formats=("png",))
    section = (out / "input-pipeline.md").read_text()
    assert "images/s, files | images/s, memory | images/s, synthetic | input share of the epoch" in section
    assert "pytorch | mobilenet_v2" in section
    html = (out / "index.html").read_text()
    assert "Input pipeline: files, memory and synthetic data side by side" in html
    assert _share_words(folders) in html and not re.search(r"(?<![\w.)])-\d+ %", html)
