"""Every threshold of the diagnosis, declared once with its unit and meaning (docs/guide/diagnosis.md
prints this table). Change a number here and every rule, test and document follows."""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.figures import coverage, learning


@dataclass(frozen=True)
class Threshold:
    name: str
    value: float
    unit: str
    meaning: str


_ALL: dict[str, Threshold] = {}


def _t(name: str, value: float, unit: str, meaning: str) -> float:
    _ALL[name] = Threshold(name, value, unit, meaning)
    return value


# input-bound (TensorBoard's input-pipeline analyser calls 20-50 % "moderately", above 50 % "highly")
INPUT_BOUND_PCT = _t("INPUT_BOUND_PCT", 20.0, "% of step time", "data wait above this: input-bound")
INPUT_BOUND_HIGH_PCT = _t("INPUT_BOUND_HIGH_PCT", 50.0, "% of step time", "data wait above this: severity high")
# straggler (analyzers/figures/straggler.py): the last rank to arrive holds every other rank back by this much
STRAGGLER_LATE_PCT = _t(
    "STRAGGLER_LATE_PCT", 5.0, "% of the mean step", "the straggler's median lateness above this: the verdict fires"
)
STRAGGLER_HIGH_PCT = _t("STRAGGLER_HIGH_PCT", 20.0, "% of the mean step", "lateness above this: severity high")
# every explanation (analyzers/figures/coverage.py): a cause is named only when it covers most of the effect
CAUSE_NAMED_PCT = _t(
    "CAUSE_NAMED_PCT",
    coverage.NAMED_PCT,
    "% of the effect",
    "a part (of a diff's gap, a straggler's lateness) is named the cause from this share on (TraceML: 80 %); "
    "else the cause is 'mixed', with the parts and the unexplained rest",
)
CAUSE_LISTED_PCT = _t(
    "CAUSE_LISTED_PCT",
    coverage.LISTED_PCT,
    "% of the effect",
    "a part of a mixed cause is listed from this share on (XProf's input rule fires at 10 % of the step)",
)
# CPU oversubscription
OVERSUB_INVOLUNTARY_PER_CORE_S = _t(
    "OVERSUB_INVOLUNTARY_PER_CORE_S",
    100.0,
    "switches/s per core",
    "involuntary context switches of the process tree per second and logical core, in the epochs",
)
OVERSUB_THREADS_PER_CORE = _t(
    "OVERSUB_THREADS_PER_CORE", 1.0, "threads/core", "intra-op threads (x loader workers) per logical core above this"
)
OVERSUB_OWN_THREADS_PER_CORE = _t(
    "OVERSUB_OWN_THREADS_PER_CORE",
    2.0,
    "threads/core",
    "intra-op + loader threads per logical core above this oversubscribe the cores whatever else runs",
)
OVERSUB_OTHERS_PCT = _t(
    "OVERSUB_OTHERS_PCT",
    25.0,
    "% of all cores",
    "CPU of other processes in the epochs above this: preemption is the machine's load, not the run's threads",
)
OVERSUB_SWITCHES_ALONE = _t(
    "OVERSUB_SWITCHES_ALONE",
    3.0,
    "x OVERSUB_INVOLUNTARY_PER_CORE_S",
    "on an otherwise idle machine, involuntary switches this many times the limit fire without a thread excess",
)
# under-used CPU
UNDERUSED_CPU_PCT = _t(
    "UNDERUSED_CPU_PCT", 40.0, "% of allowed cores", "busy cores below this share of min(intra-op threads, cores)"
)
UNDERUSED_OTHERS_PCT = _t(
    "UNDERUSED_OTHERS_PCT", 50.0, "% of all cores", "CPU of other processes above this: the cause is the busy machine"
)
# memory growth
MEM_GROWTH_MIB_PER_EPOCH = _t("MEM_GROWTH_MIB_PER_EPOCH", 50.0, "MiB/epoch", "RSS slope over the steady epochs")
MEM_GROWTH_PCT_PER_EPOCH = _t("MEM_GROWTH_PCT_PER_EPOCH", 5.0, "% of RSS/epoch", "and at least this share of RSS")
MEM_GROWTH_HIGH_PCT_PER_EPOCH = _t(
    "MEM_GROWTH_HIGH_PCT_PER_EPOCH", 20.0, "% of RSS/epoch", "RSS growing faster than this: severity high"
)
# start-up heavy
STARTUP_SHARE_PCT = _t(
    "STARTUP_SHARE_PCT", 30.0, "% of run", "start-up (to the first step or epoch) above this share of the run"
)
# learning (declared in analyzers.figures.learning, which compare uses too): a loss this close to ln(classes) is a guess
CHANCE_LOSS_PCT = _t(
    "CHANCE_LOSS_PCT", learning.CHANCE_LOSS_PCT, "% of ln(classes)", "loss after the warm-up within this: at chance"
)
CURVE_GAP_MIN_PCT = _t(
    "CURVE_GAP_MIN_PCT", learning.CURVE_GAP_MIN_PCT, "% of the larger", "compare: curves apart by more than this"
)
FIRST_EPOCH_RATIO = _t("FIRST_EPOCH_RATIO", 2.0, "x steady", "first epoch this many times the median later epoch")
# GPU under-used
GPU_UNDERUSED_PCT = _t("GPU_UNDERUSED_PCT", 50.0, "% utilisation", "NVML utilisation in the steady epochs below this")
GPU_UNDERUSED_HIGH_PCT = _t("GPU_UNDERUSED_HIGH_PCT", 25.0, "% utilisation", "below this: severity high")
# host-bound (no trace needed): the loader keeps up, yet the GPU idles between the host's launches
HOST_BOUND_GPU_PCT = _t(
    "HOST_BOUND_GPU_PCT",
    80.0,
    "% utilisation",
    "NVML utilisation in the steady epochs below this while data wait stays under INPUT_BOUND_PCT",
)
HOST_THREAD_MIN_CORES = _t(
    "HOST_THREAD_MIN_CORES", 0.05, "cores", "host-bound's evidence names the training threads busier than this"
)
# synchronisation-dominated CUDA split
SYNC_SHARE_PCT = _t("SYNC_SHARE_PCT", 30.0, "% of CUDA API time", "Synchronize calls above this share")
# allocator churn
ALLOC_PER_STEP = _t("ALLOC_PER_STEP", 1.0, "calls/step", "cudaMalloc + cudaFree calls per steady step above this")
# launch-bound
LAUNCH_TO_KERNEL_RATIO = _t(
    "LAUNCH_TO_KERNEL_RATIO", 0.5, "launch time / kernel time", "launch API time at least this share of kernel time"
)
SHORT_KERNEL_US = _t("SHORT_KERNEL_US", 20.0, "µs", "and the median kernel shorter than this")
# thread per image
THREADS_PER_100_IMAGES = _t(
    "THREADS_PER_100_IMAGES", 1.0, "threads/100 images", "thread count slope over images processed above this"
)
THREAD_GROWTH_MIN = _t("THREAD_GROWTH_MIN", 8.0, "threads", "and at least this many threads gained")
# low MFU (analyzers.figures.utilisation): model FLOPs per second against the device's declared peak
LOW_MFU_PCT = _t("LOW_MFU_PCT", 20.0, "% of peak", "MFU over the steady steps of a GPU run below this")
LOW_MFU_HIGH_PCT = _t("LOW_MFU_HIGH_PCT", 5.0, "% of peak", "below this: severity high")
# the report's findings and pairwise differences
PAIR_DIFFERENCE_PCT = _t(
    "PAIR_DIFFERENCE_PCT", 10.0, "points", "two runs' headline numbers differ by this much to be called different"
)
DATA_WAIT_GAP_SHARE = _t(
    "DATA_WAIT_GAP_SHARE",
    coverage.NAMED_PCT / 100,
    "of the epoch-time gap",
    "compare: data wait from this share of the gap on explains it (CAUSE_NAMED_PCT); below it, its share is said",
)
RAM_SIMILAR_PCT = _t("RAM_SIMILAR_PCT", 15.0, "%", "peak RSS within this of each other counts as similar")
FULL_CPU_PCT = _t("FULL_CPU_PCT", 90.0, "% of all cores", "mean CPU % at or above this counts as 100 % CPU")


def all_thresholds() -> list[Threshold]:
    return list(_ALL.values())
