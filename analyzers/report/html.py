"""`index.html`: the whole report on one page that opens from disk, with no server and no network.

Figures are linked relatively (the PNG shown, SVG/PDF a click away), tables are inlined, the style
sheet is inline; nothing is fetched from elsewhere, so the folder can be zipped and mailed.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from analyzers.render import palette
from analyzers.report import html_cases
from analyzers.report.outputs import Output
from analyzers.report.runs import LoadedRun
from tracer.core import output as out_file
from tracer.core.workload import NOT_RECORDED, Known

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; } h3 { margin: 1.4em 0 0.3em; }
.table-scroll { max-width: 100%; overflow-x: auto; margin: 0.5em 0; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.4em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; }
table.headline { width: 100%; } table.headline th { vertical-align: bottom; }
table.headline th:first-child { width: 20%; }
table.headline td { white-space: nowrap; } table.headline td.cause { white-space: normal; color: #8a1c12; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.tag, .range { color: #666; font-size: 0.85em; white-space: normal; }
tr.failed td { background: #fdecea; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px; margin-right: 0.3em; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption, .files, .muted, .caption, .common { color: #555; font-size: 0.9em; }
.common { margin: 0.2em 0; }
ul.verdicts { margin: 0.3em 0 1em; padding-left: 1.3em; } ul.verdicts li { margin: 0.15em 0; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fafafa; padding: 0.5em; font-size: 0.85em; }
details summary { cursor: pointer; color: #555; }
nav a { margin-right: 1em; }
@media print {
  body { max-width: none; margin: 0; padding: 0; font-size: 10pt; }
  nav, .files, details { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; } h3 { break-after: avoid; }
  section.case, figure, tr { break-inside: avoid; page-break-inside: avoid; }
  .table-scroll { overflow: visible; }
  table { font-size: 8pt; } th { background: #eee; -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  tr.failed td, .swatch { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  a { color: inherit; text-decoration: none; }
  figure img { max-height: 24cm; border: none; }
}
"""
"""Each case's table is small enough to fit at 1,280 px and on paper (`headline.HEADLINE_LIMIT` columns);
any table still sits in a `.table-scroll` box as wide as the page, so none ever widens it; `pre` text wraps.
`tests/analyzers/report/test_page.py` renders the page in headless Chromium at 1,280 px and checks it."""


def write_index(
    out: Path,
    runs: Sequence[LoadedRun],
    outputs: Sequence[Output],
    warnings: Sequence[str],
    contended: Sequence[str] = (),
    single_file: bool = False,
) -> Path:
    """The page. `warnings`: run folders that could not be read (left out: "Skipped"); `contended`: runs
    taken on a busy machine, which are in the tables, marked (listed under their own heading).
    `single_file`: the figures embedded (PNG data URLs) and no link to another file, so the page alone can
    be mailed or attached to a paper's supplement."""
    numbers = _figure_numbers(outputs)
    page = _Page(out, single_file)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>dl-tracer report</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>dl-tracer report</h1>",
        f'<p class="muted">{len(runs)} runs; every number below is recomputed from the run folders.'
        + (" Tables as CSV, figures as SVG and PDF: in the report's folder." if single_file else "")
        + "</p>",
        *_gpu_lines(runs),
        _nav(outputs),
    ]
    for output in outputs:
        anchor = _anchor(output)
        if output.kind == "table":
            parts.append(f'<h2 id="{anchor}">{_e(output.title)}</h2>')
            parts.append(_table(output, page))
        elif output.kind == "findings":
            parts.append(f'<h2 id="{anchor}">{_e(output.title)}</h2>')
            parts.append(_findings(output, numbers, page))
        elif output.kind == "section":
            parts.append(f'<h2 id="{anchor}">{_e(output.title)}</h2>')
            parts.append(_section(output, page))
        else:
            parts.append(f'<h2 id="{anchor}">Figure {numbers[anchor]}: {_e(output.title)}</h2>')
            parts.append(_figure(output, page))
    parts.append('<h2 id="runs">Runs</h2>')
    parts.append(_runs_table(runs))
    if contended:
        parts.append(
            "<h3>Contended runs (in the tables above, marked contended: their times compare with no quiet run's)</h3>"
            "<ul>" + "".join(f"<li>{_e(w)}</li>" for w in contended) + "</ul>"
        )
    if warnings:
        parts.append(
            "<h3>Skipped (unreadable, in no table)</h3><ul>" + "".join(f"<li>{_e(w)}</li>" for w in warnings) + "</ul>"
        )
    parts.append("</body></html>\n")
    path = out / "index.html"
    out_file.write_text(path, "\n".join(parts), "report --out")
    return path


