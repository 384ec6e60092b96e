"""Spreads a campaign's cells over a Ray cluster, one run per node at a time.

Every node offers one unit of the custom resource `tracer_node` (`ray start ... --resources
'{"tracer_node": 1}'`) and every run asks for that unit, so runs never share a machine; a GPU run asks
for its GPUs too. On the node the task runs `tracer profile` into a temporary folder and sends the run
folder back as tar bytes, or copies it into a folder every node and the driver can see (`--shared-dir`).
The driver then files it exactly as the local runner does (`Campaign.finish`).

A node lost mid-run kills the task's worker process, and Ray runs the task again elsewhere
(`max_retries`); a run ended by SIGTERM on its node (the node shutting down) raises `NodeInterrupted`,
which Ray retries too (`retry_exceptions`). A run that fails on its own merits is no exception: it comes
back as a failed run folder, and only the campaign's `--retry` runs it again.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from tracer.campaign.local import die_with_parent, log_tail, profile_command
from tracer.campaign.plan import Cell
from tracer.campaign.record import OK, Campaign
from tracer.campaign.view import CampaignView
from tracer.core.errors import UserError

RESOURCE = "tracer_node"
# A node that is a board of some type also offers one `board:<type>` (e.g. board:jetson-nano); a plan's
# `board` knob makes its runs ask for that unit as well, so they land only on boards of that type.
BOARD_PREFIX = "board:"
NODE_RETRIES = 3
WAIT_S = 1.0


class NodeInterrupted(RuntimeError):
    """The run was stopped from outside on its node (SIGTERM at shutdown): worth running elsewhere."""


def run_on_node(args: list[str], shared_stage: str | None, cwd: str | None = None) -> dict[str, Any]:
    """The Ray task: one `tracer profile` on whichever node Ray chose (a command plan's cell in `cwd`,
    the plan's folder, on a shared filesystem); returns what the driver needs."""
    host = socket.gethostname()
    with tempfile.TemporaryDirectory(prefix="tracer-campaign-") as tmp:
        out = Path(tmp) / "runs"
        log = Path(tmp) / "profile.log"
        with log.open("wb") as f:
            code = subprocess.call(
                profile_command(args, out), stdout=f, stderr=subprocess.STDOUT, preexec_fn=die_with_parent, cwd=cwd
            )
        result: dict[str, Any] = {"host": host, "code": code, "log_tail": log_tail(log), "run_id": None, "tar": None}
        result["node"] = _node_id()
        folders = sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []
        if not folders:
            return result
        folder = folders[-1]
        status = _status(folder)
        if status == "interrupted":
            raise NodeInterrupted(f"run {folder.name} on {host} was interrupted from outside")
        result["run_id"] = folder.name
        if shared_stage is not None:
            target = Path(shared_stage) / folder.name
            partial = target.with_name(target.name + ".part")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(folder, partial)
            os.replace(partial, target)
        else:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                tar.add(folder, arcname=folder.name)
            result["tar"] = buf.getvalue()
        return result


def _node_id() -> str:
    """The Ray node this task runs on: several nodes may share a host name (boards on one network)."""
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # noqa: BLE001 - not inside Ray (called directly): no node to name
        return ""


def board_resources(cell: Cell) -> dict[str, float]:
    """What a run asks of a node: the node itself (never shared), and its board type if the plan says."""
    wanted = {RESOURCE: 1.0}
    if cell.board:
        wanted[BOARD_PREFIX + cell.board] = 1.0
    return wanted


def _status(folder: Path) -> str:
    try:
        return str(json.loads((folder / "run.json").read_text())["outcome"]["status"])
    except (OSError, ValueError, KeyError, TypeError):
        return "failed"


def _unpack(result: dict[str, Any], stage: Path, shared_stage: Path | None) -> None:
    """Puts the returned run folder into the cell's staging folder on the driver."""
    stage.mkdir(parents=True, exist_ok=True)
    if result.get("tar") is not None:
        with tarfile.open(fileobj=io.BytesIO(result["tar"]), mode="r:gz") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(stage, filter="data")
            else:  # Python without PEP 706; the archive comes from our own task
                tar.extractall(stage)  # noqa: S202
    elif shared_stage is not None and result.get("run_id"):
        shutil.move(str(shared_stage / result["run_id"]), str(stage / result["run_id"]))


def run_ray(
    campaign: Campaign,
    cells: list[Cell],
    retry: int,
    view: CampaignView,
    address: str,
    shared_dir: Path | None = None,
    node_retries: int = NODE_RETRIES,
) -> None:
    try:
        import ray
        from ray.exceptions import RayError
    except ImportError:
        raise UserError("--ray needs Ray in the tracer's environment: pip install 'dl-tracer[ray]'") from None
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UserError(f"cannot reach a Ray cluster at '{address}': {e}; start one with `ray start --head`") from None
    try:
        nodes = ray.cluster_resources().get(RESOURCE, 0)
        if nodes < 1:
            raise UserError(
                f"no node of the Ray cluster at '{address}' offers the '{RESOURCE}' resource: "
                f"start every node with --resources '{{\"{RESOURCE}\": 1}}'"
            )
        offered = ray.cluster_resources()
        missing = sorted({c.board for c in cells if c.board and offered.get(BOARD_PREFIX + c.board, 0) < 1})
        if missing:
            have = sorted(k[len(BOARD_PREFIX) :] for k in offered if k.startswith(BOARD_PREFIX)) or ["none"]
            raise UserError(
                f"the plan targets board type(s) {', '.join(missing)} but no node of the Ray cluster at "
                f"'{address}' offers them (boards there: {', '.join(have)}); start a board's node with "
                f'--resources \'{{"{RESOURCE}": 1, "{BOARD_PREFIX}{missing[0]}": 1}}\''
            )
        view.note(f"ray: {int(nodes)} node(s) offer {RESOURCE}; {len(cells)} run(s) to place")
        task = ray.remote(run_on_node)
        pending: dict[Any, tuple[Cell, int, Path | None]] = {}

        def submit(cell: Cell, tries_left: int) -> None:
            campaign.begin(cell, host="ray")
            shared_stage = None
            if shared_dir is not None:
                shared_stage = shared_dir / campaign.plan.name / cell.cell_id
                shutil.rmtree(shared_stage, ignore_errors=True)
                shared_stage.mkdir(parents=True)
            ref = task.options(
                resources=board_resources(cell),
                num_cpus=0,
                num_gpus=cell.gpus,
                max_retries=node_retries,
                retry_exceptions=[NodeInterrupted],
                name=f"tracer:{cell.cell_id}",
            ).remote(cell.profile_args(), str(shared_stage) if shared_stage else None, cell.cwd)
            pending[ref] = (cell, tries_left, shared_stage)
            view.started(cell, "ray")

        for cell in cells:
            submit(cell, retry)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                cell, tries_left, shared_stage = pending.pop(ref)
                cause = ""
                try:
                    result = ray.get(ref)
                    node = result.get("node") or ""
                    campaign.cells[cell.cell_id].host = result["host"] + (f" (ray node {node[:8]})" if node else "")
                    _unpack(result, campaign.staging(cell.cell_id), shared_stage)
                    cause = (
                        f"tracer profile exited with code {result['code']} on {result['host']}: {result['log_tail']}"
                    )
                except (RayError, NodeInterrupted) as e:
                    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    cause = f"ray: {type(e).__name__}: {first}"
                entry = campaign.finish(cell, cause)
                final = entry.state == OK or tries_left == 0
                view.ended(cell, entry, final)
                if not final:
                    submit(cell, tries_left - 1)
    finally:
        ray.shutdown()
