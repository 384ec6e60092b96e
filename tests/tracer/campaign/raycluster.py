"""A throwaway Ray cluster on this machine: a head and worker nodes, each offering one `tracer_node`.

The machine may be shared, so the cluster gets a temp folder of its own and is stopped by ending
exactly the processes whose command lines name that folder (and their children), not by `ray stop`,
which would end every Ray process on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).with_name("ray"))
NODE = json.dumps({"tracer_node": 1})
OBJECT_STORE_BYTES = str(100 * 1024 * 1024)
START_ATTEMPTS = 3


class RayStartTimeout(RuntimeError):
    """A node did not come up in Ray's fixed start-up window: the machine is too busy, not our bug."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    def __init__(self, workers: int = 1, resources: list[dict[str, float]] | None = None) -> None:
        """`resources`: extra custom resources of each node, head first (e.g. a `board:<type>` unit)."""
        self.workers = workers
        self.resources = resources or []
        self.temp = Path(tempfile.mkdtemp(prefix="tracer-ray-", dir="/tmp"))  # short: Ray's socket paths
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # no idle workers started ahead of need: fewer processes competing while the node comes up
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_enable_worker_prestart": "0"}

    def _ray(self, *args: str) -> None:
        """`ray start ...`, tried again when it fails: a raylet gives its agents a fixed 15 s to come up
        (ray-project/ray#65983), which a busy machine can miss."""
        for _ in range(START_ATTEMPTS):
            result = subprocess.run([RAY, *args], env=self.env, capture_output=True, text=True, timeout=180)
            if result.returncode == 0:
                return
            self._stop_node_processes(args)
        error = RayStartTimeout if "timed out during startup" in result.stderr else RuntimeError
        raise error(f"ray {' '.join(args)} failed {START_ATTEMPTS} times: {result.stderr[-2000:]}")

    def _stop_node_processes(self, args: tuple[str, ...]) -> None:
        if "--head" in args:  # a failed head leaves its GCS behind: clear the whole cluster and retry
            self.stop()
            self.temp.mkdir(parents=True, exist_ok=True)

    def _node_args(self, index: int) -> list[str]:
        extra = self.resources[index] if index < len(self.resources) else {}
        return ["--num-cpus", "1", "--resources", json.dumps({**json.loads(NODE), **extra}),
                "--object-store-memory", OBJECT_STORE_BYTES, "--disable-usage-stats"]  # fmt: skip

    def start(self) -> LocalCluster:
        self._ray("start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(self.port),
                  "--temp-dir", str(self.temp), "--include-dashboard=false", *self._node_args(0))  # fmt: skip
        for i in range(self.workers):
            self._ray("start", "--address", self.address, "--node-ip-address", "127.0.0.1", *self._node_args(i + 1))
        return self

    def processes(self) -> list[psutil.Process]:
        me = {psutil.Process().pid, *(p.pid for p in psutil.Process().parents())}
        tag = str(self.temp)
        roots = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if p.pid not in me and any(tag in a for a in (p.info["cmdline"] or [])):
                    roots.append(p)
            except psutil.Error:
                continue
        found = {p.pid: p for p in roots}
        for p in roots:
            try:
                found.update({c.pid: c for c in p.children(recursive=True)})
            except psutil.Error:
                continue
        return list(found.values())

    def raylets(self) -> list[psutil.Process]:
        return [p for p in self.processes() if p.name() == "raylet"]

    def stop(self) -> None:
        procs = self.processes()
        for p in procs:
            try:
                p.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=10)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=5)
        shutil.rmtree(self.temp, ignore_errors=True)

    def wait_for_nodes(self, count: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.raylets()) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {count} raylets after {timeout_s} s")
            time.sleep(0.5)


@contextmanager
def running_cluster(workers: int, resources: list[dict[str, float]] | None = None) -> Iterator[LocalCluster]:
    """A started cluster of a head and `workers` worker nodes, stopped afterwards. Ray's agents must come
    up within a fixed 15 s (ray-project/ray#65983), which a heavily loaded machine can miss: that skips,
    unless TRACER_REQUIRE_RAY=1 (CI) makes it fail."""
    import pytest

    c = LocalCluster(workers=workers, resources=resources)
    try:
        try:
            c.start()
        except RayStartTimeout as e:
            if os.environ.get("TRACER_REQUIRE_RAY") == "1":
                raise
            pytest.skip(f"the machine is too busy for Ray's node start-up window: {str(e)[:200]}")
        c.wait_for_nodes(workers + 1)
        yield c
    finally:
        c.stop()
