"""The page's parts that read case by case: Tables 1-2 as one small table per case (`headline`), and the
findings in sentences (`prose`) with their numbers tied to the cells they come from.

A number a sentence cites is a `<span data-row data-field>`; its cell is the `<td data-field>` of the
`<tr data-row>` of the same case: the page says which cell a number is, and
`tests/analyzers/report/test_prose.py` reads both and finds them equal.
"""

from __future__ import annotations

import html
from typing import Mapping, Sequence

from analyzers.figures.energy import NO_SOURCE
from analyzers.render import palette
from analyzers.report import headline, tables
from analyzers.report.prose import CaseFindings, Cite, Ratio, Sentence, VerdictItem, where_text


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def table_anchor(table: headline.CaseTable) -> str:
    return f"table-{table.key.slug}"


def case_tables(rows: Sequence[tables.TableRow], device: str) -> str:
    """Every case's table of Table 1 (device 'cpu') or 2, one after another, with the definition once above."""
    gpus = tables.table_gpus(rows) if device == "gpu" else []
    parts = [f'<p class="caption">{_e(tables.caption(rows[0].warmup_epochs, gpus))}</p>']
    parts += [_case_table(t, device) for t in headline.case_tables(list(rows))]
    return "".join(parts)


def _case_table(table: headline.CaseTable, device: str) -> str:
    columns = headline.columns(device)
    shared = [", ".join(table.common)] if table.common else []
    known = [s for s in table.energy_sources if s != NO_SOURCE]
    if device == "gpu" and known:
        shared.append(f"energy from {' / '.join(known)}")
    common = f'<p class="common">Every row: {_e("; ".join(shared))}.</p>' if shared else ""
    head = "".join(f"<th>{_e(c.header)}</th>" for c in columns)
    body = [_row(table, i, columns) for i in range(len(table.rows))]
    return (
        f'<section class="case" id="{table_anchor(table)}"><h3>{_e(table.key.title)}</h3>{common}'
        f'<div class="table-scroll"><table class="headline" data-device="{device}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div></section>"
    )


def _row(table: headline.CaseTable, i: int, columns: Sequence[headline.Column]) -> str:
    row = table.rows[i]
    tds = []
    failed = row.status != "ok" or row.imported
    numeric = [c for c in columns if c.kind]
    for c in columns:
        if c.field == "framework":
            swatch = f'<span class="swatch" style="background:{palette.colour(row.framework)}"></span>'
            tag = f'<br><span class="tag">{_e(table.tags[i])}</span>' if table.tags[i] else ""
            tds.append(f"<td>{swatch}{_e(palette.label(row.framework))}{tag}</td>")
        elif c.kind and failed:
            if c is numeric[0]:
                tds.append(f'<td class="cause" colspan="{len(numeric)}">{_e(table.full_status(i))}</td>')
        elif c.kind:
            spread = headline.spread_text(row) if c.field == "steady_images_per_s" else ""
            extra = f'<br><span class="range">{_e(spread)}</span>' if spread else ""
            value = headline.cell_text(row, c.field)
            tds.append(f'<td class="num" data-field="{c.field}"><span class="v">{_e(value)}</span>{extra}</td>')
        elif c.field == "runs_ok":
            tds.append(f'<td class="num">{row.runs_ok}/{row.runs_ok + row.runs_failed}</td>')
        else:
            full = table.full_status(i)
            tds.append(f'<td title="{_e(full)}">{_e(headline.short_status(row))}</td>')
    cls = ' class="failed"' if row.status != "ok" else ""
    return f'<tr data-row="{_e(headline.row_id(row))}"{cls}>' + "".join(tds) + "</tr>"


def sentence(s: Sentence) -> str:
    out = []
    for f in s:
        if isinstance(f, Cite):
            out.append(f'<span class="cite" data-row="{_e(f.row)}" data-field="{f.field}">{_e(f.text)}</span>')
        elif isinstance(f, Ratio):
            out.append(
                f'<span class="ratio" data-a="{_e(f.a)}" data-b="{_e(f.b)}" data-field="{f.field}">{_e(f.text)}</span>'
            )
        else:
            out.append(_e(f))
    return "".join(out)


def findings(cases: Sequence[CaseFindings], figure_numbers: Mapping[str, int]) -> str:
    """Per case: its sentences, then its verdicts as a short list linked to the figures that show them."""
    parts = []
    for case in cases:
        link = f'<a class="to-table" href="#{table_anchor(case.table)}">table</a>'
        parts.append(f'<section class="case"><h3>{_e(case.title)} <span class="muted">({link})</span></h3>')
        parts.append("<p>" + " ".join(sentence(s) for s in case.sentences) + "</p>")
        if case.verdicts:
            parts.append(
                '<ul class="verdicts">' + "".join(_verdict(v, figure_numbers) for v in case.verdicts) + "</ul>"
            )
        parts.append("</section>")
    return "".join(parts)


def _verdict(item: VerdictItem, figure_numbers: Mapping[str, int]) -> str:
    where = where_text(item)
    knob = f"; try {_e(item.knob)}" if item.knob else ""
    shown = sorted((figure_numbers[f], f) for f in item.figures if f in figure_numbers)
    figs = ", ".join(f'<a href="#{_e(stem)}">Figure {n}</a>' for n, stem in shown)
    return f"<li><b>{_e(item.title)}</b> ({_e(where)}){knob}" + (f" — see {figs}" if figs else "") + "</li>"
