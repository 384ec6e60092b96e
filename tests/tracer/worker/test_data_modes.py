"""Issue 26: `--data memory` and `--data synthetic` in all six frameworks.

Real tiny runs through `tracer profile` (two at a time: nothing here is timed), and one probe per
framework in its own interpreter that builds the real trainers and compares the first batch of
`memory` with the first batch of `files` (flips off) and measures the resident memory the set adds."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from analyzers.figures import steps
from analyzers.figures.run_summary import summarise
from tests.conftest import require_framework, run_tracer
from tests.tracer.worker.helpers import assert_steps_add_up, require_singa, run_in_framework
from tracer.core.frameworks import FRAMEWORKS
from tracer.core.runfolder import RunFolder, list_runs
from tracer.core.schema import DATA_MEMORY, DATA_SYNTHETIC, Event
from tracer.measure import dataset

MODES = (DATA_MEMORY, DATA_SYNTHETIC)
LIMIT, BATCH = 8, 4
# SINGA refuses MobileNetV2 on a CPU, and AlexNet's pooling needs 64 px; the others train MobileNetV2 at 32 px.
SETTINGS = {fw: ("mobilenet_v2", 32) for fw in FRAMEWORKS}
SETTINGS["singa"] = ("alexnet", 64)
SYNTHETIC_WAIT_SHARE = 0.05
RSS_BOUND = 1.3


def _require(framework: str) -> None:
    require_singa() if framework == "singa" else require_framework(framework)


def _installed() -> list[str]:
    found = []
    for fw in FRAMEWORKS:
        try:
            _require(fw)
        except pytest.skip.Exception:
            continue
        found.append(fw)
    return found


@pytest.fixture(scope="module")
def mode_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], RunFolder]:
    """One tiny run per installed framework and data mode (memory, synthetic), two at a time."""

    def run(framework: str, mode: str) -> RunFolder:
        model, size = SETTINGS[framework]
        out = tmp_path_factory.mktemp(f"{framework}-{mode}")
        args = ["--model", model, "--image-size", str(size), "--limit", str(LIMIT), "--batch", str(BATCH)]
        args += ["--epochs", "1", "--dataset", "small", "--data", mode, "--out", str(out)]
        if framework != "singa":  # SINGA has no thread setting
            args += ["--threads", "1"]
        result = run_tracer("profile", "--framework", framework, *args)
        assert result.returncode == 0, result.stderr[-3000:]
        (folder,) = list_runs(out)
        return folder

    jobs = [(fw, mode) for fw in _installed() for mode in MODES]
    with ThreadPoolExecutor(2) as pool:
        futures = {job: pool.submit(run, *job) for job in jobs}
        return {job: future.result() for job, future in futures.items()}


def _folder(runs: dict[tuple[str, str], RunFolder], framework: str, mode: str) -> RunFolder:
    _require(framework)
    return runs[(framework, mode)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tiny_run_ends_ok_with_its_steps_timed(
    framework: str, mode: str, mode_runs: dict[tuple[str, str], RunFolder]
) -> None:
    folder = _folder(mode_runs, framework, mode)
    record = folder.read_record()
    assert record.outcome.status.value == "ok", record.outcome
    assert record.spec.data == mode and record.knobs["data"] == mode
    assert record.knobs["loader_workers"] == 0 and record.knobs["prefetch"] == 0
    (epoch,) = folder.epochs()
    assert epoch.images == LIMIT and np.isfinite(epoch.loss)
    assert_steps_add_up(folder, epochs=1, images=LIMIT, batch=BATCH)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_synthetic_waits_for_no_data(framework: str, mode_runs: dict[tuple[str, str], RunFolder]) -> None:
    folder = _folder(mode_runs, framework, DATA_SYNTHETIC)
    share = steps.run_data_wait_share(folder)
    assert share is not None and share < SYNTHETIC_WAIT_SHARE, share
    knobs = folder.read_record().knobs
    assert knobs["decoder"] == "none" and knobs["synthetic_input"]
    assert not [e for e in folder.events() if e["kind"] == Event.DECODE]


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_memory_decodes_once_before_the_first_epoch(
    framework: str, mode_runs: dict[tuple[str, str], RunFolder]
) -> None:
    folder = _folder(mode_runs, framework, DATA_MEMORY)
    _, size = SETTINGS[framework]
    events = folder.events()
    phases = [e["name"] for e in events if e["kind"] == Event.PHASE]
    assert phases[-1] == "decode", phases
    start, end = [e for e in events if e["kind"] == Event.DECODE]
    assert (start["state"], end["state"]) == ("start", "end")
    (epoch,) = folder.epochs()
    assert int(start["t_ns"]) < int(end["t_ns"]) <= epoch.start_ns  # never inside an epoch
    assert end["images"] == LIMIT and end["shape"] == [LIMIT, size, size, 3]
    assert end["bytes"] == LIMIT * size * size * 3 + LIMIT * 8  # uint8 pixels, int64 labels
    assert 0 < end["seconds"] <= (int(end["t_ns"]) - int(start["t_ns"])) / 1e9
    assert summarise(folder).decode_s == pytest.approx(end["seconds"])
    assert folder.read_record().knobs["memory_loader"]


# --- the probe: first batches and resident memory, inside the framework's interpreter
FILES_BATCHES = {
    "pytorch": "t.loader",
    "tensorflow": "t.dataset",
    "mxnet": "t.loader",
    "paddle": "t.loader",
    "jax": "t._epoch_batches(1)",
    "singa": "t._batches(1)",
}
TO_NUMPY = {
    "pytorch": "v.cpu().numpy()",
    "tensorflow": "v.numpy()",
    "mxnet": "v.asnumpy()",
    "paddle": "v.numpy()",
    "jax": "np.asarray(v)",
    "singa": "np.asarray(v)",
}
CHANNELS_LAST = ("tensorflow", "jax")
# The files pipelines' random flips switched off for the probe (memory's: Trainer.flip_memory = False).
FLIPS_OFF = {
    "pytorch": "worker.native_transform = functools.partial(worker.native_transform, flip=False)",
    "mxnet": "worker.native_transform = functools.partial(worker.native_transform, flip=False)",
    "paddle": "worker.native_transform = functools.partial(worker.native_transform, flip=False)",
    "tensorflow": "worker.tf.image.random_flip_left_right = lambda image, seed=None: image",
    "jax": "_load = worker.load_pixels\nworker.load_pixels = lambda p, s, flip: _load(p, s, False)",
    # SINGA's loader decodes with workload.load_batch, which calls the module's load_pixels (0 workers: here)
    "singa": "from tracer.worker import workload\n_load = workload.load_pixels\n"
    "workload.load_pixels = lambda p, s, flip: _load(p, s, False)",
}
# How far memory's first batch may be from files' in 8-bit levels: float rounding, except TensorFlow,
# whose resize gives floats that memory keeps as uint8 (rounded: half a level at most).
LEVELS = {fw: 1e-3 for fw in FRAMEWORKS}
LEVELS["tensorflow"] = 0.5 + 1e-3
RSS_SIZE = 224  # the whole small set (791 images): 114 MiB decoded

PROBE = """
import functools, gc, json, sys
import numpy as np
from tracer.worker.memory_data import set_bytes
from tracer.worker.reporting import Reporter
from tracer.worker.workload import STD, WorkloadConfig, list_images
from tracer.worker.frameworks import {module} as worker
{flips_off}

