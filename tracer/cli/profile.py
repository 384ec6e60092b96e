"""`tracer profile`: one training run under the sampler."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from tracer.cli.blocks import print_block, print_data_pairs
from tracer.cli.common import add_out_dir, console, err_console
from tracer.cli.outputs import output_dir
from tracer.cli.summary_text import print_problems, print_repeats, print_summary
from tracer.core import cases, options
from tracer.core.errors import UserError
from tracer.core.frameworks import FRAMEWORKS, framework_info
from tracer.core.output import resolved
from tracer.core.records import RunSpec, RunStatus
from tracer.core.runfolder import RunFolder
from tracer.core.schema import DATA_MEMORY, DATA_MODES
from tracer.core.signals import shell_code
from tracer.measure import dataset, environments, tracing
from tracer.measure.nvml import Nvml
from tracer.measure.outcome import exit_status
from tracer.measure.tegrastats import find_tegrastats

DATA_ALL = "all"  # `--data all`: one run per data mode (tracer.core.schema.DATA_MODES), in turn
INGEST_LOG = "ingest.log"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "profile",
        help="train one framework/model/dataset under the sampler and write a run folder",
        description="Train in a child process under a psutil/NVML sampler (optionally a tracer); write runs/<id>/.",
    )
    options.add_arguments(
        p,
        extra_help={
            "framework": f"one of: {', '.join(FRAMEWORKS)}",
            "case": ", ".join(f"{c.name} ({c.model}, {c.dataset})" for c in cases.CASES.values()),
            "trace": "; ".join(f"{k}: {v}" for k, v in tracing.HELP.items()),
            "data": f"or {DATA_ALL}: one run of each, in turn",
        },
    )
    add_out_dir(p)
    p.add_argument("--python", help="an interpreter that has the framework, instead of its tracer env")
    p.add_argument(
        "--probe",
        choices=("on", "off"),
        default="on",
        help="with a command: time its steps from inside its Python processes (default on; off: sampler only)",
    )
    p.add_argument(
        "command",
        nargs="*",
        metavar="-- COMMAND",
        help="your own training to measure instead of the built-in one, e.g. `-- python train.py --lr 0.1`"
        f" (with: {', '.join(options.flag_of(n) for n in options.command_options())}, --repeat, --out, --probe)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="train the same spec N times, one run folder each (default 1); ends with the median and range",
    )
    p.set_defaults(func=cmd_profile)
    for action in p._actions:  # given or not beside a command: checked in cmd_profile, in one line
        if action.dest == "framework":
            action.required = False


def _workers(text: str) -> int | str:
    """--workers N or --workers autotune."""
    if text == "autotune":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a worker count: give 0, 1, 2, ... or autotune") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: give 0 or more workers (0: load in the training loop)")
    return value


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    model, data = cases.resolve_case(args.case, args.model, args.dataset)
    values = {name: getattr(args, name) for name in options.spec_fields() if hasattr(args, name)}
    spec: RunSpec = options.validate_spec({**values, "model": model, "dataset": data})
    framework_info(spec.framework)
    options.check_spec(spec)  # the rules between options, which a campaign plan's cells meet at load too
    return spec


def dataset_location(name: str) -> Path:
    """Where the dataset is (or will be generated), before anything is generated or read."""
    return dataset.cached_path(name) if name in dataset.SIZES else resolved(Path(name), "--dataset")


def resolve_dataset(name: str, console: Console, num_classes: int) -> Path:
    if name in dataset.SIZES:
        if not (dataset.cached_path(name) / dataset.DONE_MARKER).exists():
            console.print(f"generating the {name} dataset ({dataset.SIZES[name].images} images, once) ...")
        return dataset.ensure_generated(name)
    path = dataset_location(name)
    dataset.validate_folder(path, num_classes)
    return path


def check_device(spec: RunSpec) -> None:
    """`--device gpu` where no GPU can be found fails here, not after the framework has loaded."""
    if spec.device != "gpu" or Path("/dev/nvidia0").exists() or find_tegrastats(False):
        return
    nvml, why = Nvml.open()
    if nvml is not None:
        nvml.close()
        return
    raise UserError(
        f"--device gpu, but this machine has no GPU that NVML or tegrastats can see ({why}): use --device cpu"
    )


def cmd_profile(args: argparse.Namespace) -> int:
    from analyzers.figures.run_summary import summarise
    from analyzers.run.run import Run
    from tracer.measure.runner import Launch, Runner

    if args.repeat < 1:
        raise UserError(f"--repeat must be 1 or more (got {args.repeat})")
    if args.command:
        return profile_command(args)
    if args.framework is None:
        raise UserError("give --framework FRAMEWORK for the built-in workload, or your own command after --")
    if args.probe != "on":
        raise UserError("--probe applies to a command (`tracer profile --probe off -- python train.py`)")
    specs = specs_from_args(args)
    spec = specs[0]
    backend = tracing.backend(spec.trace)
    backend.check(spec)  # cheap checks before anything is generated; the runner checks inside the interpreter
    check_device(spec)
    output_dir(args.out, datasets=[dataset_location(spec.dataset)])
    python = environments.resolve_python(spec.framework, args.python)
    err = err_console()
    data_dir = resolve_dataset(spec.dataset, err, spec.num_classes)
    if spec.limit is not None:
        held = dataset.count_images(data_dir)
        if held < spec.limit:
            err.print(
                f"[yellow]warning:[/yellow] --limit {spec.limit}: {escape(spec.dataset)} holds {held} images;"
                f" all {held} are used"
            )
    if any(s.data == DATA_MEMORY for s in specs):  # --data all: refused before its files run, not after
        dataset.check_memory_fits(data_dir, spec.limit, spec.image_size)
    runs = []
    for repeat in range(1, args.repeat + 1):
        if args.repeat > 1:
            err.print(f"repeat {repeat}/{args.repeat}")
        for one in specs:  # --data all: files, memory, synthetic in turn, so the three see the same machine
            if len(specs) > 1:
                err.print(f"--data {one.data}")
            launch = Launch(one, python, data_dir, args.out, backend)
            runner = Runner(launch, err)
            folder, record = runner.run()
            ingest_traces(folder, err)  # a run without a trace still gets its thread timeline
            run = Run.open(folder)  # read once for the summary, the diagnosis, its problems, repeats and pairs
            runs.append(run)
            with pipe_may_go():
                print_summary(summarise(run), console())
                print_block(run, console())
                print_problems(run, console())
            if record.outcome.status is not RunStatus.OK:
                err.print(f"[red]run {record.outcome.status.value}:[/red] {escape(record.outcome.cause)}")
                return exit_status(record.outcome, runner.ended_by, runner.signals.last, command=False)
            if runner.signalled:  # it came after the training ended: this run is whole, no more runs
                err.print("tracer: interrupted after the run ended; its folder is complete")
                return shell_code(runner.signals.last)
    for one in specs:
        mine = [r for r in runs if r.record.spec == one]
        if len(mine) > 1:
            with pipe_may_go():
                print_repeats([summarise(r) for r in mine], console())
    if len(specs) > 1:
        from analyzers.comparison.pairs import data_pairs

        with pipe_may_go():
            print_data_pairs(data_pairs(runs), console())
    return 0


@contextlib.contextmanager
def pipe_may_go() -> Iterator[None]:
    """A reader of stdout that went away (`tracer profile ... | head`) stops the printing inside, not the
    run: its status still decides the exit code (a failed run piped to head exited 0)."""
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit must not raise a second time
        os.close(devnull)


def specs_from_args(args: argparse.Namespace) -> list[RunSpec]:
    """One spec, or with `--data all` one per data mode (files, memory, synthetic), equal otherwise."""
    if args.data != DATA_ALL:
        return [spec_from_args(args)]
    return [spec_from_args(argparse.Namespace(**{**vars(args), "data": mode})) for mode in DATA_MODES]


def ingest_traces(folder: RunFolder, err: Console) -> list[str]:
    """Trace files -> the run's tables. A failure is one printed line and `raw/ingest.log`, never a lost run."""
    log = folder.raw_dir / INGEST_LOG
    try:
        from analyzers.ingest.pipeline import ingest_run
        from analyzers.trace.tables import THREAD_TIMELINE

        tables = ingest_run(folder)
    except Exception as e:  # noqa: BLE001 - the run folder is complete without its tables
        log.write_text("".join(traceback.format_exception(type(e), e, e.__traceback__)))
        err.print(f"[yellow]traces not ingested[/yellow] ({type(e).__name__}: {e}); details in {log}")
        return []
    log.write_text(f"ingested: {', '.join(tables) or 'no tables'}\n")
    traced = [name for name in tables if name != THREAD_TIMELINE]
    if traced:
        from analyzers.trace.trace_window import window_span

        span = window_span(folder)
        err.print(f"trace tables: {', '.join(traced)}{f' ({span.label})' if span else ''}")
    return tables


