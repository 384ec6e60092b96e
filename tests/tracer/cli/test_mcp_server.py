"""`tracer mcp` (issue 55 item 2): an MCP client from the official SDK starts the server over stdio, as an
assistant's host does, lists its tools and calls them on the real H100 runs; what a tool returns is what
the command prints with --format json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import run_tracer
from tracer.cli.json_output import SCHEMA_KEY
from tracer.cli.mcp_server import ALLOW_PROFILE_FLAG, PROFILE_TOOL, READ_ONLY_TOOLS

RUN = "20261125-000159-pytorch-alexnet-big-gpu-b100-85cf"  # input-bound: data wait 92 % of the steady step


def _server(runs: Path, *flags: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return StdioServerParameters(command=sys.executable, args=["-m", "tracer", "mcp", "--runs", str(runs), *flags],
                                 env=env)  # fmt: skip


def _session(runs: Path, calls: list[tuple[str, dict[str, Any]]], *flags: str) -> tuple[Any, list[Any]]:
    """(the listed tools, each call's result) from one session with a server started over stdio."""

    async def talk() -> tuple[Any, list[Any]]:
        async with Client(_server(runs, *flags), read_timeout_seconds=300) as client:
            tools = (await client.list_tools()).tools
            return tools, [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(talk)


def test_a_client_lists_the_tools_and_gets_diagnose_s_verdicts(real_fixtures: Path) -> None:
    runs = real_fixtures / "gpu-h100"
    tools, (diagnosed, bad) = _session(runs, [("diagnose", {"run": "85cf"}), ("diagnose", {"run": "no-such-run"})])
    by_name = {t.name: t for t in tools}
    assert set(by_name) == set(READ_ONLY_TOOLS)  # no profile tool unless the server was started allowing it
    schema = by_name["diagnose"].input_schema
    assert schema["properties"]["run"]["type"] == "string" and schema["required"] == ["run"]
    assert by_name["gate"].input_schema["properties"]["baseline"]["type"] == "array"
    assert all(t.annotations and t.annotations.read_only_hint for t in tools)
    assert not diagnosed.is_error
    got = diagnosed.structured_content
    assert got[SCHEMA_KEY] == "dl-tracer.diagnose" and got["run"] == RUN
    verdicts = {v["rule"]: v for v in got["verdicts"]}
    assert verdicts["input-bound"]["state"] == "fired" and verdicts["input-bound"]["value"] > 90
    cli = run_tracer("diagnose", "85cf", "--runs", str(runs), "--format", "json")
    assert [v["rule"] for v in json.loads(cli.stdout)["verdicts"]] == list(verdicts)
    assert bad.is_error and "no-such-run" in bad.content[0].text


def test_gate_and_diff_are_tools_over_the_same_folder(real_fixtures: Path) -> None:
    runs = real_fixtures / "gpu-h100"
    _tools, (gated, diffed) = _session(runs, [
        ("gate", {"baseline": ["85cf"], "candidate": ["85cf"]}),
        ("diff", {"a": "85cf", "b": "a9b3"}),
    ])  # fmt: skip
    assert not gated.is_error and gated.structured_content["passed"] is True
    assert diffed.structured_content["sentences"] and diffed.structured_content["a"]["run_id"] == RUN


def test_profile_is_a_tool_only_when_the_server_allows_it(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text("import time\nfor step in range(3):\n    time.sleep(0.05)\nprint('trained')\n")
    calls = [("profile", {"command": [sys.executable, str(script)], "timeout_s": 120}), ("runs", {})]
    tools, (profiled, listed) = _session(tmp_path / "runs", calls, ALLOW_PROFILE_FLAG)
    assert PROFILE_TOOL in {t.name for t in tools}
    assert not profiled.is_error, profiled.content
    summary = profiled.structured_content["summary"]
    assert summary["status"] == "ok" and str(script) in summary["command"]
    assert [r["id"] for r in listed.structured_content["runs"]] == [profiled.structured_content["run"]]