def trainer(data, limit, size, prepare=True):
    cfg = WorkloadConfig(framework="{framework}", model="{model}", dataset_dir=sys.argv[1], data=data, limit=limit,
                         image_size=size, batch={batch}, workers={workers}, seed=0)
    t = worker.Trainer(cfg, list_images(cfg.dataset_dir, cfg.limit), Reporter("/dev/null"))
    t.build()
    t.flip_memory = False
    if prepare:
        t.prepare_data()
    return t

def pixels(batch):
    x, y = batch[0], batch[1]
    v = x
    x = np.asarray({to_numpy}, dtype=np.float32)
    v = y
    y = np.asarray({to_numpy}).reshape(-1)
    if {channels_last}:
        x = x.transpose(0, 3, 1, 2)
    return x, y

t = trainer("files", {limit}, {size})
fx, fy = pixels(next(iter({files_batches})))
t = trainer("memory", {limit}, {size})
mx, my = pixels(t.memory_to_device(next(iter(t.memory_batches(1)))))
levels = float(np.abs((fx - mx) * np.asarray(STD, np.float32)[:, None, None] * 255).max())

def kib(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))

big = trainer("memory", None, {rss_size}, prepare=False)
gc.collect()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak resident size (VmHWM) to the current one
before = kib("VmRSS")
big.prepare_data()
for batch in big.memory_batches(1):
    pass
