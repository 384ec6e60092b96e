"""Issue 24 items 3 and 4: `--workers N` is N decoders at work in parallel in every framework, none held
back by a buffer or an interpreter lock; JAX and TensorFlow take GPU memory on demand unless the user's
environment says otherwise.

One real run per framework with `--workers 2`. What it shows is read from its run folder: the sampled
process tree (two loader processes gaining CPU in the last epoch; TensorFlow decodes with graph ops on
its own threads, so its tf.data graph is read instead: a parallel map, no Python callback) and the knobs
each framework's loader was given (no buffer or queue below the worker count). Nothing is timed: the
throughput ratios are `benchmarks/loader_sweep.py`'s."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from analyzers.summaries.threads import thread_summary
from tests.conftest import require_framework
from tests.tracer.measure.tracing.helpers import require_gpu
from tests.tracer.worker.helpers import require_singa, run_in_framework
from tracer.core.frameworks import FRAMEWORKS as DECLARED
from tracer.core.runfolder import RunFolder
from tracer.core.schema import Event

FRAMEWORKS = tuple(DECLARED)  # every declared framework (tracer.core.frameworks)
NO_DEVICE_PEAK = ("mxnet", "singa")  # no call of theirs reports the peak device memory in use
WORKERS = 2
# 24 images a loader process in the last epoch: enough CPU to be sampled (50 Hz), little to train on.
RUN = ("--workers", str(WORKERS), "--limit", "48", "--batch", "4", "--sample-hz", "50")


def _require(framework: str) -> None:
    require_singa() if framework == "singa" else require_framework(framework)


@pytest.fixture(scope="module")
def runs(make_run: Callable[..., RunFolder]) -> dict[str, RunFolder]:
    """The installed frameworks' runs, three at a time (nothing here is timed)."""

    def one(framework: str) -> RunFolder | None:
        try:
            _require(framework)
        except pytest.skip.Exception:
            return None
        return make_run(framework, *RUN)

    with ThreadPoolExecutor(3) as pool:
        made = dict(zip(FRAMEWORKS, pool.map(one, FRAMEWORKS)))
    return {fw: folder for fw, folder in made.items() if folder is not None}


def _run(runs: dict[str, RunFolder], framework: str) -> RunFolder:
    _require(framework)
    folder = runs[framework]
    assert folder.read_record().outcome.status.value == "ok", folder.read_record().outcome
    return folder


def decoders_and_buffers(framework: str, knobs: dict[str, Any]) -> tuple[int, dict[str, int]]:
    """The parallel decoders each framework's loader was given, and every buffer or queue between them
    and the training loop, in batches (where a framework counts per worker, times the workers)."""
    if framework == "pytorch":
        n = knobs["DataLoader.num_workers"]
        return n, {"DataLoader prefetch_factor x num_workers": knobs["DataLoader.prefetch_factor"] * n}
    if framework == "tensorflow":
        return knobs["tf.data.map.num_parallel_calls"], {"tf.data prefetch": knobs["tf.data.prefetch.buffer_size"]}
    if framework == "mxnet":
        n = knobs["gluon.data.DataLoader.num_workers"]
        return n, {"DataLoader prefetch": knobs["gluon.data.DataLoader.prefetch"]}
    if framework == "paddle":
        n = knobs["paddle.io.DataLoader.num_workers"]
        # paddle.io's outstanding batches and its blocking queue: prefetch_factor x max(workers, places)
        return n, {"DataLoader prefetch_factor x num_workers": knobs["paddle.io.DataLoader.prefetch_factor"] * n}
    if framework == "jax":
        n = knobs["grain.MultiprocessingOptions.num_workers"]
        per_process = knobs["grain.MultiprocessingOptions.per_worker_buffer_size"]
        # grain's own warning: a process's read buffer below its reader threads limits them to the buffer
        threads, buffer = knobs["grain.ReadOptions.num_threads"], knobs["grain.ReadOptions.prefetch_buffer_size"]
        assert buffer == 0 or buffer >= threads, (threads, buffer)
        return n, {"per_worker_buffer_size x num_workers": per_process * n}
    if framework == "singa":
        return knobs["multiprocessing.Pool.processes"], {"batches in flight": knobs["batches in flight"]}
    raise AssertionError(f"no loader declared for {framework}")


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_no_buffer_below_the_worker_count(framework: str, runs: dict[str, RunFolder]) -> None:
    knobs = _run(runs, framework).read_record().knobs
    assert knobs["loader_workers"] == WORKERS
    decoders, buffers = decoders_and_buffers(framework, knobs)
    assert decoders == WORKERS
    assert all(size >= WORKERS for size in buffers.values()), buffers


def loader_processes(folder: RunFolder) -> dict[int, float]:
    """CPU seconds each process of the tree other than the training process used in the last epoch."""
    (start,) = [e for e in folder.events() if e["kind"] == Event.START]
    last = folder.epochs()[-1]
    cpu: dict[int, float] = {}
    for row in thread_summary(folder, last.start_ns, last.end_ns):
        if row.pid != start["pid"]:
            cpu[row.pid] = cpu.get(row.pid, 0.0) + row.cpu_s
    return {pid: s for pid, s in cpu.items() if s > 0}


@pytest.mark.slow
@pytest.mark.parametrize("framework", [fw for fw in FRAMEWORKS if fw != "tensorflow"])
def test_two_loader_processes_decode(framework: str, runs: dict[str, RunFolder]) -> None:
    """Processes, each with its own interpreter lock: two of them at work beside the training process."""
    busy = loader_processes(_run(runs, framework))
    assert len(busy) >= WORKERS, busy


