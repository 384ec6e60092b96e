"""A campaign plan: a TOML file naming the axes of a run matrix, expanded into cells with stable ids.

```toml
name = "study"                       # optional; default: the file's stem
frameworks = ["pytorch", "tensorflow"]
models = ["alexnet", "vgg16"]
datasets = ["small", "big"]          # or folders (relative to the plan file)
devices = ["cpu", "gpu"]
batches = [1, 100]
epochs = 100                         # a value or a list: every axis takes either
trace = "none"
repetitions = 1

[knobs]                              # tracer profile options; a list makes the knob an axis too
limit = 8
image_size = [32, 64]

[python]                             # optional: an interpreter per framework instead of its tracer env
mxnet = "/opt/conda/envs/mx/bin/python"

[[exclude]]                          # cells matching every key of one table are left out
framework = "tensorflow"
model = ["vgg16", "resnet50"]
```

A plan may instead measure a user's own command (`tracer profile -- COMMAND`), its axes the
placeholders of a template:

```toml
command = "python train.py --batch {batch} --lr {lr}"   # run where the plan file is
[vary]                               # each placeholder: a value or a list (an axis)
batch = [16, 32]
lr = 0.1
[knobs]                              # only the options that measure a command (timeout, sample_hz ...)
timeout = 600
```

Every unknown key, and every value of the wrong type or outside its choices, is a `UserError` naming
the file and line: tomllib gives line numbers for syntax errors only, so `_Lines` finds keys in the text.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import string
import tomllib
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Annotated, Any, Mapping

import pydantic
from pydantic import ConfigDict, Field

from tracer.core import options
from tracer.core.cases import DATASET_IMAGES, RunKey, dataset_label
from tracer.core.errors import UserError
from tracer.core.frameworks import FRAMEWORKS

# plan axis key -> the RunSpec field it sets; order is the order of a cell id's parts
AXIS_FIELD = {
    "frameworks": "framework",
    "models": "model",
    "datasets": "dataset",
    "devices": "device",
    "batches": "batch",
    "epochs": "epochs",
    "trace": "trace",
}
AXES = tuple(AXIS_FIELD)
DEFAULTS: dict[str, list[Any]] = {"devices": ["cpu"], "batches": [1], "epochs": [1], "trace": ["none"]}
# A plan of 1.92 million cells took minutes and ~13 GB to expand for a dry run; at a minute a run,
# 10,000 runs are a week of one machine.
MAX_PLAN_RUNS = 10_000
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]*"
MAX_NAME_CHARS = 100
"""A plan's name names its record's folder: a file name's 255 bytes leave room for the rest."""
# Plan-only knobs: they steer a campaign, not `tracer profile`.
PLAN_ONLY_KNOBS: dict[str, Any] = {
    "gpus": Annotated[int, Field(ge=0, le=64)],  # GPUs a GPU run asks Ray for (default 1)
    "board": Annotated[str, Field(pattern=r"\S")],  # the board type a Ray run must land on (`board:<type>`)
}


def knob_key(name: str) -> str:
    """A knob is named in a plan as its flag is on the command line (`timeout` for --timeout)."""
    return options.flag_of(name)[2:].replace("-", "_")


def knob_fields() -> dict[str, str]:
    """knob key -> RunSpec field, for every option a plan may set outside its axes."""
    return {knob_key(n): n for n in options.plan_options() if n not in AXIS_FIELD.values()}


