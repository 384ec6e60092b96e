"""`tracer profile`: one training run under the sampler."""

from __future__ import annotations

import argparse
import traceback
from pathlib import Path

from rich.console import Console

from tracer import cases, dataset, environments, tracing
from tracer.cli.common import console, err_console
from tracer.cli.runs import print_repeats, print_summary
from tracer.errors import UserError
from tracer.frameworks import FRAMEWORKS, MODELS
from tracer.records import RunSpec, RunStatus
from tracer.runfolder import RunFolder

EXIT_RUN_FAILED = 1
INGEST_LOG = "ingest.log"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "profile",
        help="train one framework/model/dataset under the sampler and write a run folder",
        description="Train in a child process under a psutil/NVML sampler (optionally a tracer); write runs/<id>/.",
    )
    p.add_argument("--framework", required=True, help=f"one of: {', '.join(FRAMEWORKS)}")
    p.add_argument(
        "--case", help=f"a named case: {', '.join(f'{c.name} ({c.model}, {c.dataset})' for c in cases.CASES.values())}"
    )
    p.add_argument("--model", help=f"one of: {', '.join(MODELS)} (overrides the case's)")
    p.add_argument("--dataset", help="small (791 images), big (6003) or a folder with one sub-folder per class")
    p.add_argument("--device", default="cpu", help="cpu (default) or gpu")
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1, the study's plain SGD)")
    p.add_argument("--epochs", type=int, default=1, help="epochs (default 1)")
    p.add_argument("--limit", type=int, help="train on the first N images only (balanced across classes)")
    p.add_argument("--image-size", type=int, default=224, help="side of the square input in pixels (default 224)")
    p.add_argument("--sample-hz", type=float, default=10.0, help="sampling rate of CPU/RAM/threads/GPU (default 10)")
    p.add_argument(
        "--trace",
        default="none",
        help="trace backend (default none): " + "; ".join(f"{k}: {v}" for k, v in tracing.HELP.items()),
    )
    p.add_argument(
        "--nsys-sampling",
        action="store_true",
        help="with --trace nsys: also CPU IP sampling and context switches of the process tree (costs more)",
    )
    p.add_argument(
        "--pyspy",
        action="store_true",
        help="record the worker's Python stacks (all threads) with py-spy into raw/pyspy.speedscope.json",
    )
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
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="train the same spec N times, one run folder each (default 1); ends with the median and range",
    )
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
        pyspy=args.pyspy,
        nsys_sampling=args.nsys_sampling,
    )
    cases.check_spec(spec)
    tracing.backend(spec.trace).check(spec)  # cheap checks before anything is generated; the runner re-checks
    if spec.nsys_sampling and spec.trace != "nsys":
        raise UserError("--nsys-sampling applies to --trace nsys only")
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

    if args.repeat < 1:
        raise UserError(f"--repeat must be 1 or more (got {args.repeat})")
    spec = spec_from_args(args)
    python = environments.resolve_python(spec.framework, args.python)
    err = err_console()
    data_dir = resolve_dataset(spec.dataset, err)
    folders = []
    for repeat in range(1, args.repeat + 1):
        if args.repeat > 1:
            err.print(f"repeat {repeat}/{args.repeat}")
        launch = Launch(spec, python, data_dir, args.out, fault=args.inject_fault)
        folder, record = Runner(launch, err).run()
        folders.append(folder)
        if spec.trace != "none" or spec.pyspy:
            ingest_traces(folder, err)
        print_summary(summarise(folder), console())
        if record.outcome.status is not RunStatus.OK:
            err.print(f"[red]run {record.outcome.status.value}:[/red] {record.outcome.cause}")
            return EXIT_RUN_FAILED
    if len(folders) > 1:
        print_repeats([summarise(f) for f in folders], console())
    return 0


def ingest_traces(folder: RunFolder, err: Console) -> list[str]:
    """Trace files -> the run's tables. A failure is one printed line and `raw/ingest.log`, never a lost run."""
    log = folder.raw_dir / INGEST_LOG
    try:
        from analyzers.ingest import ingest_run

        tables = ingest_run(folder)
    except Exception as e:  # noqa: BLE001 - the run folder is complete without its tables
        log.write_text("".join(traceback.format_exception(type(e), e, e.__traceback__)))
        err.print(f"[yellow]traces not ingested[/yellow] ({type(e).__name__}: {e}); details in {log}")
        return []
    log.write_text(f"ingested: {', '.join(tables) or 'no tables'}\n")
    if tables:
        err.print(f"trace tables: {', '.join(tables)}")
    return tables
