"""run.json's first layout read as its second, in one place: folders written before the workload was stored
as what it is (format_version 1: one `spec` for every run, a command beside it, an import's origin in the
knobs) still open. Only the second layout is written (`RUN_FORMAT_VERSION`, declared here for the record).

Version 1 gave every run a RunSpec; a command's and an import's model, dataset, batch and lr in it were
placeholders (`unknown`, batch 1, lr 0.001) and are dropped here, so no reader meets them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from tracer.core.options import RunSpec
from tracer.core.workload import MEASURING_FIELDS

FIRST_LAYOUT = 1
RUN_FORMAT_VERSION = 2
"""run.json's layout: 2 stores the workload as what it is (`tracer.core.workload`); 1 is read, converted."""
SPEC_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunSpec) if f.default is not dataclasses.MISSING}

# version 1's bookkeeping knobs of an import (its former `ImportOrigin`): its file, what it did not record, its clock
IMPORTED_FROM, NOT_RECORDED, CLOCK, BATCH_FROM = "imported_from", "not_recorded", "clock", "batch_from"
IMPORT_KNOBS = (IMPORTED_FROM, NOT_RECORDED, CLOCK, BATCH_FROM)


def current_layout(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` in the layout this version writes: the second layout as it is, the first converted. A damaged
    value is carried to where the second layout holds it, so the check that follows names it (`spec.batch`
    becomes `workload.spec.batch`)."""
    if data.get("format_version", FIRST_LAYOUT) != FIRST_LAYOUT or "workload" in data:
        return dict(data)
    old = dict(data)
    spec = old.pop("spec", None)
    command = old.pop("command", None)
    knobs = old.get("knobs")
    origin = knobs.get(IMPORTED_FROM) if isinstance(knobs, Mapping) else None
    values = spec if isinstance(spec, Mapping) else {}
    if command is not None:
        workload = {"kind": "command", **command} if isinstance(command, Mapping) else command
    elif origin:
        assert isinstance(knobs, Mapping)
        workload = _imported(values, knobs)
        old["knobs"] = {k: v for k, v in knobs.items() if k not in IMPORT_KNOBS}
    else:
        workload = {"kind": "builtin", "spec": spec}
    # what the spec said of how it was measured; an option older than the record, at the default it ran at
    measured = {name: values.get(name, SPEC_DEFAULTS.get(name)) for name in ("framework", "device", *MEASURING_FIELDS)}
    measured = {name: value for name, value in measured.items() if name in values or name in SPEC_DEFAULTS}
    if origin:  # an import was not sampled, timed nor watched by the tool
        measured = {k: v for k, v in measured.items() if k in ("framework", "device", "trace")}
    # the workload first: a damaged spec is named as the workload's (the measurement repeats its values)
    first = {"run_id": old.pop("run_id", None), "workload": workload, "measurement": measured}
    return first | old | {"format_version": RUN_FORMAT_VERSION}


def _imported(spec: Mapping[str, Any], knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1's import: its origin from the knobs; its batch only where it was recorded (else a placeholder)."""
    missing = knobs.get(NOT_RECORDED) or ()
    batch = None if "batch" in missing else spec.get("batch")
    clock: dict[str, Any] = {}
    try:
        facts = json.loads(knobs.get(CLOCK) or "{}")
    except (TypeError, ValueError):
        facts = {}
    if isinstance(facts, Mapping):
        clock = {"kind": facts.get("clock", ""), "offset_ns": facts.get("offset_ns", 0)}
        clock |= {"alignment": facts["alignment"]} if facts.get("alignment") else {}
    return {
        "kind": "imported",
        "source": knobs.get(IMPORTED_FROM),
        "model": spec.get("model", "unknown"),
        "batch": batch,
        "batch_from": str(knobs.get(BATCH_FROM) or "") if batch is not None else "",
        "clock": clock,
    }