@dataclass(frozen=True)
class Cell:
    """One run of the matrix. `cell_id` depends only on the cell's own values, so it is the same in
    every expansion of the plan (adding a framework does not rename the other cells)."""

    cell_id: str
    framework: str
    model: str
    dataset: str
    device: str
    batch: int
    epochs: int
    trace: str
    repetition: int
    knobs: Mapping[str, Any] = field(default_factory=dict)
    python: str | None = None
    command: tuple[str, ...] = ()  # a command plan's cell: the template filled in (then no built-in workload)
    cwd: str | None = None  # where the command runs: the plan file's folder

    @property
    def key(self) -> RunKey:
        """The identity of the run this cell makes (`tracer.core.cases.RunKey`)."""
        return RunKey.of(self)

    def profile_args(self) -> list[str]:
        """The `tracer profile` arguments of this cell, without `--out` (a command's come last, after `--`)."""
        if self.command:
            return [*self._knob_args(), "--", *self.command]
        args = [
            "--framework", self.framework, "--model", self.model, "--dataset", self.dataset,
            "--device", self.device, "--batch", str(self.batch), "--epochs", str(self.epochs),
            "--trace", self.trace,
        ]  # fmt: skip
        args += self._knob_args()
        if self.python:
            args += ["--python", self.python]
        return args

    def _knob_args(self) -> list[str]:
        args: list[str] = []
        fields = knob_fields()
        for name, value in sorted(self.knobs.items()):
            if name not in fields:  # a plan-only knob such as gpus
                continue
            flag = options.flag_of(fields[name])
            if isinstance(value, bool):
                args += [flag] if value else []
            elif value == "":  # an empty string leaves the option at its default (e.g. no fault)
                continue
            else:
                args += [flag, str(value)]
        return args

    @property
    def gpus(self) -> int:
        return int(self.knobs.get("gpus", 1)) if self.device == "gpu" else 0

    @property
    def board(self) -> str | None:
        """The board type this run targets on a Ray cluster; None: any node."""
        value = self.knobs.get("board")
        return str(value) if value else None

    def fingerprint(self) -> str:
        """Changes whenever what the cell would train changes (a scalar knob edited in the plan)."""
        return hashlib.sha256(json.dumps(self.profile_args()).encode()).hexdigest()[:12]

    def label(self) -> str:
        if self.command:
            return shlex.join(self.command)
        return f"{self.framework} {self.model} {dataset_label(self.dataset)} {self.device} b{self.batch}"


@dataclass(frozen=True)
class Plan:
    name: str
    path: Path
    cells: tuple[Cell, ...]
    description: str = ""


class _Lines:
    """Finds where a key (or a value inside a key's array) sits in the TOML text."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*')\s*=")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def key(self, table: str, key: str | None, index: int = 0) -> int | None:
        """Line (1-based) of `key` in `[table]` (the `index`-th `[[table]]`), or of the header itself."""
        current, seen = "", -1
        for no, line in enumerate(self.lines, 1):
            header = self._HEADER.match(line)
            if header:
                current = header.group(2).strip().strip("\"'")
                if current == table:
                    seen += 1
                    if key is None and seen == index:
                        return no
                continue
            if current != table or (table and seen != index) or key is None:
                continue
            m = self._KEY.match(line)
            if m and m.group(1).strip("\"'") == key:
                return no
        return None

    def value(self, table: str, key: str, value: Any, index: int = 0) -> int | None:
        """Line of `value` within the (possibly multi-line) array of `key`; the key's line otherwise."""
        start = self.key(table, key, index)
        if start is None:
            return None
        token = json.dumps(value) if isinstance(value, str) else str(value).lower()
        depth = 0
        for no in range(start, len(self.lines) + 1):
            text = self.lines[no - 1].split("#", 1)[0]
            if no == start:
                text = text.split("=", 1)[1]
            if token in text or (isinstance(value, str) and f"'{value}'" in text):
                return no
            depth += text.count("[") - text.count("]")
            if depth <= 0:
                break
        return start


def _one_or_many(item: Any) -> Any:
    """A plan value is a scalar or a list; both become a non-empty list of checked items."""
    return Annotated[
        list[item], Field(min_length=1), pydantic.BeforeValidator(lambda v: v if isinstance(v, list) else [v])
    ]


def _known_framework(v: str) -> str:
    if v not in FRAMEWORKS:
        raise ValueError(f"unknown value '{v}': choose from {', '.join(FRAMEWORKS)}")
    return v


def _axis_type(key: str) -> Any:
    hint = options.spec_fields()[AXIS_FIELD[key]][0]
    if key == "frameworks":
        hint = Annotated[str, pydantic.AfterValidator(_known_framework)]
    return _one_or_many(hint)


