"""A throwaway single-node Slurm on this machine, from Debian's packages (`slurmctld`, `slurmd`, `munge`).

Everything lives in a temporary folder: munge's key and socket, `slurm.conf` (found by the Slurm
commands through `SLURM_CONF`, so /etc/slurm is never read or written), state, spool and logs, on ports
of its own. The daemons run in the foreground as children of the test and are stopped at the end, after
the cluster's jobs are cancelled. Timers are short so that a job starts and ends within seconds.
Needs root (slurmd starts jobs as their user); where that or a package is missing the test skips, unless
TRACER_REQUIRE_SLURM=1 (CI) makes it fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

MUNGED = "/usr/sbin/munged"
DAEMONS = ("slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

CONF = """\
ClusterName=tracertest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge.socket
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0,sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
MessageTimeout=5
TCPTimeout=2
KillWait=5
MinJobAge=3600
ReturnToService=2
SlurmdTimeout=60
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def find(command: str) -> str | None:
    """On PATH, or in /usr/sbin where Debian puts the daemons (not on every user's PATH)."""
    return shutil.which(command) or shutil.which(command, path="/usr/sbin")


def missing() -> str | None:
    """Why no Slurm can be started here, or None."""
    if os.geteuid() != 0:
        return "starting a Slurm node needs root"
    absent = [c for c in (MUNGED, *DAEMONS, *CLIENTS) if find(c) is None]
    if absent:
        return f"Slurm is not installed here ({', '.join(absent)} missing): apt-get install slurmctld slurmd munge"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalSlurm:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tracer-slurm-", dir="/tmp"))
        self.dir.chmod(0o711)  # munged wants its socket's folder reachable by everyone
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[IO[bytes]] = []

    def start(self) -> LocalSlurm:
        for sub in ("state", "spool"):
            (self.dir / sub).mkdir()
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(
            CONF.format(
                host=socket.gethostname().split(".")[0],
                dir=self.dir,
                cpus=os.cpu_count() or 1,
                ctld_port=free_port(),
                slurmd_port=free_port(),
            )  # fmt: skip
        )
        d = self.dir
        files = [f"--log-file={d}/munged.log", f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed"]
        self._spawn([MUNGED, "-F", "-f", f"--socket={d}/munge.socket", f"--key-file={key}", *files])
        self._wait(lambda: (d / "munge.socket").exists(), "munged's socket")
        self._spawn([str(find("slurmctld")), "-D", "-i", "-f", str(self.conf)])
        self._spawn([str(find("slurmd")), "-D", "-f", str(self.conf)])
        self._wait(self._node_idle, "the node to be idle")
        return self

    def _spawn(self, args: list[str]) -> None:
        log = (self.dir / f"{Path(args[0]).name}.out").open("wb")
        self.logs.append(log)
        self.procs.append(subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():  # type: ignore[operator]
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = {p.name: p.read_text()[-1500:] for p in self.dir.glob("*.log")}
                raise RuntimeError(f"Slurm did not come up ({what}; ended: {dead}); logs: {logs}")
            time.sleep(0.2)

    def _node_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-o", "%T", check=False).stdout
        return out.strip().startswith("idle")

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=60, check=check)

    def jobs(self) -> dict[str, tuple[str, str]]:
        """job id -> (name, state) of every job the controller still knows."""
        out = self.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T").stdout
        return {i: (n, s) for i, n, s in (line.split("|") for line in out.splitlines() if line.strip())}

    def stop(self) -> None:
        if self.procs and all(p.poll() is None for p in self.procs):
            self.run("scancel", "--user", "root", check=False)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while time.monotonic() < deadline and any(
                s in ("RUNNING", "COMPLETING", "PENDING") for _, s in self.jobs().values()
            ):
                time.sleep(0.5)
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def running_slurm() -> Iterator[LocalSlurm]:
    import pytest

    why = missing()
    if why is not None:
        if os.environ.get("TRACER_REQUIRE_SLURM") == "1":
            pytest.fail(f"TRACER_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)
    cluster = LocalSlurm()
    try:
        yield cluster.start()
    finally:
        cluster.stop()