def builtin_options_given(args: argparse.Namespace) -> list[str]:
    """The flags of the built-in workload that were given (a value other than the default)."""
    measuring = set(options.command_options())
    given = []
    for name, (_, opt, f) in options.spec_fields().items():
        if not opt.cli or name in measuring or not hasattr(args, name):
            continue
        default = None if f.default is dataclasses.MISSING else f.default
        if getattr(args, name) != default:
            given.append(options.flag_of(name))
    if args.python:
        given.append("--python")
    return given


def profile_command(args: argparse.Namespace) -> int:
    """`tracer profile [measuring options] -- COMMAND ...`: the user's command as the measured child."""
    from analyzers.figures.run_summary import summarise
    from analyzers.run.run import Run
    from tracer.measure.command import (
        COMMAND_TRACES,
        COMMAND_WINDOWED_TRACES,
        CommandLaunch,
        CommandRunner,
        command_spec,
        resolve_executable,
    )

    given = builtin_options_given(args)
    if given:
        raise UserError(
            f"{', '.join(given)} describe{'s' if len(given) == 1 else ''} the built-in workload, not a command:"
            f" drop {'it' if len(given) == 1 else 'them'}, or drop the command after --"
        )
    if args.trace not in COMMAND_TRACES:
        raise UserError(
            f"--trace {args.trace} runs inside the built-in worker; a command takes --trace {', '.join(COMMAND_TRACES)}"
        )
    if args.trace_window is not None and args.trace not in COMMAND_WINDOWED_TRACES:
        raise UserError(
            "--trace-window beside a command applies to --trace torch (the probe opens the profiler at the"
            f" window's steps); --trace {args.trace} traces a command whole"
        )
    cwd = Path.cwd()
    resolve_executable(args.command[0], cwd)  # before any folder: a command that cannot start leaves none
    measuring = {name: getattr(args, name) for name in options.command_options()}
    options.validate_options(measuring)
    spec = command_spec(measuring)
    backend = tracing.backend(spec.trace)
    backend.check(spec)
    output_dir(args.out)
    err = err_console()
    runs = []
    for repeat in range(1, args.repeat + 1):
        if args.repeat > 1:
            err.print(f"repeat {repeat}/{args.repeat}")
        launch = CommandLaunch(tuple(args.command), cwd, spec, args.out, backend, probe=args.probe == "on")
        runner = CommandRunner(launch, err)
        folder, record = runner.run()
        ingest_traces(folder, err)
        run = Run.open(folder)  # computed once for the summary, the diagnosis and the repeats
        runs.append(run)
        # the summary on stderr: the command's stdout (redirected to a file, piped on) holds only its own output
        print_summary(summarise(run), err)
        print_block(run, err)
        if record.outcome.status is not RunStatus.OK:
            err.print(f"[red]run {record.outcome.status.value}:[/red] {escape(record.outcome.cause)}")
            return exit_status(record.outcome, runner.ended_by, runner.signals.last, command=True)
        if runner.signalled:
            err.print("tracer: interrupted after the run ended; its folder is complete")
            return shell_code(runner.signals.last)
    if len(runs) > 1:
        print_repeats([summarise(r) for r in runs], err)
    return 0
