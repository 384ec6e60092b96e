"""`tracer data make`: the generated image sets."""

from __future__ import annotations

import argparse
from pathlib import Path

from tracer import dataset
from tracer.cli.common import console, err_console


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("data", help="generated datasets")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    m = dsub.add_parser("make", help="generate the small (791) or big (6003) image set")
    m.add_argument("name", choices=sorted(dataset.SIZES))
    m.add_argument("--out", type=Path, help="write here instead of the cache folder")
    m.set_defaults(func=cmd_data_make)


def cmd_data_make(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    size = dataset.SIZES[args.name]
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