TF_GRAPH_PROBE = """
import json, sys
from tensorflow.core.framework import graph_pb2
from tracer.worker.workload import WorkloadConfig, list_images
from tracer.worker.reporting import Reporter
from tracer.worker.frameworks import tensorflow as worker
cfg = WorkloadConfig(framework="tensorflow", model="alexnet", dataset_dir=sys.argv[1], batch=4, limit=8,
                     image_size=64, workers=int(sys.argv[2]))
trainer = worker.Trainer(cfg, list_images(cfg.dataset_dir, cfg.limit), Reporter("/dev/null"))
graph = graph_pb2.GraphDef.FromString(trainer._pipeline()._as_serialized_graph().numpy())
nodes = {n.name: n for n in graph.node}
def const(name):
    return int(nodes[name.split(":")[0]].attr["value"].tensor.int64_val[0])
ops = [n.op for n in graph.node]
maps = [n for n in graph.node if n.op.startswith("ParallelMapDataset")]
prefetch = [n for n in graph.node if n.op == "PrefetchDataset"]
print(json.dumps({"ops": ops, "parallel_calls": [const(m.input[-1]) for m in maps],
                  "prefetch": [const(p.input[1]) for p in prefetch]}))
"""


@pytest.mark.slow
def test_tensorflow_decodes_with_parallel_graph_ops(runs: dict[str, RunFolder]) -> None:
    """tf.data runs graph ops on its own threads without the interpreter lock: the graph holds a parallel
    map with 2 calls in flight, a prefetch of at least 2 batches, and no Python callback (PyFunc)."""
    from tracer.measure import dataset

    _run(runs, "tensorflow")
    small = str(dataset.ensure_generated("small"))
    graph = json.loads(run_in_framework("tensorflow", TF_GRAPH_PROBE, small, str(WORKERS)).splitlines()[-1])
    assert graph["parallel_calls"] == [WORKERS]
    assert graph["prefetch"] and all(p >= WORKERS for p in graph["prefetch"])
    assert not [op for op in graph["ops"] if "PyFunc" in op]


# --- item 4: GPU memory on demand, overridable by the user's environment --------------------------------

MEMORY_PROBE = """
import json, os, sys
seen = {{}}
class Watch(object):  # records the variable as the framework's first import begins
    def find_spec(self, name, path=None, target=None):
        if name == {import_name!r} and name not in seen:
            seen[name] = os.environ.get({env!r})
sys.meta_path.insert(0, Watch())
from tracer.worker.frameworks import {module} as worker
out = {{"at_import": seen.get({import_name!r}), "value": os.environ.get({env!r}), "from": worker.{from_name}}}
{extra}
print(json.dumps(out))
"""
JAX_EXTRA = (
    "from jaxlib import xla_client\n"
    'out["jax_gpu_preallocate"] = xla_client.generate_pjrt_gpu_plugin_options()["preallocate"]'
)
TF_EXTRA = 'out["memory_growth"] = worker.memory_growth()'
ON_DEMAND = {
    # framework: (environment variable, the tool's default, the framework's module name, probe extras)
    "jax": ("XLA_PYTHON_CLIENT_PREALLOCATE", "false", "jax", "PREALLOCATE_FROM", JAX_EXTRA),
    "tensorflow": ("TF_FORCE_GPU_ALLOW_GROWTH", "true", "tensorflow", "GROWTH_FROM", TF_EXTRA),
}


def memory_probe(framework: str, user_value: str | None, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    env, _, import_name, from_name, extra = ON_DEMAND[framework]
    if user_value is None:
        monkeypatch.delenv(env, raising=False)
    else:
        monkeypatch.setenv(env, user_value)
    code = MEMORY_PROBE.format(import_name=import_name, module=framework, env=env, from_name=from_name, extra=extra)
    return json.loads(run_in_framework(framework, code).splitlines()[-1])


@pytest.mark.parametrize("framework", sorted(ON_DEMAND))
def test_gpu_memory_on_demand_unless_the_environment_says(framework: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker module sets the variable before it imports the framework; a value the user set stays."""
    require_framework(framework)
    env, default, *_ = ON_DEMAND[framework]
    mine = memory_probe(framework, None, monkeypatch)
    assert mine["at_import"] == mine["value"] == default and mine["from"] == "tracer default"
    flipped = {"false": "true", "true": "false"}[default]
    theirs = memory_probe(framework, flipped, monkeypatch)
    assert theirs["at_import"] == theirs["value"] == flipped and theirs["from"] == "environment"
    if framework == "jax":  # what jaxlib hands its GPU client when it starts
        assert mine["jax_gpu_preallocate"] is False and theirs["jax_gpu_preallocate"] is True
    else:
        assert mine["memory_growth"] is True and theirs["memory_growth"] is False


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(ON_DEMAND))
def test_run_declares_its_gpu_memory_setting(framework: str, runs: dict[str, RunFolder]) -> None:
    """run.json says how the run's GPU memory was taken, and where the setting came from."""
    env, default, *_ = ON_DEMAND[framework]
    knobs = _run(runs, framework).read_record().knobs
    assert knobs[env] == default and knobs[env + " from"] == "tracer default"


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("framework", [fw for fw in FRAMEWORKS if fw not in NO_DEVICE_PEAK])
def test_gpu_run_records_the_frameworks_own_peak_each_epoch(framework: str, make_run: Callable[..., RunFolder]) -> None:
    require_gpu()
    folder = make_run(framework, "--device", "gpu", "--batch", "8")
    ends = [e for e in folder.events() if e["kind"] == Event.EPOCH_END]
    assert len(ends) == 2 and all(e["device_peak_mib"] and e["device_peak_mib"] > 0 for e in ends), ends
