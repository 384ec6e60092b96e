"""Runs that differ only in `--data` are a pair: the same framework, model, case and settings fed from
the JPEG files, from memory and from a synthetic batch on the device. From a pair comes what the input
pipeline costs: its share of the epoch, 1 - files / synthetic throughput (the MLPerf convention: the
synthetic run is the framework's compute ceiling), and how much faster the framework trains fed from memory.

Throughput is each run's steady images/s (`analyzers.figures.steady.throughput`, the Table 1 figure), the
median over the finished runs of one mode; a mode without a finished run has none.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from analyzers.figures.contention import run_contention
from analyzers.figures.noise import why_not_ordered
from analyzers.figures.repeats import spec_key
from analyzers.figures.steady import WARMUP_EPOCHS, Spread, throughput
from analyzers.render.display import ratio_text
from analyzers.run.memo import per_run
from analyzers.run.run import Run
from tracer.core import output as out_file
from tracer.core.cases import RunKey
from tracer.core.records import RunRecord
from tracer.core.runfolder import list_runs
from tracer.core.schema import DATA_FILES, DATA_MEMORY, DATA_MODES, DATA_SYNTHETIC


def pair_key(record: RunRecord) -> str:
    """The run's spec (analyzers.figures.repeats.spec_key) as if it had read files: equal for the runs of a pair.
    The worker's knobs are left out: a data mode sets its own loader knobs (no workers, no decoder), and
    the rest follow from the spec on one machine."""
    return json.dumps(spec_key(record) | {"data": DATA_FILES}, sort_keys=True, default=str)


@dataclass(frozen=True)
class DataPair:
    """The runs of one spec in two or three data modes, with each mode's steady throughput."""

    framework: str
    model: str
    dataset: str
    device: str
    batch: int
    images_per_s: tuple[Spread | None, ...]  # one per DATA_MODES entry (files, memory, synthetic)
    run_ids: tuple[tuple[str, ...], ...]  # one per DATA_MODES entry, oldest first
    contended: tuple[bool, ...] = ()  # one per DATA_MODES entry: some run of the mode was contended

    @property
    def key(self) -> RunKey:
        """The identity its runs share (`tracer.core.cases.RunKey`)."""
        return RunKey.of(self)

    def rate(self, mode: str) -> float | None:
        value = self.images_per_s[DATA_MODES.index(mode)]
        return value.median if value is not None else None

    @property
    def input_share(self) -> float | None:
        """The input pipeline's share of the epoch: 1 - files / synthetic throughput (None without both)."""
        files, synthetic = self.rate(DATA_FILES), self.rate(DATA_SYNTHETIC)
        if files is None or not synthetic:
            return None
        return 1.0 - files / synthetic

    def share_unmeasurable(self) -> str:
        """Why the input share is not measurable here ('' where it is): a contended run, or files and
        synthetic throughputs within noise of each other (analyzers.figures.noise), which could print a
        negative share."""
        files, synthetic = (self.images_per_s[DATA_MODES.index(m)] for m in (DATA_FILES, DATA_SYNTHETIC))
        busy = (self._busy(DATA_MODES.index(DATA_FILES)), self._busy(DATA_MODES.index(DATA_SYNTHETIC)))
        why = why_not_ordered(files, synthetic, busy)
        if why:
            return f"files and synthetic throughputs within noise: {why}"
        share = self.input_share
        return "synthetic no faster than files" if share is not None and share < 0 else ""

    def share_text(self) -> str:
        """'88 %', or 'not measurable here (why)': a share of the epoch lies in [0, 100] or is not printed."""
        share = self.input_share
        if share is None:
            return "-"
        why = self.share_unmeasurable()
        return f"not measurable here ({why})" if why else f"{100 * share:.0f} %"

    def speedup(self, mode: str) -> float | None:
        """How many times faster than from files this framework trains in `mode`."""
        files, other = self.rate(DATA_FILES), self.rate(mode)
        if not files or other is None:
            return None
        return other / files

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(m for m, ids in zip(DATA_MODES, self.run_ids) if ids)

    def sentence(self) -> str:
        """E.g. 'the input pipeline costs 88 % of the epoch; fed from memory this framework runs 6.1x faster'."""
        parts = []
        share = self.input_share
        why = self.share_unmeasurable()
        if share is not None and not why:
            parts.append(f"the input pipeline costs {100 * share:.0f} % of the epoch (1 - files/synthetic images/s)")
        elif share is not None:
            parts.append(f"the input pipeline's share of the epoch is not measurable here ({why})")
        memory = self.speedup(DATA_MEMORY)
        i_files, i_memory = DATA_MODES.index(DATA_FILES), DATA_MODES.index(DATA_MEMORY)
        busy = (self._busy(i_files), self._busy(i_memory))
        if memory is not None and why_not_ordered(self.images_per_s[i_files], self.images_per_s[i_memory], busy):
            parts.append("fed from memory it runs within noise of fed from files")
        elif memory is not None:
            parts.append(f"fed from memory this framework runs {memory:.1f}x {'faster' if memory >= 1 else 'slower'}")
        return "; ".join(parts)

    def _busy(self, index: int) -> bool:
        return self.contended[index] if index < len(self.contended) else False


