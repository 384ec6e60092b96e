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

Every unknown key, and every value of the wrong type or outside its choices, is a `UserError` naming
the file and line: tomllib gives line numbers for syntax errors only, so `_Lines` finds keys in the text.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import tomllib

from tracer import tracing
from tracer.cases import DEVICES, dataset_label
from tracer.dataset import SIZES
from tracer.errors import UserError
from tracer.frameworks import FRAMEWORKS, MODELS

# plan key -> (cell field, validator); order is the order of a cell id's parts
AXES = ("frameworks", "models", "datasets", "devices", "batches", "epochs", "trace")
AXIS_FIELD = {
    "frameworks": "framework",
    "models": "model",
    "datasets": "dataset",
    "devices": "device",
    "batches": "batch",
    "epochs": "epochs",
    "trace": "trace",
}
TOP_KEYS = {"name", "description", "repetitions", "knobs", "python", "exclude", *AXES}
REQUIRED = ("frameworks", "models", "datasets")
DEFAULTS: dict[str, list[Any]] = {"devices": ["cpu"], "batches": [1], "epochs": [1], "trace": ["none"]}


@dataclass(frozen=True)
class Knob:
    """A `tracer profile` option a plan may set: its flag, its value type, and a check of the value."""

    flag: str
    kind: type
    check: Callable[[Any], str | None] = lambda v: None
    test_only: bool = False


def _at_least(n: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"must be at least {n:g}"


def _positive(v: Any) -> str | None:
    return None if v > 0 else "must be positive"


KNOBS: dict[str, Knob] = {
    "limit": Knob("--limit", int, _at_least(1)),
    "image_size": Knob("--image-size", int, _at_least(32)),
    "workers": Knob("--workers", int, _at_least(0)),
    "prefetch": Knob("--prefetch", int, _at_least(0)),
    "pipeline": Knob("--pipeline", str, lambda v: None if v in ("native", "shared") else "must be native or shared"),
    "sync_every": Knob("--sync-every", int, _at_least(1)),
    "threads": Knob("--threads", int, _at_least(1)),
    "amp": Knob("--amp", bool),
    "gpu_thread_mode": Knob("--gpu-thread-mode", str),
    "lr": Knob("--lr", float, _positive),
    "momentum": Knob("--momentum", float, _at_least(0)),
    "seed": Knob("--seed", int),
    "sample_hz": Knob("--sample-hz", float, lambda v: None if 0 < v <= 1000 else "must be in (0, 1000]"),
    "timeout": Knob("--timeout", float, _positive),
    "gpus": Knob("", int, _at_least(0)),  # GPUs a GPU run asks Ray for (default 1); not a profile option
    # Deliberate worker failure (KIND@EPOCH), for testing campaigns; hidden in `tracer profile --help` too.
    "inject_fault": Knob("--inject-fault", str, test_only=True),
}


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

    def profile_args(self) -> list[str]:
        """The `tracer profile` arguments of this cell, without `--out`."""
        args = [
            "--framework", self.framework, "--model", self.model, "--dataset", self.dataset,
            "--device", self.device, "--batch", str(self.batch), "--epochs", str(self.epochs),
            "--trace", self.trace,
        ]  # fmt: skip
        for name, value in sorted(self.knobs.items()):
            knob = KNOBS[name]
            if not knob.flag:
                continue
            if knob.kind is bool:
                args += [knob.flag] if value else []
            elif value == "":  # an empty string leaves the option at its default (e.g. no fault)
                continue
            else:
                args += [knob.flag, str(value)]
        if self.python:
            args += ["--python", self.python]
        return args

    @property
    def gpus(self) -> int:
        return int(self.knobs.get("gpus", 1)) if self.device == "gpu" else 0

    def fingerprint(self) -> str:
        """Changes whenever what the cell would train changes (a scalar knob edited in the plan)."""
        return hashlib.sha256(json.dumps(self.profile_args()).encode()).hexdigest()[:12]

    def label(self) -> str:
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


class _Checker:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = _Lines(text)

    def fail(self, line: int | None, message: str) -> UserError:
        where = f"{self.path}:{line}" if line else str(self.path)
        return UserError(f"{where}: {message}")

    def key_error(self, table: str, key: str, message: str, index: int = 0) -> UserError:
        return self.fail(self.lines.key(table, key, index), message)

    def value_error(self, table: str, key: str, value: Any, message: str, index: int = 0) -> UserError:
        return self.fail(self.lines.value(table, key, value, index), message)


def load_plan(path: Path) -> Plan:
    """Reads, checks and expands a plan file."""
    try:
        text = path.read_text()
    except OSError as e:
        raise UserError(f"cannot read plan {path}: {e.strerror}") from None
    return parse_plan(text, path)


def parse_plan(text: str, path: Path) -> Plan:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        at = re.search(r"\(at line (\d+), column \d+\)", str(e))
        where = f"{path}:{at.group(1)}" if at else str(path)
        raise UserError(f"{where}: not valid TOML: {e}") from None
    c = _Checker(path, text)
    for key in data:
        if key not in TOP_KEYS:
            raise c.key_error("", key, f"unknown key '{key}': the plan knows {', '.join(sorted(TOP_KEYS))}")
    for key in REQUIRED:
        if key not in data:
            raise c.fail(None, f"the plan has no '{key}': say which {key} to run")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name):
        raise c.key_error("", "name", "name must be a word of letters, digits, '-', '_' or '.'")
    axes = {key: _axis(c, data, key, path.parent) for key in AXES}
    repetitions = data.get("repetitions", 1)
    if type(repetitions) is not int or repetitions < 1:
        raise c.key_error("", "repetitions", "repetitions must be a whole number of at least 1")
    knobs = _knobs(c, data.get("knobs", {}))
    python = _python(c, data.get("python", {}), axes["frameworks"])
    exclusions = _exclusions(c, data.get("exclude", []), knobs)
    cells = _expand(c, axes, knobs, repetitions, exclusions, python)
    if not cells:
        raise c.fail(None, "the plan's exclusions leave no runs")
    return Plan(name, path, tuple(cells), str(data.get("description", "")))


