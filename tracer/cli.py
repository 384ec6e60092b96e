"""`tracer` command line: one function per subcommand, each returning an exit code.

Errors a user can cause are `UserError`s: one line on stderr, exit code 2. This module is the
application shell, so it may import from analyzers (and, lazily, viewer); nothing else in tracer does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tracer import cases, dataset, environments, tracing
from tracer.errors import UserError
from tracer.frameworks import FRAMEWORKS, MODELS
from tracer.records import RunSpec, RunStatus

EXIT_RUN_FAILED = 1


def _console() -> Console:
    """Wide when piped, so tables are not cut to 80 columns in logs."""
    return Console(stderr=False, highlight=False, width=None if sys.stdout.isatty() else 200)


def _err_console() -> Console:
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


# ---------------------------------------------------------------- profile


def add_profile_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "profile",
        help="train one framework/model/dataset under the sampler and write a run folder",
        description="Train in a child process under a psutil/NVML sampler (optionally a tracer) and write runs/<run-id>/.",
    )
    p.add_argument("--framework", required=True, help=f"one of: {', '.join(FRAMEWORKS)}")
    p.add_argument("--case", help=f"a named case: {', '.join(f'{c.name} ({c.model}, {c.dataset})' for c in cases.CASES.values())}")
    p.add_argument("--model", help=f"one of: {', '.join(MODELS)} (overrides the case's)")
    p.add_argument("--dataset", help="small (791 images), big (6003) or a folder with one sub-folder per class")
    p.add_argument("--device", default="cpu", help="cpu (default) or gpu")
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1, the study's plain SGD)")
    p.add_argument("--epochs", type=int, default=1, help="epochs (default 1)")
    p.add_argument("--limit", type=int, help="train on the first N images only (balanced across classes)")
    p.add_argument("--image-size", type=int, default=224, help="side of the square input in pixels (default 224)")
    p.add_argument("--sample-hz", type=float, default=10.0, help="sampling rate of CPU/RAM/threads/GPU (default 10)")
    p.add_argument("--trace", default="none", help=f"trace backend: {', '.join(tracing.names())} (default none)")
    p.add_argument("--out", type=Path, default=Path("runs"), help="where run folders go (default runs/)")
    p.add_argument("--timeout", type=float, help="stop the training after this many seconds (run ends as timeout)")
    p.add_argument("--python", help="an interpreter that has the framework, instead of its tracer env")
    p.add_argument("--seed", type=int, default=0, help="seed for weights, shuffling and flips (default 0)")
    p.add_argument("--lr", type=float, default=0.001, help="SGD learning rate (default 0.001)")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
    p.add_argument("--workers", type=int, help="input-pipeline workers (default: the framework's own default)")
    p.add_argument("--prefetch", type=int, help="batches prefetched by the input pipeline")
    p.add_argument("--threads", type=int, help="intra-op threads of the framework")
    p.add_argument("--amp", action="store_true", help="mixed precision")
    p.add_argument("--gpu-thread-mode", help="TensorFlow only: e.g. gpu_private")
    p.add_argument("--inject-fault", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_profile)


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    model, data = cases.resolve_case(args.case, args.model, args.dataset)
    spec = RunSpec(
        framework=args.framework,
        model=model,
        dataset=data,
        device=args.device,
        batch=args.batch,
        epochs=args.epochs,
        limit=args.limit,
        image_size=args.image_size,
        lr=args.lr,
        momentum=args.momentum,
        seed=args.seed,
        case=args.case,
        trace=args.trace,
        sample_hz=args.sample_hz,
        timeout_s=args.timeout,
        workers=args.workers,
        prefetch=args.prefetch,
        threads=args.threads,
        amp=args.amp,
        gpu_thread_mode=args.gpu_thread_mode,
    )
    cases.check_spec(spec)
    return spec


def resolve_dataset(name: str, console: Console) -> Path:
    if name in dataset.SIZES:
        if not (dataset.cached_path(name) / dataset.DONE_MARKER).exists():
            console.print(f"generating the {name} dataset ({dataset.SIZES[name].images} images, once) ...")
        return dataset.ensure_generated(name)
    path = Path(name).expanduser().resolve()
    dataset.validate_folder(path)
    return path


def cmd_profile(args: argparse.Namespace) -> int:
    from analyzers.run_summary import summarise
    from tracer.runner import Launch, Runner

    spec = spec_from_args(args)
    python = environments.resolve_python(spec.framework, args.python)
    err = _err_console()
    data_dir = resolve_dataset(spec.dataset, err)
    launch = Launch(spec, python, data_dir, args.out, fault=args.inject_fault)
    folder, record = Runner(launch, err).run()
    print_summary(summarise(folder), _console())
    if record.outcome.status is not RunStatus.OK:
        err.print(f"[red]run {record.outcome.status.value}:[/red] {record.outcome.cause}")
        return EXIT_RUN_FAILED
    return 0


# ---------------------------------------------------------------- runs / show


def add_runs_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("runs", help="list run folders")
    p.add_argument("--out", type=Path, default=Path("runs"), help="folder of runs (default runs/)")
    p.set_defaults(func=cmd_runs)
    s = sub.add_parser("show", help="print one run's summary")
    s.add_argument("run", help="run id (or a unique part of it) or a run folder path")
    s.add_argument("--out", type=Path, default=Path("runs"), help="folder of runs (default runs/)")
    s.set_defaults(func=cmd_show)


def cmd_runs(args: argparse.Namespace) -> int:
    from analyzers.run_summary import summarise
    from tracer.runfolder import list_runs

    runs = list_runs(args.out)
    if not runs:
        _err_console().print(f"no runs in {args.out}: make one with `tracer profile ...`")
        return 0
    table = Table("run id", "framework", "model", "dataset", "device", "batch", "status", "epochs", "mean epoch s")
    for folder in runs:
        try:
            s = summarise(folder)
        except UserError as e:
            table.add_row(folder.run_id, "", "", "", "", "", f"unreadable: {e}", "", "")
            continue
        table.add_row(
            s.run_id,
            s.framework,
            s.model,
            cases.dataset_label(s.dataset),
            s.device,
            str(s.batch),
            s.status,
            f"{s.epochs_done}/{s.epochs_planned}",
            _fmt(s.mean_epoch_s, ".2f"),
        )
    _console().print(table)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from analyzers.run_summary import summarise
    from tracer.runfolder import find_run

    folder = find_run(args.out, args.run)
    print_summary(summarise(folder), _console())
    record = folder.read_record()
    if record.outcome.stderr_tail and record.outcome.status is not RunStatus.OK:
        _console().print("last lines of the worker's output:")
        for line in record.outcome.stderr_tail[-10:]:
            _console().print(f"  {line}", markup=False)
    return 0


def _fmt(value: float | int | None, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def print_summary(s: object, console: Console) -> None:
    from analyzers.run_summary import RunSummary

    assert isinstance(s, RunSummary)
    rows = [
        ("run", s.run_id),
        ("what", f"{s.framework} {s.model} on {cases.dataset_label(s.dataset)}, {s.device}, batch {s.batch}"),
        ("status", s.status + (f" ({s.cause})" if s.cause else "")),
        ("epochs", f"{s.epochs_done}/{s.epochs_planned}"),
        ("mean epoch time", f"{_fmt(s.mean_epoch_s, '.3f')} s"),
        ("images/s", _fmt(s.images_per_s, ".1f")),
        ("CPU % (100 = all cores)", f"mean {_fmt(s.cpu_pct_mean, '.1f')}, max {_fmt(s.cpu_pct_max, '.1f')}"),
        ("peak RSS", f"{_fmt(s.peak_rss_mib, '.0f')} MiB ({_fmt(s.peak_rss_pct_ram, '.1f')} % of RAM)"),
        ("threads", f"min {_fmt(s.threads_min)}, median {_fmt(s.threads_median)}, max {_fmt(s.threads_max)}"),
        ("GPU utilisation", "no GPU sampled" if s.gpu_util_pct_mean is None else f"mean {s.gpu_util_pct_mean:.1f} %"),
        ("trainable parameters", _fmt(s.trainable_params, ",")),
        ("samples", str(s.samples)),
        ("folder", s.folder),
    ]
    table = Table(show_header=False, box=None)
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


# ---------------------------------------------------------------- data / env


def add_data_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("data", help="generated datasets")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    m = dsub.add_parser("make", help="generate the small (791) or big (6003) image set")
    m.add_argument("name", choices=sorted(dataset.SIZES))
    m.add_argument("--out", type=Path, help="write here instead of the cache folder")
    m.set_defaults(func=cmd_data_make)


def cmd_data_make(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    size = dataset.SIZES[args.name]
    with Progress(console=_err_console(), transient=True) as progress:
        task = progress.add_task(f"generating {size.name}", total=size.images)

        def advance(n: int) -> None:
            progress.advance(task, n)

        if args.out:
            path = dataset.generate(args.out, size.images, progress=advance)
        else:
            path = dataset.ensure_generated(size.name, progress=advance)
    _console().print(f"{size.name}: {size.images} images in {path}")
    return 0


def add_env_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("env", help="per-framework virtual environments")
    esub = p.add_subparsers(dest="env_cmd", required=True)
    c = esub.add_parser("create", help="make the framework's environment under the cache folder")
    c.add_argument("framework", help=f"one of: {', '.join(FRAMEWORKS)}")
    gpu = c.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", dest="gpu", action="store_true", default=None, help="install the GPU packages")
    gpu.add_argument("--cpu", dest="gpu", action="store_false", help="install the CPU packages")
    c.set_defaults(func=cmd_env_create)
    lst = esub.add_parser("list", help="show which frameworks are installed")
    lst.set_defaults(func=cmd_env_list)


def cmd_env_create(args: argparse.Namespace) -> int:
    status = environments.create(args.framework, args.gpu)
    if not status.installed:
        raise UserError(f"{args.framework}: the environment was made but the framework does not import")
    _console().print(f"{args.framework} {status.version}: {status.python}")
    return 0


def cmd_env_list(args: argparse.Namespace) -> int:
    table = Table("framework", "installed", "version", "interpreter")
    for s in environments.list_all():
        table.add_row(s.framework, "yes" if s.installed else "no", s.version or "-", s.python or "-")
    _console().print(table)
    _console().print(f"environments live in {environments.env_dir('x').parent} (set TRACER_CACHE to move them)")
    return 0


# ---------------------------------------------------------------- main

PARSER_BUILDERS: list[Callable[[argparse._SubParsersAction], None]] = [  # type: ignore[type-arg]
    add_profile_parser,
    add_runs_parsers,
    add_data_parser,
    add_env_parser,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracer", description="Profile deep-learning training across frameworks.")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in PARSER_BUILDERS:
        add(sub)
    return parser




def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as e:
        print(f"tracer: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("tracer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
