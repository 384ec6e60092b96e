"""What a run ran, stored as what it is: a built-in workload, a user's command or an imported trace.

run.json holds `workload` as a msgspec tagged union (`"kind": "builtin" | "command" | "imported"`), apart from
`Measurement` (how the tool measured it). A command or an import holds no model, dataset, batch or lr it never
had: a reader asks the workload, and shows "not recorded" where it has no answer.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, fields
from typing import Any

import msgspec

from tracer.core.options import RunSpec, command_options
from tracer.core.text import printable_argv

NOT_RECORDED = "not recorded"
"""What every surface says for a setting the run does not know (an import's batch, a command's model)."""


@dataclass(frozen=True)
class Measurement:
    """How the tool measured a run, whatever it ran: the framework and device it saw, the trace backend and the
    sampler's options (`options.command_options()`, the options that measure a command too). For a built-in run
    they are its spec's values; for an import, what the trace says (nothing sampled, nothing timed)."""

    framework: str
    device: str
    trace: str = "none"
    trace_window: str | None = None  # what the trace records (None: the whole run, or no trace)
    sample_hz: float = 0.0  # 0: not sampled (an import's samples are not ours)
    timeout_s: float | None = None
    stall_s: float | None = None  # None: not watched for stalls (an import)
    pyspy: bool = False
    nsys_sampling: bool = False

    @classmethod
    def of_spec(cls, spec: Any, device: str | None = None) -> Measurement:
        """The measuring options of `spec` (a RunSpec, or a command's launch spec), on `device` if given."""
        measuring = {name: getattr(spec, name) for name in command_options()}
        return cls(framework=spec.framework, device=device or spec.device, **measuring)


MEASURING_FIELDS = tuple(f.name for f in fields(Measurement))[2:]
"""The options a Measurement holds besides framework and device: `command_options()` (a test holds them equal)."""


class BuiltinWorkload(msgspec.Struct, frozen=True, tag="builtin", tag_field="kind"):
    """One of the built-in models and datasets, trained as its spec says."""

    spec: RunSpec


class CommandWorkload(msgspec.Struct, frozen=True, tag="command", tag_field="kind"):
    """A user's training command run by `tracer profile -- COMMAND`: its model, data and batch are its own."""

    argv: tuple[str, ...]
    cwd: str
    interpreter: str = ""  # the Python the command resolved to, when it is one
    frameworks_imported: tuple[str, ...] = ()  # declared framework names the probe saw imported
    probe: str = "on"  # "on" or "off" (--probe off)
    #: sha256 (16 hex digits) of the files the command names (its script, a config): an edited script is
    #: another experiment, never a repeat of its old self ('' in runs before it was recorded).
    script_digest: str = ""

    @property
    def text(self) -> str:
        """The command as a shell would take it (`python train.py --lr 0.1`), as it is shown (no control
        characters: `tracer.core.text.printable_argv`); argv keeps what was typed."""
        return shlex.join(printable_argv(self.argv))

    @property
    def name(self) -> str:
        """Its script's file name (`train.py` for `torchrun --nproc-per-node 2 train.py`), else its program's."""
        scripts = [a for a in self.argv if a.endswith((".py", ".sh"))]
        shown = printable_argv(self.argv)
        if "-m" in self.argv[:-1]:
            return shown[self.argv.index("-m") + 1]
        return os.path.basename(shown[self.argv.index(scripts[-1])] if scripts else shown[0]) if self.argv else "?"

    @property
    def label(self) -> str:
        """Its name and the arguments given after its script (`train.py --lr 0.1`): runs that differ only
        by an argument are told apart in `runs`, `show` and the viewer's legend. Shortened past 60 characters."""
        argv = list(self.argv)
        if "-m" in argv[:-1]:
            after = argv[argv.index("-m") + 2 :]
        else:
            scripts = [i for i, a in enumerate(argv) if a.endswith((".py", ".sh"))]
            after = argv[scripts[-1] + 1 :] if scripts else argv[1:]
        text = " ".join([self.name, *(shlex.quote(a) for a in printable_argv(after))])
        return text if len(text) <= 60 else text[:28] + " ... " + text[-27:]


class TraceClock(msgspec.Struct, frozen=True):
    """How an imported trace's times were put on the Unix clock, and how its ranks' clocks were put on one."""

    kind: str = ""  # "unix_ns" or "relative_ns" (analyzers.trace.clock); "" where an old record did not say
    offset_ns: int = 0
    alignment: str | None = None  # several ranks: how their clocks were aligned; None for one process


class ImportedWorkload(msgspec.Struct, frozen=True, tag="imported", tag_field="kind"):
    """A trace someone already had (`tracer import`): unknown beyond what the trace records and the user said."""

    source: str  # the trace file (or the folder of ranks' traces), resolved
    format: str = ""  # its trace format (tracer.core.trace_formats); '' in records written before it was kept
    model: str = "unknown"  # what the user said it is (--model), recorded as given
    batch: int | None = None  # the trace's recorded batch, or the user's --batch; None: not recorded
    batch_from: str = ""  # where the batch came from, when there is one
    clock: TraceClock = TraceClock()

    @property
    def not_recorded(self) -> tuple[str, ...]:
        """The settings the trace does not carry, as they are named on the surfaces ("batch", "epochs")."""
        return ("batch", "epochs") if self.batch is None else ("epochs",)


Workload = BuiltinWorkload | CommandWorkload | ImportedWorkload
"""What a run ran: the one typed union every consumer switches on (never a made-up "batch 1")."""


@dataclass(frozen=True)
class Known:
    """The settings every surface names (model, dataset, batch, planned epochs) as far as a workload records
    them: None (shown as "not recorded") where it does not; '' for a command's model and dataset, its own."""

    model: str
    dataset: str
    batch: int | None
    epochs: int | None

    @classmethod
    def of(cls, workload: Workload) -> Known:
        match workload:
            case BuiltinWorkload(spec=spec):
                return cls(spec.model, spec.dataset, spec.batch, spec.epochs)
            case ImportedWorkload():
                return cls(workload.model, workload.source, workload.batch, None)
            case CommandWorkload():
                return cls("", "", None, None)
        raise TypeError(f"not a workload: {workload!r}")