def _models() -> tuple[type[pydantic.BaseModel], type[pydantic.BaseModel]]:
    """The plan file's typed model, built from the option declarations (so a new option is a new knob)."""
    strict = ConfigDict(extra="forbid", strict=True)
    knob_types = {key: options.spec_fields()[name][0] for key, name in knob_fields().items()} | PLAN_ONLY_KNOBS
    knobs = pydantic.create_model(  # type: ignore[call-overload]
        "Knobs", __config__=strict, **{k: (_one_or_many(t) | None, None) for k, t in knob_types.items()}
    )
    axes = {k: (_axis_type(k), ...) if k not in DEFAULTS else (_axis_type(k), DEFAULTS[k]) for k in AXES}
    plan = pydantic.create_model(  # type: ignore[call-overload]
        "PlanFile",
        __config__=strict,
        name=(Annotated[str, Field(pattern=f"^{NAME_PATTERN}$", max_length=MAX_NAME_CHARS)] | None, None),
        description=(str, ""),
        repetitions=(Annotated[int, Field(ge=1)], 1),
        knobs=(knobs, None),
        python=(
            dict[Annotated[str, pydantic.AfterValidator(_unknown_framework_key)], Annotated[str, Field(min_length=1)]],
            {},
        ),
        exclude=(list[Annotated[dict[str, Any], Field(min_length=1)]], []),
        **axes,
    )
    return plan, knobs


def _unknown_framework_key(v: str) -> str:
    if v not in FRAMEWORKS:
        raise ValueError(f"unknown framework '{v}': choose from {', '.join(FRAMEWORKS)}")
    return v


class _Where:
    """Turns a pydantic error's location into the plan file's line and words a user reads."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = _Lines(text)

    def fail(self, line: int | None, message: str) -> UserError:
        where = f"{self.path}:{line}" if line else str(self.path)
        return UserError(f"{where}: {message}")

    def error(self, e: Mapping[str, Any], table: str = "", index: int = 0) -> UserError:
        loc = [p for p in e["loc"] if not isinstance(p, int)]
        if loc and loc[0] in ("knobs", "python"):
            table, loc = str(loc[0]), loc[1:]
        key = str(loc[0]) if loc else ""
        value = e.get("input")
        if e["type"] == "missing":
            return self.fail(None, f"the plan has no '{key}': say which {key} to run")
        if e["type"] == "extra_forbidden":
            what = {"": "key", "knobs": "knob"}.get(table, "key")
            known = sorted(knob_fields()) if table == "knobs" else sorted(_models()[0].model_fields)
            suffix = " in [[exclude]]" if table == "exclude" else ""
            return self.fail(
                self.lines.key(table, key, index), f"unknown {what} '{key}'{suffix}: the plan knows {', '.join(known)}"
            )
        line = (
            self.lines.value(table, key, value, index)
            if not isinstance(value, (list, dict))
            else self.lines.key(table, key, index)
        )
        label = f"{table}.{key}" if table else key
        return self.fail(line, f"{label}: {_words(e)}")


def _words(e: Mapping[str, Any]) -> str:
    value, ctx = e.get("input"), e.get("ctx") or {}
    kind = e["type"]
    if kind == "value_error":
        return str(ctx.get("error", e["msg"]))
    if kind == "literal_error":
        return f"unknown value {value!r}: choose from {ctx.get('expected', '')}".replace('"', "'")
    if kind in ("greater_than_equal", "greater_than"):
        return f"{value!r} must be at least {ctx.get('ge', ctx.get('gt'))}"
    if kind in ("less_than_equal", "less_than"):
        return f"{value!r} must be at most {ctx.get('le', ctx.get('lt'))}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{value!r} is not {kind.split('_')[0]}"
    if kind == "too_short":
        return "is empty: give at least one value"
    if kind == "finite_number":
        return f"{value!r} must be a finite number"
    return str(e["msg"])


def load_plan(path: Path) -> Plan:
    """Reads, checks and expands a plan file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot read plan {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"plan {path} is not UTF-8 text (byte {e.start}): save it as UTF-8 TOML") from None
    return parse_plan(text, path)


def parse_plan(text: str, path: Path) -> Plan:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        at = re.search(r"\(at line (\d+), column \d+\)", str(e))
        line = f"{path}:{at.group(1)}" if at else str(path)
        raise UserError(f"{line}: not valid TOML: {e}") from None
    where = _Where(path, text)
    if "command" in data:
        return _command_plan(data, where, path)
    plan_model, knobs_model = _models()
    try:
        checked: Any = plan_model.model_validate(data)
    except pydantic.ValidationError as e:
        raise where.error(e.errors()[0]) from None
    axes = {key: _unique(where, key, getattr(checked, key)) for key in AXES}
    axes["datasets"] = [_dataset(where, v, path.parent) for v in axes["datasets"]]
    knobs = {k: v for k, v in (checked.knobs.model_dump() if checked.knobs else {}).items() if v is not None}
    exclusions = [_exclusion(where, i, rule, knobs_model) for i, rule in enumerate(checked.exclude)]
    cells = _expand(where, axes, knobs, checked.repetitions, exclusions, checked.python)
    if not cells:
        raise where.fail(None, "the plan's exclusions leave no runs")
    return Plan(checked.name or path.stem, path, tuple(cells), checked.description)


