"""What a campaign asks of Slurm, through its own commands: `sbatch` a cell's job script, `squeue`
(then `scontrol`, then `sacct`) for the state of the campaign's jobs, `scancel` them.

Plain commands, not submitit: submitit learns a job's state from `sacct` only (facebookincubator/submitit
#1720: "sacct is required to know the status of the job"), which needs the accounting database that
small clusters, and the test's single-node Slurm, do not run; and a cell is a command (`tracer profile`),
not a Python function for submitit to pickle. `squeue -t all` and `scontrol show job` know a job until
`MinJobAge` after it ends (5 min by default); `sacct`, where there is accounting, after that.
"""

from __future__ import annotations

import getpass
import math
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tracer.campaign.local import profile_command
from tracer.campaign.plan import Cell
from tracer.core.errors import UserError

# Slurm job states (squeue %T, sacct State) in which the job may still run its cell.
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
     "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"}
)  # fmt: skip
# States in which the cluster, not the training, ended the job: the cell is worth submitting again.
CLUSTER_STATES = frozenset({"CANCELLED", "NODE_FAIL", "PREEMPTED", "TIMEOUT", "BOOT_FAIL", "DEADLINE"})
UNKNOWN = "UNKNOWN"  # Slurm forgot the job (past MinJobAge) and there is no accounting to ask
TIME_PATTERN = r"^(\d+-)?\d{1,3}(:\d{2}){0,2}$"  # sbatch --time: MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
# Without --time, a cell whose earlier run is known asks for this multiple of it (plus the margin);
# one with a --timeout knob asks for that timeout plus the margin.
TIME_FACTOR = 3.0
TIME_MARGIN_S = 600.0
COMMAND_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SlurmOptions:
    """The command line's Slurm settings (`tracer campaign --slurm ...`)."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gpus_per_job: int | None = None
    max_jobs: int | None = None

    def check(self) -> SlurmOptions:
        if self.time is not None and not re.match(TIME_PATTERN, self.time):
            raise UserError(f"--time '{self.time}' is no Slurm time: use HH:MM:SS, MM or D-HH:MM:SS")
        if self.gpus_per_job is not None and self.gpus_per_job < 0:
            raise UserError("--gpus-per-job must be 0 or more")
        if self.max_jobs is not None and self.max_jobs < 1:
            raise UserError("--max-jobs must be 1 or more")
        return self


@dataclass(frozen=True)
class JobState:
    """One job as Slurm reports it: state name (squeue %T / sacct State) and the reason Slurm gives."""

    job_id: str
    state: str
    reason: str = ""
    node: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    def describe(self) -> str:
        why = f", reason {self.reason}" if self.reason and self.reason != "None" else ""
        return f"Slurm job {self.job_id} ended {self.state}{why}"


def job_name(campaign: str, cell_id: str, attempt: int) -> str:
    """Unique per attempt: a restart finds by it a job whose id the killed submitter never recorded."""
    return f"tracer:{campaign}:{cell_id}:{attempt}"


def slurm_time(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def time_limit(cell: Cell, opts: SlurmOptions, estimate_s: float | None) -> str | None:
    """--time, else the cell's own --timeout plus a margin, else a multiple of its earlier run; None leaves
    the partition's default."""
    if opts.time:
        return opts.time
    timeout = cell.knobs.get("timeout")
    if isinstance(timeout, (int, float)) and timeout > 0:
        return slurm_time(float(timeout) + TIME_MARGIN_S)
    if estimate_s is not None:
        return slurm_time(TIME_FACTOR * estimate_s + TIME_MARGIN_S)
    return None


