"""MkDocs hook: the reference pages are generated from the code, so they cannot drift from it.

`<!-- generated: cli -->` becomes the run-option table (from `tracer.core.options`) and every
subcommand's help; `<!-- generated: run-folder -->` becomes the tables and event kinds of
`tracer.core.schema`; `<!-- generated: frameworks -->` becomes the framework declarations of
`tracer.core.frameworks` (environment, worker module, colour, the settings the diagnosis names);
`<!-- generated: json -->` becomes every `--format json` output's fields and records
(`tracer.cli.json_output.OUTPUTS`, the records' dataclass fields); `<!-- generated: gate-metrics -->` the
metrics `tracer gate` judges with their default thresholds (`analyzers.comparison.gate_metrics`).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any

MARK = "<!-- generated: {} -->"
TOOL_PYTHON = "the tool's own"


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARK.format("cli") in markdown:
        markdown = markdown.replace(MARK.format("cli"), _cli())
    if MARK.format("run-folder") in markdown:
        markdown = markdown.replace(MARK.format("run-folder"), _run_folder())
    if MARK.format("frameworks") in markdown:
        markdown = markdown.replace(MARK.format("frameworks"), frameworks_page())
    if MARK.format("gate-metrics") in markdown:
        markdown = markdown.replace(MARK.format("gate-metrics"), gate_metrics_page())
    if MARK.format("json") in markdown:
        markdown = markdown.replace(MARK.format("json"), json_page())
    return markdown


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _bounds(hint: Any) -> str:
    parts = []
    for meta in typing.get_args(hint)[1:]:
        for attr, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            for m in getattr(meta, "metadata", []):
                value = getattr(m, attr, None)
                if value is not None:
                    parts.append(f"{word} {value}")
        if getattr(meta, "allow_inf_nan", None) is False:
            parts.append("finite")
    return ", ".join(parts)


def _cli() -> str:
    from tracer.campaign.plan import AXIS_FIELD, knob_key
    from tracer.cli import build_parser
    from tracer.core import options

    axis_of = {field: axis for axis, field in AXIS_FIELD.items()}

    rows = [
        "## Run options",
        "",
        "| flag | type | default | bounds or choices | frameworks | plan key | help |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]  # noqa: E501
    for name, (hint, opt, f) in options.spec_fields().items():
        if opt.hidden or not opt.cli:
            continue
        base = options._base_type(hint)
        choices = options._choices(hint)
        kind = "flag" if base is bool else ("choice" if choices else getattr(base, "__name__", str(base)))
        default = "" if f.default is dataclasses.MISSING else f.default
        limits = ", ".join(map(str, choices)) if choices else _bounds(hint)
        plan = (axis_of.get(name) or knob_key(name)) if opt.plan else ""
        rows.append(
            f"| `{options.flag_of(name)}` | {kind} | {_cell(default)} | {_cell(limits)} | "
            f"{', '.join(opt.frameworks) or 'all'} | {plan} | {_cell(opt.help)} |"
        )
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = ["\n".join(rows), "", "## Subcommands", ""]
    for command, sub_parser in sub.choices.items():
        sub_parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=100)
        out += [f"### tracer {command}", "", "```text", sub_parser.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def _run_folder() -> str:
    from tracer.core import schema

    out = ["## Sample tables", ""]
    for table in schema.SAMPLE_TABLES.values():
        out += [f"### `{schema.SAMPLES_DIR}/{table.name}.parquet`", "", table.description + ".", ""]
        out += ["| column | type |", "| --- | --- |"]
        out += [f"| `{f.name}` | {f.type} |" for f in table.schema]
        out.append("")
    out += [
        "## Event kinds",
        "",
        f"One JSON object per line of `{schema.EVENTS_FILE}`, with `{schema.KIND}` and `{schema.T_NS}`.",
        "",
    ]  # noqa: E501
    out += ["| kind |", "| --- |"] + [f"| `{k}` |" for k in schema.Event.ALL] + [""]
    layouts = schema.CUPTI_LAYOUT.LAYOUTS
    out += [
        "## CUPTI records",
        "",
        f"`raw/cupti/`: the in-worker collector writes CUPTI's buffers as they are (`{schema.CUPTI_BUFFER_FILE}`),"
        f" one line each in `{schema.CUPTI_INDEX_FILE}`, and `{schema.CUPTI_META_FILE}`,"
        f" `{schema.CUPTI_CLOCK_FILE}`, `{schema.CUPTI_KERNEL_NAMES_FILE}`, `{schema.CUPTI_STOP_FILE}`;"
        " after the run the tracer decodes each buffer into `records-NNNNN.parquet` with the columns "
        + ", ".join(f"`{c}`" for c in schema.CUPTI_COLUMNS)
        + ". Record layouts are declared for CUPTI "
        + ", ".join(
            f"{major} ({', '.join(sorted({name for name, _ in kinds.values()}))})" for major, kinds in layouts.items()
        )
        + ".",
    ]  # noqa: E501
    return "\n".join(out)


def frameworks_page() -> str:
    from tracer.core.frameworks import FRAMEWORKS, Tuning

    out = [
        "## Frameworks",
        "",
        "| name | label | colour | worker module | CPU packages | GPU packages | Python |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in FRAMEWORKS.values():
        out.append(
            f"| `{f.name}` | {f.label} | `{f.colour}` | `{f.worker_module}` | {_cell(' '.join(f.cpu_requirements))} | "
            f"{_cell(' '.join(f.gpu_requirements))} | {f.python_version or TOOL_PYTHON} |"
        )
    out += [
        "",
        "## Settings the diagnosis names",
        "",
        "Empty: the framework has no such setting; *(GPU)*: named on GPU runs only.",
        "",
    ]
    out += ["| tuning | " + " | ".join(f.label for f in FRAMEWORKS.values()) + " |"]
    out += ["| --- |" + " --- |" * len(FRAMEWORKS)]
    for t in Tuning:
        cells = []
        for f in FRAMEWORKS.values():
            s = f.settings[t]
            cells.append("" if s is None else f"`{_cell(s.text)}`" + (" *(GPU)*" if s.devices == {"gpu"} else ""))
        out.append(f"| {t.value} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def json_page() -> str:
    import importlib

    from tracer.cli.json_output import OUTPUTS, SCHEMA_KEY, SCHEMA_PREFIX, SCHEMA_VERSION, VERSION_KEY

    out = [
        f"Every output carries `{SCHEMA_KEY}` (`{SCHEMA_PREFIX}<command>`) and `{VERSION_KEY}` "
        f"(now **{SCHEMA_VERSION}**) first.",
        "",
    ]
    records: dict[str, type] = {}
    for o in OUTPUTS:
        out += [f"## `{SCHEMA_PREFIX}{o.command}`", "", o.about + ".", "", "| field | what |", "| --- | --- |"]
        out += [f"| `{name}` | {_cell(what)} |" for name, what in o.fields.items()]
        out.append("")
        for path in o.records:
            module, _, name = path.rpartition(".")
            records[name] = getattr(importlib.import_module(module), name)
        if o.records:
            out += ["Records: " + ", ".join(f"[{p.rpartition('.')[2]}](#{p.rpartition('.')[2].lower()})"
                                            for p in o.records), ""]  # fmt: skip
    out += ["## Records", ""]
    for name, record in records.items():
        hints = typing.get_type_hints(record)
        doc = (record.__doc__ or "").strip().split("\n\n")[0]
        doc = " ".join(doc.split())
        out += [f"### {name}", "", *([_cell(doc), ""] if not doc.startswith(f"{name}(") else [])]
        out += ["| field | type |", "| --- | --- |"]
        out += [f"| `{f.name}` | {_cell(_type_name(hints.get(f.name, f.type)))} |" for f in dataclasses.fields(record)]
        out.append("")
    return "\n".join(out)


def _type_name(hint: Any) -> str:
    import re

    text = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
    return text or re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", str(hint))


def gate_metrics_page() -> str:
    from analyzers.comparison.gate_metrics import GATE_METRICS

    out = ["| metric (`--threshold` key) | what | worse when | default threshold |", "| --- | --- | --- | --- |"]
    for m in GATE_METRICS:
        worse = "higher" if m.worse > 0 else "lower"
        unit = "points" if m.points else "% of the baseline"
        out.append(f"| `{m.key}` | {_cell(m.label)} ({m.unit}) | {worse} | {m.threshold:g} {unit} |")
    return "\n".join(out)
