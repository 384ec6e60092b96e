"""`index.html`: the whole report on one page that opens from disk, with no server and no network.

Figures are linked relatively (the PNG shown, SVG/PDF a click away), tables are inlined, the style
sheet is inline; nothing is fetched from elsewhere, so the folder can be zipped and mailed.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Sequence

from analyzers.render import palette
from analyzers.report import tables
from analyzers.report.build import Output
from analyzers.report.runs import LoadedRun
from tracer.core import output as out_file

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
.table-scroll { max-width: 100%; overflow-x: auto; margin: 0.5em 0; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.4em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td { background: #fdecea; }
tbody tr > :first-child { position: sticky; left: 0; background: #fff; }
tbody tr.failed > :first-child { background: #fdecea; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px; margin-right: 0.3em; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption, .files, .muted, .caption { color: #555; font-size: 0.9em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fafafa; padding: 0.5em; font-size: 0.85em; }
nav a { margin-right: 1em; }
"""
"""Every table sits in a `.table-scroll` box as wide as the page: a table that cannot fit scrolls inside it
(its first column stays in view) instead of widening the page; `pre` text wraps. `tests/analyzers/report/
test_page.py` renders the page in headless Chromium at 1,280 px and checks that nothing is wider."""


def write_index(
    out: Path,
    runs: Sequence[LoadedRun],
    outputs: Sequence[Output],
    warnings: Sequence[str],
    contended: Sequence[str] = (),
) -> Path:
    """The page. `warnings`: run folders that could not be read (left out: "Skipped"); `contended`: runs
    taken on a busy machine, which are in the tables, marked (listed under their own heading)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>dl-tracer report</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>dl-tracer report</h1>",
        f'<p class="muted">{len(runs)} runs; every number below is recomputed from the run folders.</p>',
        *_gpu_lines(runs),
        _nav(outputs),
    ]
    figure_no = 0
    for output in outputs:
        anchor = _anchor(output)
        if output.kind == "table":
            parts.append(f'<h2 id="{anchor}">{_e(output.title)}</h2>')
            parts.append(_table(output))
        elif output.kind == "section":
            parts.append(f'<h2 id="{anchor}">{_e(output.title)}</h2>')
            parts.append(_section(output, out))
        else:
            figure_no += 1
            parts.append(f'<h2 id="{anchor}">Figure {figure_no}: {_e(output.title)}</h2>')
            parts.append(_figure(output, out))
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


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _anchor(output: Output) -> str:
    return output.files[0].stem if output.files else "".join(c if c.isalnum() else "-" for c in output.title)


def _nav(outputs: Sequence[Output]) -> str:
    links = [
        f'<a href="#{_anchor(o)}">{_e(o.title.split(":")[0])}</a>' for o in outputs if o.kind in ("table", "section")
    ]
    links.append(f'<span class="muted">{sum(o.kind == "figure" for o in outputs)} figures below</span>')
    return "<nav>" + "".join(links) + ' <a href="#runs">Runs</a></nav>'


def _links(files: Sequence[Path], out: Path) -> str:
    return (
        '<p class="files">'
        + " · ".join(f'<a href="{_e(f.relative_to(out).as_posix())}">{_e(f.suffix[1:].upper())}</a>' for f in files)
        + "</p>"
    )


def _table(output: Output) -> str:
    if not output.rows:
        return f'<p class="muted">No {output.device.upper()} runs were given.</p>' + _links(
            output.files, output.files[0].parent
        )
    columns = tables.display_columns(output.device)
    head = "".join(f"<th>{_e(h).replace('/', '/<wbr>')}</th>" for h, _, _ in columns)
    body = []
    for row in output.rows:
        cells = tables.display_cells(row, output.device)
        tds = []
        for (_, name, spec), cell in zip(columns, cells):
            if name == "framework":
                swatch = f'<span class="swatch" style="background:{palette.colour(row.framework)}"></span>'
                tds.append(f"<td>{swatch}{_e(cell)}</td>")
            else:
                tds.append(f'<td class="num">{_e(cell)}</td>' if spec else f"<td>{_e(cell)}</td>")
        cls = "" if row.status == "ok" else ' class="failed"'
        body.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
    gpus = tables.table_gpus(output.rows) if output.device == "gpu" else []
    caption = f'<p class="caption">{_e(tables.caption(output.rows[0].warmup_epochs, gpus))}</p>'
    return (
        caption
        + _scroll(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
        + _links(output.files, output.files[0].parent)
    )


def _section(output: Output, out: Path) -> str:
    """Headings with their lines; Markdown table lines become an HTML table."""
    parts = []
    for heading, lines in output.text:
        parts.append(f"<h3>{_e(heading)}</h3>")
        rows = [ln for ln in lines if ln.startswith("|") and not ln.startswith("| ---")]
        if rows:
            cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in rows]
            head = "".join(f"<th>{_e(c)}</th>" for c in cells[0])
            body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in cells[1:])
            parts.append(_scroll(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"))
        else:
            parts.append("<pre>" + _e("\n".join(lines)) + "</pre>")
    return "".join(parts) + _links(output.files, out)


def _figure(output: Output, out: Path) -> str:
    png = next((f for f in output.files if f.suffix == ".png"), None)
    img = f'<img src="{_e(png.relative_to(out).as_posix())}" alt="{_e(output.title)}">' if png else ""
    return f"<figure>{img}<figcaption>{_e(output.caption)}</figcaption>{_links(output.files, out)}</figure>"


def _gpu_lines(runs: Sequence[LoadedRun]) -> list[str]:
    """The GPUs the GPU runs used (name, driver, CUDA from run.json), one line, or nothing."""
    gpus = dict.fromkeys(
        r.record.environment.gpu_text for r in runs if r.record.spec.device == "gpu" and r.record.environment.gpu_text
    )
    return [f'<p class="muted">GPU: {_e(" and ".join(gpus))}</p>'] if gpus else []


def _runs_table(runs: Sequence[LoadedRun]) -> str:
    rows = []
    for r in runs:
        spec, outcome = r.record.spec, r.record.outcome
        status = outcome.status.value + (f": {outcome.cause}" if outcome.cause else "")
        cls = "" if r.ok else ' class="failed"'
        rows.append(
            f"<tr{cls}><td>{_e(r.folder.run_id)}</td><td>{_e(palette.label(spec.framework))}</td>"
            f'<td>{_e(r.case.name)}</td><td>{_e(spec.device)}</td><td class="num">{spec.batch}</td>'
            f'<td class="num">{spec.epochs}</td><td>{_e(status)}</td></tr>'
        )
    names = ("run", "framework", "case", "device", "batch", "epochs", "status")
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in names)
    return _scroll(f"<table><thead>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _scroll(table: str) -> str:
    return f'<div class="table-scroll">{table}</div>'