def _unique(where: _Where, key: str, values: list[Any]) -> list[Any]:
    for i, v in enumerate(values):
        if v in values[:i]:
            raise where.fail(where.lines.value("", key, v), f"{key}: {v!r} is listed twice")
    return values


def _dataset(where: _Where, v: str, base: Path) -> str:
    if v in DATASET_IMAGES:
        return v
    folder = (base / v).expanduser()
    if not folder.is_dir():
        raise where.fail(
            where.lines.value("", "datasets", v),
            f"datasets: unknown dataset '{v}': use {' or '.join(DATASET_IMAGES)}, or a class-per-folder folder",
        )
    return str(folder.resolve())


FIELD_AXIS = {v: k for k, v in AXIS_FIELD.items()}


def _exclusion(where: _Where, index: int, rule: Mapping[str, Any], knobs_model: Any) -> dict[str, list[Any]]:
    """An [[exclude]] table: each key is an axis (singular), a knob or `repetition`, checked like them."""
    out: dict[str, list[Any]] = {}
    plan_model = _models()[0]
    for key, value in rule.items():
        values = value if isinstance(value, list) else [value]
        if key in FIELD_AXIS:
            model, field_name = plan_model, FIELD_AXIS[key]
        elif key in knobs_model.model_fields:
            model, field_name = knobs_model, key
        elif key == "repetition":
            if not all(type(v) is int and v >= 1 for v in values):
                raise where.fail(
                    where.lines.key("exclude", key, index), "exclude.repetition: a whole number of at least 1"
                )
            out[key] = values
            continue
        else:
            known = ", ".join([*FIELD_AXIS, "repetition", *knob_fields()])
            raise where.fail(where.lines.key("exclude", key, index), f"unknown key '{key}' in [[exclude]]: use {known}")
        adapter: Any = pydantic.TypeAdapter(model.model_fields[field_name].annotation, config=ConfigDict(strict=True))  # type: ignore[arg-type]
        try:
            checked = adapter.validate_python(values)
        except pydantic.ValidationError as e:
            err = dict(e.errors()[0], loc=(key,))
            raise where.error(err, "exclude", index) from None
        out[key] = [_dataset(where, v, where.path.parent) for v in checked] if key == "dataset" else list(checked)
    return out


def _expand(
    c: _Where,
    axes: Mapping[str, list[Any]],
    knobs: Mapping[str, list[Any]],
    repetitions: int,
    exclusions: list[dict[str, list[Any]]],
    python: Mapping[str, str],
) -> list[Cell]:
    knob_names = sorted(knobs)
    sizes = [len(axes[a]) for a in AXES] + [len(knobs[k]) for k in knob_names] + [repetitions]
    if math.prod(sizes) > MAX_PLAN_RUNS:
        said = " x ".join(str(n) for n in sizes)
        raise c.fail(
            None,
            f"the plan expands to {math.prod(sizes):,} runs ({said}, before exclusions); at most"
            f" {MAX_PLAN_RUNS:,}: split it into smaller plans",
        )
    cells: list[Cell] = []
    seen: dict[str, Cell] = {}
    for values in product(*(axes[a] for a in AXES), *(knobs[k] for k in knob_names), range(1, repetitions + 1)):
        fields = dict(zip((AXIS_FIELD[a] for a in AXES), values[: len(AXES)]))
        knob_values = dict(zip(knob_names, values[len(AXES) : -1]))
        repetition = values[-1]
        point = {**fields, **knob_values, "repetition": repetition}
        if any(all(point.get(k) in vs for k, vs in rule.items()) for rule in exclusions):
            continue
        varying = {k: v for k, v in knob_values.items() if len(knobs[k]) > 1}
        spec_knobs = knob_fields()  # a plan's own knobs (a Ray board) are not run options: no rule joins them
        why = options.cross_field_problem(
            {**fields, **{spec_knobs[k]: v for k, v in knob_values.items() if k in spec_knobs}}
        )
        if why:
            raise c.fail(None, f"{'-'.join(str(v) for v in fields.values())}: {why}")
        cell = Cell(
            cell_id=_cell_id(fields, varying, repetition if repetitions > 1 else None),
            knobs=knob_values,
            repetition=repetition,
            python=python.get(fields["framework"]),
            **fields,
        )
        if cell.cell_id in seen:
            raise c.fail(
                c.lines.key("", "datasets"), f"two cells would both be called {cell.cell_id}: rename a dataset folder"
            )
        seen[cell.cell_id] = cell
        cells.append(cell)
    return cells


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "-", str(value)).strip("-") or "none"