def data_pairs(folders: Iterable[Run], warmup: int = WARMUP_EPOCHS) -> list[DataPair]:
    """Every pair among `folders` (runs of one spec in two data modes or more), in the order of their first run."""
    groups: dict[str, list[tuple[Run, RunRecord]]] = {}
    for folder in folders:
        record = folder.read_record()
        if record.spec is not None:  # a command's or an import's data mode is its own: it pairs with none
            groups.setdefault(pair_key(record), []).append((folder, record))
    pairs = []
    for runs in groups.values():
        if len({_data(r) for _, r in runs}) > 1:
            pairs.append(_pair(runs, warmup))
    return pairs


def pair_of(folder: Run, candidates: Iterable[Run], warmup: int = WARMUP_EPOCHS) -> DataPair | None:
    """The pair `folder` belongs to among `candidates` (e.g. the runs beside it), or None."""
    key = pair_key(folder.read_record())
    mine = [f for f in candidates if f.path != folder.path and _key_or_none(f) == key]
    found = data_pairs([folder, *mine], warmup)
    return found[0] if found else None


@per_run
def pair_beside(run: Run) -> DataPair | None:
    """The pair `run` makes with the runs in the same folder of runs (where `tracer profile --data all`
    and a campaign put them), or None; looked for once per run."""
    key = pair_key(run.read_record())
    paths = _keys_beside(run.path.parent, _mtime_ns(run.path.parent)).get(key, ())
    mine = [Run.open(p, run.warmup) for p in paths if p != run.path]
    found = data_pairs([run, *mine], run.warmup) if mine else []
    return found[0] if found else None


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@functools.lru_cache(maxsize=8)
def _keys_beside(parent: Path, mtime_ns: int) -> dict[str, tuple[Path, ...]]:
    """pair_key -> the run folders in `parent` (cached until a run is added or removed: the mtime changes),
    so diagnosing every run of a campaign reads each run.json once, not once per run."""
    keys: dict[str, list[Path]] = {}
    for f in list_runs(parent):
        key = _key_or_none(Run.open(f))
        if key is not None:
            keys.setdefault(key, []).append(f.path)
    return {k: tuple(v) for k, v in keys.items()}


def _key_or_none(folder: Run) -> str | None:
    try:
        return pair_key(folder.read_record())
    except Exception:  # noqa: BLE001 - a damaged neighbour is not part of any pair
        return None


def _data(record: RunRecord) -> str:
    return record.spec.data if record.spec else ""


def _pair(runs: Sequence[tuple[Run, RunRecord]], warmup: int) -> DataPair:
    spec = runs[0][1].spec
    assert spec is not None  # data_pairs groups built-in runs only
    rates: list[Spread | None] = []
    ids: list[tuple[str, ...]] = []
    busy: list[bool] = []
    for mode in DATA_MODES:
        mine = sorted((f for f, r in runs if _data(r) == mode), key=lambda f: f.run_id)
        ok = [f for f in mine if f.read_record().rankable]
        rates.append(throughput([f.epochs() for f in ok], warmup).images_per_s if ok else None)
        ids.append(tuple(f.run_id for f in mine))
        busy.append(any(run_contention(f).contended for f in ok))
    return DataPair(
        spec.framework, spec.model, spec.dataset, spec.device, spec.batch, tuple(rates), tuple(ids), tuple(busy)
    )


def input_share_table(pairs: Sequence[DataPair]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(header, rows) of the pairs table that compare, the report and the docs print."""
    header = (
        "framework",
        "model",
        "dataset",
        "device",
        "batch",
        *(f"images/s, {m}" for m in DATA_MODES),
        "input share of the epoch",
        "memory / files",
    )
    rows = []
    for p in pairs:
        rates = tuple("-" if v is None else _rate(v) for v in p.images_per_s)
        share = p.share_text()
        memory = p.speedup(DATA_MEMORY)
        rows.append(
            (
                p.framework,
                p.model,
                p.dataset,
                p.device,
                str(p.batch),
                *rates,
                share,
                ratio_text(memory),
            )  # fmt: skip
        )
    return header, rows


def _rate(value: Spread) -> str:
    return f"{value.median:.1f}" if value.n < 2 else f"{value.median:.1f} ({value.low:.1f}-{value.high:.1f})"


CAPTION = (
    "Runs that differ only in --data: steady images/s fed from the JPEG files (each framework's own pipeline),"
    " from memory (decoded once before the first epoch, batched from RAM) and from one synthetic batch on the"
    " device (the compute ceiling); input share = 1 - files / synthetic images/s, the share of the epoch the"
    " input pipeline costs. A cell pooling repeats shows the median (min-max)."
)


def markdown_lines(pairs: Sequence[DataPair]) -> list[str]:
    """The pairs table as Markdown lines (the report's section and its .md file)."""
    header, rows = input_share_table(pairs)
    lines = [CAPTION, "", "| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines


def write_csv(pairs: Sequence[DataPair], path: Path) -> None:
    """One row per pair at full precision: each mode's median images/s, the input share and memory / files."""
    header = (
        ["framework", "model", "dataset", "device", "batch"]
        + [f"images_per_s_{m}" for m in DATA_MODES]
        + ["input_share", "memory_over_files"]
        + [f"run_ids_{m}" for m in DATA_MODES]
    )
    rows = (
        [p.framework, p.model, p.dataset, p.device, p.batch]
        + [p.rate(m) for m in DATA_MODES]
        + [p.input_share, p.speedup(DATA_MEMORY)]
        + [" ".join(ids) for ids in p.run_ids]
        for p in pairs
    )
    out_file.write_csv(path, "report --out", header, rows)