@dataclass(frozen=True)
class _Page:
    out: Path
    single_file: bool

    def links(self, files: Sequence[Path]) -> str:
        """Links to a part's files (CSV, Markdown, SVG, PDF); none on a single-file page."""
        if self.single_file or not files:
            return ""
        named = len({f.suffix for f in files}) < len(files)  # several of one kind: by name (summary.md, ...)
        links = (
            f'<a href="{_e(f.relative_to(self.out).as_posix())}">{_e(f.name if named else f.suffix[1:].upper())}</a>'
            for f in files
        )
        return '<p class="files">' + " · ".join(links) + "</p>"

    def image(self, png: Path) -> str:
        if self.single_file:
            return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
        return png.relative_to(self.out).as_posix()


def _figure_numbers(outputs: Sequence[Output]) -> dict[str, int]:
    """Each figure's anchor (its file stem) and its number on the page."""
    return {_anchor(o): n for n, o in enumerate((o for o in outputs if o.kind == "figure"), 1)}


def _known(value: int | None) -> str:
    return NOT_RECORDED if value is None else str(value)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _anchor(output: Output) -> str:
    return output.files[0].stem if output.files else "".join(c if c.isalnum() else "-" for c in output.title)


def _nav(outputs: Sequence[Output]) -> str:
    links = [
        f'<a href="#{_anchor(o)}">{_e(o.title.split(":")[0])}</a>'
        for o in outputs
        if o.kind in ("table", "section", "findings")
    ]
    links.append(f'<span class="muted">{sum(o.kind == "figure" for o in outputs)} figures below</span>')
    return "<nav>" + "".join(links) + ' <a href="#runs">Runs</a></nav>'


def _table(output: Output, page: _Page) -> str:
    if not output.rows:
        return f'<p class="muted">No {output.device.upper()} runs were given.</p>' + page.links(output.files)
    return html_cases.case_tables(output.rows, output.device) + page.links(output.files)


def _findings(output: Output, numbers: dict[str, int], page: _Page) -> str:
    """The cases in sentences, the study's claims as a table, and the full diagnosis folded away."""
    parts = [html_cases.findings(output.findings, numbers)]
    claims, *sections = output.text
    parts.append(_section_text([claims]))
    if sections:
        parts.append(
            "<details><summary>The full diagnosis: every run ranked, its verdicts, the differences per pair</summary>"
            + _section_text(sections)
            + "</details>"
        )
    return "".join(parts) + page.links(output.files)


def _section(output: Output, page: _Page) -> str:
    return _section_text(output.text) + page.links(output.files)


def _section_text(text: Sequence[tuple[str, list[str]]]) -> str:
    """Headings with their lines; Markdown table lines become an HTML table."""
    parts = []
    for heading, lines in text:
        parts.append(f"<h3>{_e(heading)}</h3>")
        rows = [ln for ln in lines if ln.startswith("|") and not ln.startswith("| ---")]
        if rows:
            cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in rows]
            head = "".join(f"<th>{_e(c)}</th>" for c in cells[0])
            body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in cells[1:])
            parts.append(_scroll(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"))
        elif any(ln[:1].isspace() for ln in lines):  # indented (the full diagnosis): kept as laid out
            parts.append("<pre>" + _e("\n".join(lines)) + "</pre>")
        else:  # sentences (why frameworks differ, the input pipeline in words): one item each
            parts.append('<ul class="lines">' + "".join(f"<li>{_e(ln)}</li>" for ln in lines if ln.strip()) + "</ul>")
    return "".join(parts)


def _figure(output: Output, page: _Page) -> str:
    png = next((f for f in output.files if f.suffix == ".png"), None)
    img = f'<img src="{_e(page.image(png))}" alt="{_e(output.title)}">' if png else ""
    return f"<figure>{img}<figcaption>{_e(output.caption)}</figcaption>{page.links(output.files)}</figure>"


def _gpu_lines(runs: Sequence[LoadedRun]) -> list[str]:
    """The GPUs the GPU runs used (name, driver, CUDA from run.json), one line, or nothing."""
    gpus = dict.fromkeys(
        r.record.environment.gpu_text
        for r in runs
        if r.record.measurement.device == "gpu" and r.record.environment.gpu_text
    )
    return [f'<p class="muted">GPU: {_e(" and ".join(gpus))}</p>'] if gpus else []


def _runs_table(runs: Sequence[LoadedRun]) -> str:
    rows = []
    for r in runs:
        m, known, outcome = r.record.measurement, Known.of(r.record.workload), r.record.outcome
        status = outcome.status.value + (f": {outcome.cause}" if outcome.cause else "")
        cls = "" if r.ok else ' class="failed"'
        rows.append(
            f"<tr{cls}><td>{_e(r.run_id)}</td><td>{_e(palette.label(m.framework))}</td>"
            f'<td>{_e(r.case.name)}</td><td>{_e(m.device)}</td><td class="num">{_e(_known(known.batch))}</td>'
            f'<td class="num">{_e(_known(known.epochs))}</td><td>{_e(status)}</td></tr>'
        )
    names = ("run", "framework", "case", "device", "batch", "epochs", "status")
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in names)
    return _scroll(f"<table><thead>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _scroll(table: str) -> str:
    return f'<div class="table-scroll">{table}</div>'
