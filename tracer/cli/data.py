"""`tracer data make`: the generated image sets."""

from __future__ import annotations

import argparse
from pathlib import Path

from tracer.cli.common import console, err_console
from tracer.cli.outputs import output_dir, path_arg
from tracer.core.errors import UserError
from tracer.measure import dataset


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("data", help="generated datasets")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    m = dsub.add_parser("make", help="generate the small (791) or big (6003) image set")
    m.add_argument("name", choices=sorted(dataset.SIZES))
    m.add_argument(
        "--out", type=path_arg, help="write here instead of the cache folder (a new, empty or generated one)"
    )
    m.set_defaults(func=cmd_data_make)


def cmd_data_make(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    size = dataset.SIZES[args.name]
    if args.out:
        _check_target(args.out)
    with Progress(console=err_console(), transient=True) as progress:
        task = progress.add_task(f"generating {size.name}", total=size.images)

        def advance(n: int) -> None:
            progress.advance(task, n)

        if args.out:
            path = dataset.generate(args.out, size.images, progress=advance)
        else:
            path = dataset.ensure_generated(size.name, progress=advance)
    console().print(f"{size.name}: {size.images} images in {path}")
    return 0


def _check_target(out: Path) -> None:
    """Generating replaces the folder: only a new, empty or earlier generated one may be named."""
    if out.is_dir() and any(out.iterdir()) and not (out / dataset.DONE_MARKER).exists():
        raise UserError(f"--out {out} holds files of its own: generate into a new or empty folder (it is replaced)")
    if not (out / dataset.DONE_MARKER).exists():
        output_dir(out)  # never inside a run folder or another dataset
