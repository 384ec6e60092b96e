"""Issue 18: every framework fed by its own pipeline under one loader budget, each step timed.

Real tiny runs in every installed framework; real images decoded by every framework's native operators."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from analyzers.figures import steps
from tests.conftest import photo_folder, require_framework, run_tracer
from tests.tracer.worker.helpers import assert_steps_add_up, run_in_framework
from tracer.core.frameworks import FRAMEWORKS as DECLARED
from tracer.core.runfolder import RunFolder, list_runs
from tracer.worker.base import default_loader_workers

OWN_TESTS = ("jax", "singa")  # their pipelines and step tables are tested in test_jax.py and frameworks/
FRAMEWORKS = tuple(fw for fw in DECLARED if fw not in OWN_TESTS)
BATCH = 4
LIMIT = 16
EPOCHS = 2


@pytest.fixture(scope="module")
def default_runs(make_run: Callable[..., RunFolder]) -> dict[str, RunFolder]:
    """One tiny run per installed framework with every default (native pipeline, machine's budget)."""
    runs = {}
    for fw in FRAMEWORKS:
        try:
            runs[fw] = make_run(fw, "--batch", str(BATCH))
        except pytest.skip.Exception:
            continue
    return runs


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_default_run_is_native_with_the_shared_budget(framework: str, default_runs: dict[str, RunFolder]) -> None:
    require_framework(framework)
    folder = default_runs[framework]
    record = folder.read_record()
    assert record.outcome.status.value == "ok"
    knobs = record.knobs
    assert knobs["pipeline"] == "native"
    assert knobs["loader_workers"] == default_loader_workers()
    assert knobs["prefetch"] == (2 if default_loader_workers() > 0 else 0)
    assert knobs["sync_every"] == 1  # CPU
    assert knobs["decoder"] and knobs["resize"]
    others = {fw: f.read_record().knobs["loader_workers"] for fw, f in default_runs.items()}
    assert len(set(others.values())) == 1, others


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_step_row_per_step_adding_up_to_the_epoch(framework: str, default_runs: dict[str, RunFolder]) -> None:
    require_framework(framework)
    assert_steps_add_up(default_runs[framework], EPOCHS, LIMIT, BATCH)  # JAX and SINGA: in their own tests


TF_GRAPH_PROBE = """
import json, sys
from tracer.worker.workload import WorkloadConfig, list_images
from tracer.worker.reporting import Reporter
from tracer.worker.frameworks import tensorflow as worker
out = {}
for pipeline in ("native", "shared"):
    cfg = WorkloadConfig(framework="tensorflow", model="alexnet", dataset_dir=sys.argv[1], batch=4, limit=8,
                         image_size=64, pipeline=pipeline)
    trainer = worker.Trainer(cfg, list_images(cfg.dataset_dir, cfg.limit), Reporter("/dev/null"))
    graph = trainer._pipeline()._as_serialized_graph().numpy()
    out[pipeline] = b"PyFunc" in graph
print(json.dumps(out))
"""


def test_tensorflow_default_pipeline_has_no_python_callback(tmp_path: Path) -> None:
    """The default tf.data graph holds no PyFunc (numpy_function) node; --pipeline shared still does."""
    require_framework("tensorflow")
    from tracer.measure import dataset

    data = dataset.ensure_generated("small")
    out = run_in_framework("tensorflow", TF_GRAPH_PROBE, str(data))
    assert json.loads(out.strip().splitlines()[-1]) == {"native": False, "shared": True}


def test_autotune_is_tensorflow_only(tmp_path: Path) -> None:
    base = ["profile", "--framework", "pytorch", "--model", "alexnet", "--dataset", "small", "--out", str(tmp_path)]
    result = run_tracer(*base, "--workers", "autotune")
    assert result.returncode == 2
    assert "autotune" in result.stderr and "Traceback" not in result.stderr
    result = run_tracer(*base, "--workers", "many")
    assert result.returncode == 2
    assert list_runs(tmp_path) == []


def test_shared_pipeline_is_recorded(make_run: Callable[..., RunFolder]) -> None:
    folder = make_run("pytorch", "--batch", str(BATCH), "--pipeline", "shared", "--workers", "0")
    knobs = folder.read_record().knobs
    assert (knobs["pipeline"], knobs["loader_workers"], knobs["prefetch"]) == ("shared", 0, 0)
    assert knobs["decoder"].startswith("PIL")


def test_data_wait_share_sees_a_starved_model(tmp_path: Path) -> None:
    """Large photos and a small model: with 0 loader workers most of a step is waiting for data;
    with loader workers decoding ahead, less of it is. One intra-op thread: on a shared 2-core machine
    torch's default two threads spin against the other loads (5 s a step instead of 0.2 s)."""
    require_framework("pytorch")
    photos = photo_folder(tmp_path / "photos", 24, 3000, 2000)
    shares = {}
    with_workers = max(2, default_loader_workers())
    for workers in (0, with_workers):
        out = tmp_path / f"runs{workers}"
        args = ["--model", "mobilenet_v2", "--dataset", str(photos), "--image-size", "32", "--batch", "8"]
        args += ["--epochs", "2", "--threads", "1", "--workers", str(workers), "--out", str(out)]
        result = run_tracer("profile", "--framework", "pytorch", *args)
        assert result.returncode == 0, result.stderr[-3000:]
        (folder,) = list_runs(out)
        shares[workers] = steps.run_data_wait_share(folder)
    alone, helped = shares[0], shares[with_workers]
    assert alone is not None and alone > 0.5, shares
    assert helped is not None and helped < alone, shares
