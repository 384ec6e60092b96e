"""`tracer view`: the desktop viewer over run folders (PySide6 + pyqtgraph, imported only when used)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tracer.cli.common import VIEW_SIZE_BOUND, add_runs_dir, check_bound
from tracer.cli.outputs import output_file, path_arg
from tracer.core.errors import UserError
from tracer.core.runfolder import RunFolder, find_run


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("view", help="open runs side by side in the desktop viewer")
    p.add_argument(
        "runs", nargs="*", help="run ids (or unique parts), run folder paths or traces; none opens the browser"
    )
    add_runs_dir(p)
    p.add_argument("--screenshot", type=path_arg, metavar="FILE.png", help="render offscreen, save the window, exit")
    p.add_argument("--columns", action="store_true", help="one column per run instead of one colour per run")
    p.add_argument(
        "--align",
        choices=("start", "epoch"),
        default="start",
        help="x axis zero: run start (default) or first epoch start",
    )
    p.add_argument("--size", default="1600x1150", help="screenshot size in pixels, WxH (default 1600x1150)")
    p.set_defaults(func=cmd_view)


def resolve(ref: str, out_dir: Path) -> Path:
    """A run folder by path or id, or a trace imported into the cache as `tracer import` imports it. A
    damaged run is named in one line and still opened (the viewer says what is wrong with it); a folder that
    is neither a run nor a trace is refused."""
    from analyzers.ingest.cached_run import cached_import, is_trace_ref

    path = Path(ref)
    if is_trace_ref(ref):
        folder = cached_import(path)
    else:
        folder = RunFolder(path) if path.is_dir() else find_run(out_dir, ref)
    try:
        folder.read_record()
    except UserError as e:
        if not folder.run_json.exists():
            raise
        print(f"tracer: warning: {e}", file=sys.stderr)
    return folder.path


def cmd_view(args: argparse.Namespace) -> int:
    try:
        from viewer.app import has_display, run_viewer, x11_problem
    except ImportError as e:
        raise UserError(f"the viewer needs PySide6 and pyqtgraph: pip install 'dl-tracer[viewer]' ({e})") from None
    paths = [resolve(ref, args.runs_dir) for ref in args.runs]
    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise UserError(f"--size {args.size}: give it as WIDTHxHEIGHT, e.g. 1600x1150") from None
    for side in (width, height):
        check_bound(VIEW_SIZE_BOUND, side)
    screenshot = args.screenshot
    if screenshot is not None and screenshot.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--screenshot {screenshot}: the file must end in .png or .svg")
    if screenshot is not None:
        output_file(screenshot, "--screenshot")
    if screenshot is None and not has_display():
        raise UserError("no display here: use --screenshot FILE.png to render the window offscreen")
    # a screenshot renders offscreen unless QT_QPA_PLATFORM names a platform: then it is checked as a window is
    problem = x11_problem() if screenshot is None or os.environ.get("QT_QPA_PLATFORM") else None
    if problem:
        raise UserError(problem)
    layout_mode = "columns" if args.columns else "overlay"
    return run_viewer(paths, args.runs_dir, screenshot, (width, height), layout_mode, args.align)
