"""`tracer mcp`: the read-only commands as tools of a Model Context Protocol server over stdio (the official
`mcp` SDK), over one folder of runs, so that an assistant can answer "why is my training slow" by calling
them (docs/guide/assistants.md is the skill it reads).

Each tool runs the command it is named after as the user would (`python -m tracer CMD ... --format json
--runs DIR`, a child process: what it prints is the JSON `--format json` documents, docs/reference/json.md)
and returns that JSON; bad input is the command's one line, as the tool's error. Profiling a command is a
tool only where the server was started with `--allow-profile`: it runs code, the other tools only read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from tracer.cli.common import add_runs_dir
from tracer.core.options import TRACE_BACKENDS

SERVER_NAME = "dl-tracer"
READ_ONLY_TOOLS = ("runs", "show", "diagnose", "diff", "compare", "analyze", "gate")
PROFILE_TOOL = "profile"
ALLOW_PROFILE_FLAG = "--allow-profile"
TOOL_TIMEOUT_S = 600  # a first `analyze` of a big trace imports it
PROFILE_TIMEOUT_S = 3600
INSTRUCTIONS = (
    "dl-tracer profiles deep-learning training. Runs live in one folder; `runs` lists them. To explain a slow "
    "training: `show` a run (its steady speed and data wait), `diagnose` it (every rule's verdict, the knob to "
    "try), `diff` it against a faster run (where the step's time went), `analyze` its trace (API calls, "
    "kernels). Every number is the steady state unless a field says whole run; null means not measured."
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "mcp",
        help="serve the read-only commands as tools to an assistant (Model Context Protocol over stdio)",
        description="A Model Context Protocol server on stdin/stdout: the tools "
        f"{', '.join(READ_ONLY_TOOLS)} return the JSON their commands print with --format json, over the runs "
        f"in --runs. `{ALLOW_PROFILE_FLAG}` adds the tool `{PROFILE_TOOL}`, which runs a training command.",
    )
    add_runs_dir(p)
    p.add_argument(
        ALLOW_PROFILE_FLAG,
        action="store_true",
        help="also offer the tool `profile`, which runs a command the assistant gives (off by default)",
    )
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    build_server(Path(args.runs_dir), args.allow_profile).run("stdio")
    return 0


class ToolFailed(Exception):
    """A command's own one-line error, handed to the assistant as the tool's error."""


def tracer_json(*argv: str, timeout: float = TOOL_TIMEOUT_S) -> dict[str, Any]:
    """`tracer ARGV --format json` in a child process, its JSON; its error line raised as ToolFailed. Exit 1
    is a gate that failed, which is an answer, not an error."""
    done = subprocess.run(
        [sys.executable, "-m", "tracer", *argv, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,  # never the server's stdin: that is the protocol's
    )
    if done.returncode not in (0, 1) or not done.stdout.strip():
        lines = done.stderr.strip().splitlines()
        raise ToolFailed(lines[-1] if lines else f"tracer {argv[0]} ended with exit code {done.returncode}")
    data: dict[str, Any] = json.loads(done.stdout)
    return data


RunRef = Annotated[str, Field(description="a run id (or a unique part of it), a run folder path, or a trace file")]


def build_server(runs_dir: Path, allow_profile: bool = False) -> Any:
    """The server with its tools, each calling its command over `runs_dir`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS)
    where = ["--runs", str(runs_dir)]
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)

    def call(*argv: str, timeout: float = TOOL_TIMEOUT_S) -> dict[str, Any]:
        try:
            return tracer_json(*argv, *where, timeout=timeout)
        except ToolFailed as e:
            raise ToolError(str(e)) from None

    def runs() -> dict[str, Any]:
        """Every run in the folder: id, framework, model, device, batch, trace, status, steady images/s, load."""
        return call("runs")

    def show(run: RunRef, warmup: int = 1) -> dict[str, Any]:
        """One run's summary: steady epoch time and images/s, data wait share, CPU, memory, GPU, energy."""
        return call("show", run, "--warmup", str(warmup))

    def diagnose(run: RunRef) -> dict[str, Any]:
        """Every diagnosis rule's verdict on one run (fired or quiet), its evidence and the knob to try."""
        return call("diagnose", run)

    def diff(a: RunRef, b: RunRef, warmup: int = 1) -> dict[str, Any]:
        """Why run B's step per image differs from run A's: the gap split into data wait, compute, host and GPU
        time by kernel class, ranked, with sentences."""
        return call("diff", a, b, "--warmup", str(warmup))

    def compare(runs: list[str], no_group: bool = False) -> dict[str, Any]:
        """Runs (or groups of repeats) side by side on every headline metric, each with why its ratio to the
        first is within noise ('' where it is a finding)."""
        return call("compare", *runs, *(["--no-group"] if no_group else []))

    def analyze(run: RunRef, phase: str = "whole", rank: int | None = None) -> dict[str, Any]:
        """A traced run's CUDA API calls, kernels (and their classes), memory operations, operators and threads
        over one phase: whole, startup, warmup, steady, teardown or 'epoch N'."""
        return call("analyze", run, "--phase", phase, *(["--rank", str(rank)] if rank is not None else []))

    def gate(baseline: list[str], candidate: list[str], thresholds: dict[str, float] | None = None) -> dict[str, Any]:
        """Whether the candidate runs regressed against the baseline runs beyond noise and threshold (passed:
        false names the metrics, worst first), with the reason from diff. thresholds: metric key -> percent."""
        given = [f"{k}={v}" for k, v in (thresholds or {}).items()]
        return call("gate", "--baseline", *baseline, "--candidate", *candidate,
                    *(x for t in given for x in ("--threshold", t)))  # fmt: skip

    for tool in (runs, show, diagnose, diff, compare, analyze, gate):
        server.add_tool(tool, annotations=read_only)
    assert tuple(t.__name__ for t in (runs, show, diagnose, diff, compare, analyze, gate)) == READ_ONLY_TOOLS

    if allow_profile:

        def profile(command: list[str], trace: str = "none", timeout_s: int = 1800) -> dict[str, Any]:
            """Profile a training command (its argv, run in the server's working folder) into a new run of the
            folder; returns its summary as `show` gives it. trace: none, nsys, cupti, torch or native."""
            if trace not in TRACE_BACKENDS:
                raise ToolError(f"trace {trace!r}: give one of {', '.join(TRACE_BACKENDS)}")
            before = set(_run_ids(runs_dir))
            argv = ["profile", "--out", str(runs_dir), "--trace", trace, "--timeout", str(timeout_s), "--"]
            done = subprocess.run([sys.executable, "-m", "tracer", *argv, *command], capture_output=True,
                                  text=True, timeout=PROFILE_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
            made = sorted(set(_run_ids(runs_dir)) - before)
            if not made:
                lines = done.stderr.strip().splitlines()
                raise ToolError(lines[-1] if lines else f"tracer profile ended with exit code {done.returncode}")
            return call("show", made[-1])

        server.add_tool(profile, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    return server


def _run_ids(runs_dir: Path) -> list[str]:
    from tracer.core.runfolder import list_runs

    return [f.run_id for f in list_runs(runs_dir)] if runs_dir.is_dir() else []