def _axis(c: _Checker, data: Mapping[str, Any], key: str, base: Path) -> list[Any]:
    raw = data.get(key, DEFAULTS.get(key))
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise c.key_error("", key, f"'{key}' is empty: give at least one value")
    out: list[Any] = []
    for v in values:
        err = _check_axis_value(key, v, base)
        if err:
            raise c.value_error("", key, v, f"{key}: {err}")
        if v in out:
            raise c.value_error("", key, v, f"{key}: {v!r} is listed twice")
        out.append(_resolve_dataset(v, base) if key == "datasets" else v)
    return out


def _check_axis_value(key: str, v: Any, base: Path) -> str | None:
    if key in ("batches", "epochs"):
        return None if type(v) is int and v >= 1 else f"{v!r} is not a whole number of at least 1"
    if not isinstance(v, str):
        return f"{v!r} is not a string"
    choices: Sequence[str] | None = {
        "frameworks": tuple(FRAMEWORKS),
        "models": MODELS,
        "devices": DEVICES,
        "trace": tracing.names(),
    }.get(key)
    if choices is not None:
        return None if v in choices else f"unknown value '{v}': choose from {', '.join(choices)}"
    if v in SIZES or (base / v).expanduser().is_dir():
        return None
    return f"unknown dataset '{v}': use {' or '.join(SIZES)}, or a folder with one sub-folder per class"


def _resolve_dataset(v: str, base: Path) -> str:
    return v if v in SIZES else str((base / v).expanduser().resolve())


def _knob_value(name: str, v: Any) -> str | None:
    knob = KNOBS[name]
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) if knob.kind is float else type(v) is knob.kind
    if not ok:
        return f"{v!r} is not {'a number' if knob.kind is float else knob.kind.__name__}"
    return knob.check(v)


def _knobs(c: _Checker, raw: Any) -> dict[str, list[Any]]:
    if not isinstance(raw, dict):
        raise c.key_error("", "knobs", "knobs must be a table: [knobs]")
    out: dict[str, list[Any]] = {}
    for name, value in raw.items():
        if name not in KNOBS:
            public = ", ".join(k for k, kn in KNOBS.items() if not kn.test_only)
            raise c.key_error("knobs", name, f"unknown knob '{name}': the plan knows {public}")
        values = value if isinstance(value, list) else [value]
        if not values:
            raise c.key_error("knobs", name, f"knob '{name}' is an empty list")
        for v in values:
            err = _knob_value(name, v)
            if err:
                raise c.value_error("knobs", name, v, f"knob {name}: {err}")
        out[name] = values
    return out


def _python(c: _Checker, raw: Any, frameworks: list[str]) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise c.key_error("", "python", 'python must be a table: [python] framework = "/path/to/python"')
    for fw, interpreter in raw.items():
        if fw not in FRAMEWORKS:
            raise c.key_error("python", fw, f"unknown framework '{fw}': choose from {', '.join(FRAMEWORKS)}")
        if not isinstance(interpreter, str) or not interpreter:
            raise c.key_error("python", fw, f"python.{fw} must be the path of an interpreter")
    return dict(raw)


FIELD_AXIS = {v: k for k, v in AXIS_FIELD.items()}


def _exclusions(c: _Checker, raw: Any, knobs: Mapping[str, list[Any]]) -> list[dict[str, list[Any]]]:
    if not isinstance(raw, list):
        raise c.key_error("", "exclude", "exclude must be an array of tables: [[exclude]]")
    out = []
    for i, table in enumerate(raw):
        if not isinstance(table, dict) or not table:
            raise c.fail(c.lines.key("exclude", None, i), "each [[exclude]] needs at least one key = value")
        rule: dict[str, list[Any]] = {}
        for key, value in table.items():
            values = value if isinstance(value, list) else [value]
            if key in FIELD_AXIS:
                for v in values:
                    err = _check_axis_value(FIELD_AXIS[key], v, c.path.parent)
                    if err:
                        raise c.value_error("exclude", key, v, f"exclude.{key}: {err}", i)
                if key == "dataset":
                    values = [_resolve_dataset(v, c.path.parent) for v in values]
            elif key in KNOBS or key == "repetition":
                for v in values:
                    if key == "repetition":
                        err = None if type(v) is int and v >= 1 else f"{v!r} is not a whole number of at least 1"
                    else:
                        err = _knob_value(key, v)
                    if err:
                        raise c.value_error("exclude", key, v, f"exclude.{key}: {err}", i)
            else:
                known = ", ".join([*FIELD_AXIS, "repetition", *knobs])
                raise c.key_error("exclude", key, f"unknown key '{key}' in [[exclude]]: use {known}", i)
            rule[key] = values
        out.append(rule)
    return out


def _expand(
    c: _Checker,
    axes: Mapping[str, list[Any]],
    knobs: Mapping[str, list[Any]],
    repetitions: int,
    exclusions: list[dict[str, list[Any]]],
    python: Mapping[str, str],
) -> list[Cell]:
    knob_names = sorted(knobs)
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
        cell = Cell(
            cell_id=_cell_id(fields, varying, repetition if repetitions > 1 else None),
            knobs=knob_values,
            repetition=repetition,
            python=python.get(fields["framework"]),
            **fields,
        )
        if cell.cell_id in seen:
            raise c.key_error("", "datasets", f"two cells would both be called {cell.cell_id}: rename a dataset folder")
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