def sbatch_settings(cell: Cell, opts: SlurmOptions, name: str, log: Path, time: str | None) -> list[str]:
    """The `#SBATCH` options of a cell's job. `--exclusive`: the whole node, so no other job disturbs the
    measurement (one run per node, as the local runner has one run per machine); a GPU cell asks for its
    GPUs (the plan's `gpus` knob, default 1, or --gpus-per-job)."""
    settings = [f"--job-name={name}", f"--output={log}", "--nodes=1", "--ntasks=1", "--exclusive"]
    if time:
        settings.append(f"--time={time}")
    if opts.partition:
        settings.append(f"--partition={opts.partition}")
    if opts.account:
        settings.append(f"--account={opts.account}")
    if cell.device == "gpu":
        gpus = cell.gpus if opts.gpus_per_job is None else opts.gpus_per_job
        if gpus:
            settings.append(f"--gres=gpu:{gpus}")
    return settings


def job_script(cell: Cell, settings: list[str], stage: Path) -> str:
    """`tracer profile` for the cell into its staging folder, under the submitter's interpreter (on the
    cluster's shared filesystem); `exec` so that Slurm's SIGTERM (scancel, time limit) reaches it and it
    writes an `interrupted` run folder."""
    lines = ["#!/bin/bash", *(f"#SBATCH {s}" for s in settings)]
    if cell.cwd:  # a command plan's cell runs where its plan file is (on the shared filesystem)
        lines.append(f"cd {shlex.quote(cell.cwd)}")
    lines.append(f"exec {shlex.join(profile_command(cell.profile_args(), stage.resolve()))}")
    return "\n".join(lines) + "\n"


class Slurm:
    """The Slurm commands, each failure a `UserError` naming the command and Slurm's own words."""

    def __init__(self) -> None:
        missing = [c for c in ("sbatch", "squeue", "scancel") if shutil.which(c) is None]
        if missing:
            raise UserError(
                f"--slurm needs Slurm's {', '.join(missing)} on PATH: run the campaign on the cluster's login node"
            )
        self.user = getpass.getuser()

    def _run(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            result = subprocess.run(args, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise UserError(f"`{shlex.join(args[:2])}` gave no answer in {COMMAND_TIMEOUT_S:.0f} s") from None
        if check and result.returncode != 0:
            said = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise UserError(f"`{shlex.join(args[:2])} ...` failed: {said[-1] if said else f'exit {result.returncode}'}")
        return result

    def submit(self, script: Path) -> str:
        out = self._run(["sbatch", "--parsable", str(script)]).stdout.strip()
        job_id = out.splitlines()[-1].split(";")[0] if out else ""
        if not job_id.isdigit():
            raise UserError(f"sbatch gave no job id for {script}: {out!r}")
        return job_id

    def find(self, name: str) -> str | None:
        """The job of this user with this name (queued, running, or ended within MinJobAge)."""
        out = self._run(["squeue", "-h", "-t", "all", "-u", self.user, "--name", name, "-o", "%i"]).stdout.split()
        return out[-1] if out else None

    def states(self, job_ids: list[str]) -> dict[str, JobState]:
        """State of every job asked for; a job Slurm no longer knows at all comes back UNKNOWN."""
        if not job_ids:
            return {}
        out = self._run(["squeue", "-h", "-t", "all", "-u", self.user, "-o", "%i|%T|%r|%N"]).stdout
        known = {}
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4 and parts[0] in job_ids:
                known[parts[0]] = JobState(parts[0], parts[1], parts[2], parts[3])
        for job_id in job_ids:
            if job_id not in known:
                known[job_id] = self._accounting(job_id)
        return known

    def _accounting(self, job_id: str) -> JobState:
        """A job squeue has dropped: `sacct` where there is accounting (it says who cancelled)."""
        result = self._run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobIDRaw,State,Reason,NodeList"], False)
        for line in result.stdout.splitlines() if result.returncode == 0 else []:
            parts = line.strip().split("|")
            if len(parts) == 4 and parts[0] == job_id:
                state, _, by = parts[1].partition(" ")
                return JobState(job_id, state, " ".join(p for p in (by, parts[2]) if p and p != "None"), parts[3])
        return JobState(job_id, UNKNOWN, "Slurm no longer knows the job and has no accounting (sacct) to ask")

    def cancel(self, job_ids: list[str]) -> None:
        if job_ids:
            self._run(["scancel", *job_ids])
