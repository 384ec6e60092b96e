"""The ranks of a `--nproc N` run: N worker processes in one process group (so ending the run, the
lifeguard and Ctrl-C reach every rank at once), each with the environment torchrun would give it, each
writing into its own folder (rank 0: the run folder; rank r: `ranks/r/`), merged into the run's tables
with their RANK column when the run ends.

A rank that ends badly while the others train (they would wait in their next collective until its
timeout) ends the run: the runner stops the group and the run is `failed`, naming the rank.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence

from tracer.core import schema
from tracer.core.records import RankInfo, RunSpec
from tracer.core.runfolder import RunFolder

MERGED = (schema.STEPS_TABLE, schema.COLLECTIVES_TABLE)
"""The sample tables every rank writes and the run holds once, each row with its rank."""


def free_port() -> int:
    """A TCP port free on this machine now, for the ranks' rendezvous (MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_folder(folder: RunFolder, rank: int) -> RunFolder:
    """Rank `rank`'s own folder: the run folder for rank 0, else `ranks/<rank>/` with the run's worker
    configuration (made on first use)."""
    if rank == 0:
        return folder
    path = folder.path / schema.RANKS_DIR / str(rank)
    if not path.exists():
        (path / "raw").mkdir(parents=True)
        (path / schema.SAMPLES_DIR).mkdir()
        shutil.copyfile(folder.worker_config_path, path / schema.WORKER_CONFIG_FILE)
    return RunFolder(path)


def rank_environment(rank: int, world: int, port: int) -> dict[str, str]:
    return {
        schema.RANK_ENV: str(rank),
        schema.LOCAL_RANK_ENV: str(rank),
        schema.WORLD_SIZE_ENV: str(world),
        schema.MASTER_ADDR_ENV: "127.0.0.1",
        schema.MASTER_PORT_ENV: str(port),
    }


def start(
    folder: RunFolder,
    world: int,
    command: Callable[[RunFolder], list[str]],
    env: Mapping[str, str],
) -> list[subprocess.Popen[bytes]]:
    """Every rank started, rank 0 leading a new process group (not the terminal's: a Ctrl-C there reaches
    the tracer only, which ends the run) and the others joining it (a group cannot span sessions)."""
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(world):
            where = rank_folder(folder, rank)
            with where.worker_log.open("wb") as log:
                procs.append(
                    subprocess.Popen(
                        command(where),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env={**env, **rank_environment(rank, world, port)},
                        process_group=procs[0].pid if procs else 0,
                    )
                )
    except BaseException:
        for p in procs:
            p.kill()
            p.wait()
        raise
    return procs


def first_failed(procs: Sequence[subprocess.Popen[bytes]]) -> int | None:
    """The first rank that has ended with a non-zero code, or None."""
    for rank, p in enumerate(procs):
        code = p.poll()
        if code is not None and code != 0:
            return rank
    return None


def running(procs: Sequence[subprocess.Popen[bytes]]) -> bool:
    return any(p.poll() is None for p in procs)


def merge(folder: RunFolder, world: int) -> None:
    """Every rank's steps and collectives appended to the run's (rows only; each already names its rank),
    and each rank folder's own samples (its process tree) finalised where they are."""
    for rank in range(1, world):
        where = rank_folder(folder, rank)
        for name in MERGED:
            source = where.sample_stream_path(name)
            if not source.exists():
                continue
            lines = source.read_bytes().splitlines(keepends=True)
            body = b"".join(line for line in lines[1:] if line.endswith(b"\n"))
            target = folder.sample_stream_path(name)
            if not target.exists():
                target.write_bytes(lines[0] if lines else b"")
            with target.open("ab") as f:
                f.write(body)
            source.unlink()
        where.finalise_samples()
        _append_threads(folder, where)


def _append_threads(folder: RunFolder, where: RunFolder) -> None:
    """Rank `where`'s threads (its own process tree, sampled apart) added to the run's threads table, so the
    thread timeline holds every rank's threads (each under its rank's pid); its process samples stay apart."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = schema.THREADS_TABLE.name
    mine, theirs = folder.sample_parquet_path(name), where.sample_parquet_path(name)
    if not mine.exists() or not theirs.exists():
        return
    table = pa.concat_tables([pq.read_table(mine), pq.read_table(theirs)])
    tmp = mine.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    tmp.replace(mine)


def rank_infos(spec: RunSpec, pids: Sequence[int | None], host: str) -> tuple[RankInfo, ...]:
    backend = "nccl" if spec.device == "gpu" else "gloo"
    world = len(pids)
    return tuple(
        RankInfo(
            rank=r,
            local_rank=r,
            world_size=world,
            host=host,
            device="cpu" if spec.device == "cpu" else f"cuda:{r}",
            backend=backend,
            pid=pid,
        )
        for r, pid in enumerate(pids)
    )


def read_pid(folder: RunFolder) -> int | None:
    try:
        return int(folder.worker_pid_path.read_text().strip())
    except (OSError, ValueError):
        return None


def folders(folder: RunFolder, world: int) -> list[RunFolder]:
    return [rank_folder(folder, r) for r in range(world)]
