"""Tables 1-2 as the page shows them: one small table per case, frameworks as rows, the study's headline
columns only (units in the headers), what every row shares said once above it and what differs as a
short tag under the framework's name. The CSV beside it (`tables.write_csv`) keeps every field.

Both the page's tables and the findings' sentences (`analyzers.report.prose`) print a number through
`cell_text`, so a sentence and the table it speaks of always show the same digits.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.figures.noise import disagree
from analyzers.report.runs import CaseKey
from analyzers.report.tables import TRACE_TAG, TableRow, rate_spread, settings_parts, status_text
from analyzers.run.run import IMPORTED

HEADLINE_LIMIT = 12  # columns a case's table may have: it reads at 1,280 px and on paper


@dataclass(frozen=True)
class Column:
    header: str  # with its unit
    field: str  # the TableRow field
    kind: str  # how `cell_text` prints it: "rate", "seconds", "pct", "mib", "joules", "share" (3 digits), or ""
    gpu_only: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("Framework", "framework", ""),
    Column("Images/s", "steady_images_per_s", "rate"),
    Column("Epoch (s)", "steady_epoch_s", "seconds"),
    Column("Data wait (% of step)", "data_wait_pct", "pct"),
    Column("CPU (% of all cores)", "cpu_pct_mean", "pct"),
    Column("Peak RSS (MiB)", "peak_rss_mib", "mib"),
    Column("GPU busy (%)", "gpu_util_pct_mean", "pct", gpu_only=True),
    Column("GPU memory held (MiB)", "gpu_mem_nvml_mib", "mib", gpu_only=True),
    Column("Energy (J/image)", "energy_j_per_image", "joules", gpu_only=True),
    Column("MFU (% of peak)", "mfu_pct", "share"),
    Column("Runs", "runs_ok", ""),
    Column("Status", "status", ""),
)
NUMERIC = tuple(c for c in COLUMNS if c.kind)


def columns(device: str) -> tuple[Column, ...]:
    return COLUMNS if device == "gpu" else tuple(c for c in COLUMNS if not c.gpu_only)


def number(value: float, kind: str) -> str:
    """A value as the page prints it: three significant digits, whole numbers from 100 on (with separators),
    shares and memory as whole numbers."""
    if kind in ("pct", "mib"):
        return f"{value:,.0f}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def cell_text(row: TableRow, field: str) -> str:
    """The number of `field` in `row` as its table cell shows it ('-' where there is none)."""
    kind = next(c.kind for c in COLUMNS if c.field == field)
    value = getattr(row, field)
    if value is None:
        return "-"
    text = number(value, kind)
    return text + ("*" if field in ("steady_images_per_s", "steady_epoch_s") and row.steady_includes_warmup else "")


def value_of(text: str) -> float:
    """The number a cell shows, back as a float (a test and a sentence's ratio read it)."""
    return float(text.rstrip("*").replace(",", ""))


def spread_text(row: TableRow) -> str:
    """'1,240-1,280' for a row that pools repeats: the range of its images/s; '' for one run."""
    if row.runs_ok < 2 or row.steady_images_per_s_min is None or row.steady_images_per_s_max is None:
        return ""
    return f"{number(row.steady_images_per_s_min, 'rate')}-{number(row.steady_images_per_s_max, 'rate')}"


def short_status(row: TableRow) -> str:
    """One or two words; the whole text (`tables.status_text`) goes into the cell's tooltip and the CSV."""
    if row.imported:
        return "imported trace"
    if row.status != "ok":
        return row.status
    words = ["ok"]
    if row.runs_failed:
        words.append(f"{row.runs_failed} left out")
    if row.runs_contended:
        words.append("contended")
    if (rate := rate_spread(row)) and disagree(rate):
        words.append("repeats disagree")
    return ", ".join(words)


@dataclass(frozen=True)
class CaseTable:
    """One case's rows, with what they share and what tells each apart."""

    key: CaseKey
    rows: tuple[TableRow, ...]
    tags: tuple[str, ...]  # per row: its settings that not every row shares ('' when none)
    common: tuple[str, ...]  # settings every row shares
    energy_sources: tuple[str, ...]

    @property
    def device(self) -> str:
        return self.rows[0].device

    def full_status(self, i: int) -> str:
        return status_text(self.rows[i])

    def label(self, i: int) -> str:
        """'PyTorch (trace nsys)': the framework with its tag, as the sentences name a row."""
        from analyzers.render import palette

        row = self.rows[i]
        return palette.label(row.framework) + (f" ({self.tags[i]})" if self.tags[i] else "")


def row_id(row: TableRow) -> str:
    """What names a row on the page (its first run id): a sentence's number points at its cell by it."""
    return row.run_ids.split(" ")[0]


def _tag(parts: list[str], traced: bool) -> str:
    """The settings that tell a row apart; 'untraced' where other rows of its case ran under a tracer."""
    if traced and not any(p.startswith(TRACE_TAG) for p in parts):
        parts = [*parts, "untraced"]
    return ", ".join(parts)


def case_tables(rows: list[TableRow]) -> list[CaseTable]:
    """The rows of Table 1 or 2 split by case, in their order."""
    groups: dict[CaseKey, list[TableRow]] = {}
    for row in rows:
        key = (
            CaseKey(row.model, row.dataset, IMPORTED, 0)
            if row.imported
            else CaseKey(row.model, row.dataset, row.device, row.batch)
        )
        groups.setdefault(key, []).append(row)
    out = []
    for key, group in groups.items():
        parts = [settings_parts(row.settings) for row in group]
        common = [p for p in parts[0] if all(p in other for other in parts[1:])] if parts else []
        traced = any(p.startswith(TRACE_TAG) for mine in parts for p in mine)
        tags = tuple(_tag([p for p in mine if p not in common], traced) for mine in parts)
        sources = tuple(dict.fromkeys(row.energy_source for row in group if not row.imported))
        out.append(CaseTable(key, tuple(group), tags, tuple(common), sources))
    return out