growth = (kib("VmHWM") - before) * 1024
print(json.dumps({{"shape": list(fx.shape), "memory_shape": list(mx.shape), "levels": levels,
                  "labels": [fy.tolist(), my.tolist()], "growth": growth,
                  "set": set_bytes(len(big.images), {rss_size})}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_memory_agrees_with_files_and_holds_the_set_once(framework: str) -> None:
    """Same decoder, same seed, flips off: memory's first batch is files' first batch, pixel for pixel
    (labels too). Decoding the small set (791 images) at 224 px and one epoch of batching them grow the peak resident
    memory by the set's size, and by no more than 1.3 times it (no second copy of the set). The step's
    float batch, which every data mode has, is not counted."""
    _require(framework)
    model, size = SETTINGS[framework]
    data = dataset.ensure_generated("small")
    code = PROBE.format(
        module=framework,
        framework=framework,
        model=model,
        flips_off=FLIPS_OFF[framework],
        batch=BATCH,
        limit=LIMIT,
        size=size,
        to_numpy=TO_NUMPY[framework],
        channels_last=framework in CHANNELS_LAST,
        files_batches=FILES_BATCHES[framework],
        workers=0,  # decoded in the probe's process, where the flips are switched off
        rss_size=RSS_SIZE,
    )
    out = json.loads(run_in_framework(framework, code, str(data)).strip().splitlines()[-1])
    print(framework, out["levels"], "levels;", out["growth"] / 2**20, "MiB for a set of", out["set"] / 2**20, "MiB")
    assert out["shape"] == out["memory_shape"] == [BATCH, 3, size, size]
    assert out["labels"][0] == out["labels"][1]
    assert out["levels"] <= LEVELS[framework], out["levels"]
    assert 0.95 * out["set"] <= out["growth"] <= RSS_BOUND * out["set"], out


def test_memory_that_does_not_fit_is_refused_in_one_line(tmp_path: Path) -> None:
    """A set larger than the RAM free is refused before any run folder is made, saying what it needs."""
    import psutil

    folder = tmp_path / "photos"
    one = next(p for p in sorted(dataset.ensure_generated("small").rglob("*.jpg")))
    size = 2048
    needed = psutil.virtual_memory().total // (size * size * 3) + 1  # more images than all of RAM holds
    for i in range(needed):
        cls = folder / ("a" if i % 2 else "b")
        cls.mkdir(parents=True, exist_ok=True)
        (cls / f"{i}.jpg").symlink_to(one)
    out = tmp_path / "runs"
    args = ["--framework", "pytorch", "--model", "alexnet", "--dataset", str(folder), "--image-size", str(size)]
    for data in (DATA_MEMORY, "all"):
        result = run_tracer("profile", *args, "--data", data, "--out", str(out))
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert "--data memory needs" in result.stderr and "GiB" in result.stderr and "free" in result.stderr
        assert list_runs(out) == []