def _cell_id(fields: Mapping[str, Any], varying: Mapping[str, Any], repetition: int | None) -> str:
    parts = [
        fields["framework"], fields["model"], _slug(dataset_label(fields["dataset"])), fields["device"],
        f"b{fields['batch']}", f"e{fields['epochs']}",
    ]  # fmt: skip
    if fields["trace"] != "none":
        parts.append(fields["trace"])
    parts += [f"{k.replace('_', '')}{_slug(v)}" for k, v in sorted(varying.items())]
    if repetition is not None:
        parts.append(f"r{repetition}")
    return "-".join(parts)


COMMAND = "command"
COMMAND_PLAN_KEYS = ("name", "description", COMMAND, "vary", "knobs", "repetitions")


def _command_plan(data: Mapping[str, Any], where: _Where, path: Path) -> Plan:
    """A plan of one command template: a cell per combination of its `[vary]` values (and repetition),
    measured with the knobs that apply to a command; run in the plan file's folder."""
    for key in data:
        if key not in COMMAND_PLAN_KEYS:
            raise where.fail(
                where.lines.key("", key),
                f"'{key}' does not go with a command: a command plan knows {', '.join(COMMAND_PLAN_KEYS)}",
            )
    template = data[COMMAND]
    if not isinstance(template, str) or not template.strip():
        raise where.fail(where.lines.key("", COMMAND), "command: give the command as one string")
    wanted = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    vary = data.get("vary") or {}
    if not isinstance(vary, dict):
        raise where.fail(where.lines.key("", "vary"), "vary: a table of the template's placeholders")
    for name in wanted:
        if name not in vary:
            raise where.fail(where.lines.key("", COMMAND), f"command: {{{name}}} has no value in [vary]")
    for name in vary:
        if name not in wanted:
            raise where.fail(where.lines.key("vary", name), f"vary.{name}: the command has no {{{name}}}")
    measuring = {knob_key(n): n for n in options.command_options()}
    knobs: dict[str, list[Any]] = {}
    for key, value in (data.get("knobs") or {}).items():
        if key not in measuring:
            raise where.fail(
                where.lines.key("knobs", key),
                f"knobs.{key}: does not measure a command; a command plan takes {', '.join(sorted(measuring))}",
            )
        knobs[key] = value if isinstance(value, list) else [value]
    repetitions = data.get("repetitions", 1)
    if type(repetitions) is not int or repetitions < 1:
        raise where.fail(where.lines.key("", "repetitions"), "repetitions: a whole number of at least 1")
    axes = {name: (v if isinstance(v, list) else [v]) for name, v in vary.items()}
    names, knob_names = sorted(axes), sorted(knobs)
    combos = list(product(*(axes[n] for n in names), *(knobs[k] for k in knob_names), range(1, repetitions + 1)))
    if len(combos) > MAX_PLAN_RUNS:
        raise where.fail(None, f"the plan expands to {len(combos):,} runs; at most {MAX_PLAN_RUNS:,}")
    cells = []
    for combo in combos:
        values = dict(zip(names, combo))
        knob_values = dict(zip(knob_names, combo[len(names) : -1]))
        varying = {k: v for k, v in {**values, **knob_values}.items() if len({*map(str, {**axes, **knobs}[k])}) > 1}
        parts = ["cmd", *(f"{k.replace('_', '')}{_slug(v)}" for k, v in sorted(varying.items()))]
        parts += [f"r{combo[-1]}"] if repetitions > 1 else []
        cells.append(
            Cell(
                cell_id="-".join(parts),
                framework=COMMAND,
                model="-",
                dataset="-",
                device="-",
                batch=0,
                epochs=0,
                trace=str(knob_values.get("trace", "none")),
                repetition=combo[-1],
                knobs=knob_values,
                command=tuple(shlex.split(template.format(**values))),
                cwd=str(path.parent.resolve()),
            )
        )
    plan_name = data.get("name")
    return Plan(str(plan_name) if plan_name else path.stem, path, tuple(cells), str(data.get("description", "")))
