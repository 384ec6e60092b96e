"""`tracer env create|list`: per-framework virtual environments."""

from __future__ import annotations

import argparse

from rich.table import Table

from tracer.cli.common import console, print_wrapped
from tracer.core.errors import UserError
from tracer.core.frameworks import FRAMEWORKS
from tracer.measure import environments


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("env", help="per-framework virtual environments")
    esub = p.add_subparsers(dest="env_cmd", required=True)
    c = esub.add_parser("create", help="make the framework's environment under the cache folder")
    c.add_argument("framework", help=f"one of: {', '.join(FRAMEWORKS)}")
    gpu = c.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", dest="gpu", action="store_true", default=None, help="install the GPU packages")
    gpu.add_argument("--cpu", dest="gpu", action="store_false", help="install the CPU packages")
    c.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter to make the environment from (default: the tool's own; for SINGA a CPython 3.6, "
        "found on PATH or in pyenv's versions folder)",
    )
    c.set_defaults(func=cmd_env_create)
    lst = esub.add_parser("list", help="show which frameworks are installed")
    lst.set_defaults(func=cmd_env_list)
    ns = esub.add_parser("nsys", help="which nsys reads and writes reports, and how to point at another")
    ns.set_defaults(func=cmd_env_nsys)


def cmd_env_create(args: argparse.Namespace) -> int:
    status = environments.create(args.framework, args.gpu, args.python, console())
    if not status.installed:
        raise UserError(f"{args.framework}: the environment was made but the framework does not import")
    console().print(f"{args.framework} {status.version}: {status.python}")
    return 0


def cmd_env_list(args: argparse.Namespace) -> int:
    table = Table("framework", "installed", "version", "interpreter")
    for s in environments.list_all():
        table.add_row(s.framework, "yes" if s.installed else "no", s.version or "-", s.python or "-")
    console().print(table)
    console().print(f"environments live in {environments.env_dir('x').parent} (set TRACER_CACHE to move them)")
    return 0


def cmd_env_nsys(args: argparse.Namespace) -> int:
    """The nsys that `--trace nsys` and `import x.nsys-rep` use, its version (an nsys reads reports of its
    own version and older), the export it makes, and how to choose another."""
    from tracer.measure.tracing import nsys

    out = console()
    found = nsys.nsys_if_any()
    if found is None:
        print_wrapped(out, f"no nsys found (looked in $NSYS, PATH, the tool's cache, /opt/nvidia): {nsys.INSTALL_HINT}")
        return 0
    version = nsys.version_text(nsys.nsys_version(str(found)))
    out.print(f"nsys {version}: {found} (from {nsys.found_where(found)})", markup=False, soft_wrap=True)
    print_wrapped(
        out, f"exports reports to {nsys.best_export(str(found))}; it reads reports of nsys {version} and older"
    )
    print_wrapped(
        out,
        "to use another: NSYS=/path/to/nsys (the executable or its folder), e.g. "
        "NSYS=/opt/nvidia/nsight-systems/2026.1.1/bin tracer import report.nsys-rep",
    )
    return 0
