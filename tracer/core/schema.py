"""Every table and stream a run folder holds, declared once: file names, sample-table columns (units
in the names), event kinds, CUPTI raw records. Writers and readers import these names; a test fails
when one of them appears as a bare string literal anywhere else, and the docs' run-folder reference
page is generated from this module.

The names the worker writes live in `tracer.worker.schema` (Python 3.6, standard library only, because
it runs in the framework's interpreter); this module re-exports them so nothing else imports the worker.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    import pyarrow as pa

from tracer.worker.schema import (
    ARRIVE_NS,
    AUTOTUNE,
    BACKWARD_S,
    CLASSES,
    COLLECTIVE,
    COLLECTIVE_COLUMNS,
    COLLECTIVES_TABLE,
    COMPUTE_S,
    CUPTI_ALL_CALLS_ENV,
    CUPTI_BUFFER_FILE,
    CUPTI_BUFFER_GLOB,
    CUPTI_CLOCK_FILE,
    CUPTI_COLUMNS,
    CUPTI_INDEX_FILE,
    CUPTI_KERNEL_NAMES_FILE,
    CUPTI_LAYOUT,
    CUPTI_LIBRARY_ENV,
    CUPTI_META_FILE,
    CUPTI_RAW_FORMAT,
    CUPTI_STOP_FILE,
    DATA_FILES,
    DATA_MEMORY,
    DATA_MODES,
    DATA_SYNTHETIC,
    DATA_WAIT_S,
    DONE_NS,
    EVENTS_FILE,
    EXIT_DIVERGED,
    FAULT_KINDS,
    FLOPS_COUNTER,
    FLOPS_NOT_COUNTED,
    FLOPS_PER_STEP,
    FORWARD_S,
    KIND,
    LIFELINE_THREAD,
    LOCAL_RANK_ENV,
    MASTER_ADDR_ENV,
    MASTER_PORT_ENV,
    MEMCPY_NAMES,
    MODEL_FACTS,
    NATIVE_TRACE,
    NATIVE_TRACE_FILES,
    NONFINITE,
    NSYS_WINDOW_TRACE,
    NVTX_WINDOW_RANGE,
    ON_DIVERGENCE,
    OPTIMIZER_S,
    PARTIAL,
    PIPELINES,
    PROBE,
    PROBE_MARKER,
    PROBE_MARKER_OLD,
    PROBE_MODULE,
    PROBE_RUN_DIR_ENV,
    PROBE_SOURCE_DIR,
    PROBE_STEPS_SEPARATOR,
    PROBE_WORKER,
    PROBED_IMPORTS,
    RANK,
    RANK_ENV,
    RANKS_DIR,
    SAMPLES_DIR,
    STEP_COLUMNS,
    STEP_PART_COLUMNS,
    STEP_PARTS_TABLE,
    STEPS_TABLE,
    SYNC_S,
    T_NS,
    TORCH_RANK_TRACE,
    TORCH_TRACE,
    TRACE_CUPTI,
    TRACE_ENV,
    TRACE_TORCH,
    TRACE_WINDOW_ENV,
    TRACER_PID_ENV,
    WINDOW_CLOSE,
    WINDOW_EDGE,
    WINDOW_OPEN,
    WORKER_CONFIG_FILE,
    WORKER_PID_FILE,
    WORLD_SIZE_ENV,
    Event,
    Probe,
    probe_kept_out,
    strict_json,
)

__all__ = [
    "CLASSES",
    "MODEL_FACTS",
    "PARTIAL",
    "PROBE_MARKER",
    "PROBE_MARKER_OLD",
    "BACKWARD_S",
    "FORWARD_S",
    "OPTIMIZER_S",
    "STEP_PART_COLUMNS",
    "STEP_PARTS_TABLE",
    "LIFELINE_THREAD",
    "LOCAL_RANK_ENV",
    "MASTER_ADDR_ENV",
    "MASTER_PORT_ENV",
    "RANK_ENV",
    "WORLD_SIZE_ENV",
    "ARRIVE_NS",
    "COLLECTIVE",
    "COLLECTIVE_COLUMNS",
    "COLLECTIVES_TABLE",
    "DONE_NS",
    "RANKS_DIR",
    "COMPUTE_S",
    "FAULT_KINDS",
    "DATA_WAIT_S",
    "STEP_COLUMNS",
    "STEPS_TABLE",
    "SYNC_S",
    "CUPTI_BUFFER_FILE",
    "CUPTI_BUFFER_GLOB",
    "CUPTI_CLOCK_FILE",
    "PROBE",
    "PROBE_WORKER",
    "RANK",
    "CUPTI_COLUMNS",
    "CUPTI_INDEX_FILE",
    "CUPTI_KERNEL_NAMES_FILE",
    "CUPTI_LAYOUT",
    "CUPTI_LIBRARY_ENV",
    "CUPTI_META_FILE",
    "CUPTI_RAW_FORMAT",
    "CUPTI_STOP_FILE",
    "DATA_FILES",
    "DATA_MEMORY",
    "DATA_MODES",
    "DATA_SYNTHETIC",
    "EVENTS_FILE",
    "EXIT_DIVERGED",
    "SAMPLES_DIR",
    "KIND",
    "MEMCPY_NAMES",
    "NONFINITE",
    "NATIVE_TRACE",
    "NATIVE_TRACE_FILES",
    "NSYS_WINDOW_TRACE",
    "AUTOTUNE",
    "PIPELINES",
    "CUPTI_ALL_CALLS_ENV",
    "TRACE_CUPTI",
    "TRACE_ENV",
    "TORCH_RANK_TRACE",
    "TORCH_TRACE",
    "TRACE_TORCH",
    "TRACE_WINDOW_ENV",
    "TRACER_PID_ENV",
    "NVTX_WINDOW_RANGE",
    "ON_DIVERGENCE",
    "PROBE_MODULE",
    "PROBE_RUN_DIR_ENV",
    "PROBE_SOURCE_DIR",
    "PROBE_STEPS_SEPARATOR",
    "PROBED_IMPORTS",
    "probe_kept_out",
    "Probe",
    "strict_json",
    "T_NS",
    "WORKER_CONFIG_FILE",
    "WORKER_PID_FILE",
    "WINDOW_CLOSE",
    "WINDOW_EDGE",
    "FLOPS_COUNTER",
    "FLOPS_NOT_COUNTED",
    "FLOPS_PER_STEP",
    "WINDOW_OPEN",
    "Event",
]

RUN_JSON = "run.json"
WORKER_LOG = "raw/worker.log"

# --- sample-table columns (one constant per name; t_ns is the Unix-epoch time of the sample)
CPU_PCT = "cpu_pct"  # CPU of the process tree, 100 = every core busy (the study's scale)
CPU_CORES = "cpu_cores"  # the same in cores, 1.0 = one core busy
RSS_MIB = "rss_mib"  # summed over the tree: a page forked loader workers share counts in each of them
RSS_PCT_RAM = "rss_pct_ram"
# The tree's proportional set size (Linux /proc/PID/smaps_rollup): a shared page counts once, split among
# the processes that map it; null where the kernel does not say (not Linux, older than 4.14, not readable).
PSS_MIB = "pss_mib"
THREADS = "threads"
PROCESSES = "processes"
SYS_CPU_PCT = "sys_cpu_pct"  # the whole machine, every process
SYS_RAM_USED_PCT = "sys_ram_used_pct"
SYS_RAM_USED_MIB = "sys_ram_used_mib"
# Context switches of the whole tree, cumulative over the processes alive at the sample (psutil's
# num_ctx_switches); the diagnosis reads the involuntary rate as a sign of too many runnable threads.
CTX_VOLUNTARY = "ctx_switches_voluntary"
CTX_INVOLUNTARY = "ctx_switches_involuntary"
PID = "pid"
TID = "tid"
THREAD_NAME = "name"
USER_S = "user_s"
SYSTEM_S = "system_s"
CORE = "core"
SYS_CORE_PCT = "sys_core_pct"
GPU = "gpu"
UTIL_PCT = "util_pct"
MEM_UTIL_PCT = "mem_util_pct"
MEM_USED_MIB = "mem_used_mib"
MEM_TOTAL_MIB = "mem_total_mib"
POWER_W = "power_w"
ENERGY_MJ = "energy_mj"
TEMP_C = "temp_c"
PROC_MEM_MIB = "proc_mem_mib"


INT64, FLOAT64, STRING = "int64", "float64", "string"
"""The sample tables' column types, by pyarrow's names for them: a table's Arrow schema is made when first
asked for, so that a command that reads no table imports these names without pyarrow."""


@dataclass(frozen=True)
class SampleTable:
    """One sample table: `samples/<name>.csv` while the run goes, `samples/<name>.parquet` after."""

    name: str
    fields: tuple[tuple[str, str], ...]  # (column, type: INT64, FLOAT64 or STRING)
    description: str
    # What a column that an older writer did not have reads as (else nulls): old steps tables are rank 0.
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)

    @functools.cached_property
    def schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([(name, getattr(pa, kind)()) for name, kind in self.fields])


PROCESS = SampleTable(
    "process",
    (
        (T_NS, INT64),
        (CPU_PCT, FLOAT64),
        (CPU_CORES, FLOAT64),
        (RSS_MIB, FLOAT64),
        (RSS_PCT_RAM, FLOAT64),
        (THREADS, INT64),
        (PROCESSES, INT64),
        (SYS_CPU_PCT, FLOAT64),
        (SYS_RAM_USED_PCT, FLOAT64),
        (SYS_RAM_USED_MIB, FLOAT64),
        (CTX_VOLUNTARY, INT64),
        (CTX_INVOLUNTARY, INT64),
        (PSS_MIB, FLOAT64),
    ),
    "the training's process tree (worker and loader processes) and the whole machine, one row per sample",
)
THREADS_TABLE = SampleTable(
    "threads",
    (
        (T_NS, INT64),
        (PID, INT64),
        (TID, INT64),
        (THREAD_NAME, STRING),
        (USER_S, FLOAT64),
        (SYSTEM_S, FLOAT64),
    ),
    "cumulative CPU seconds of every thread of the tree, one row per thread per sample",
)
CORES = SampleTable(
    "cores",
    (
        (T_NS, INT64),
        (CORE, INT64),
        (SYS_CORE_PCT, FLOAT64),
    ),
    "busy % of each logical core of the machine, one row per core per sample",
)
GPUS = SampleTable(
    "gpu",
    (
        (T_NS, INT64),
        (GPU, INT64),
        (UTIL_PCT, FLOAT64),
        (MEM_UTIL_PCT, FLOAT64),
        (MEM_USED_MIB, FLOAT64),
        (MEM_TOTAL_MIB, FLOAT64),
        (POWER_W, FLOAT64),
        (ENERGY_MJ, FLOAT64),
        (TEMP_C, FLOAT64),
        (PROC_MEM_MIB, FLOAT64),
    ),
    "NVML readings of each GPU (only where NVML finds one), one row per GPU per sample",
)

# --- energy and Jetson boards (tracer/measure/rapl.py, tracer/measure/tegrastats.py write them;
# analyzers/figures/energy.py reads)
ZONE = "zone"
DOMAIN = "domain"
ENERGY_UJ = "energy_uj"  # RAPL's raw counter; it wraps at max_energy_range_uj
MAX_ENERGY_RANGE_UJ = "max_energy_range_uj"
RAM_USED_MIB = "ram_used_mib"
RAM_TOTAL_MIB = "ram_total_mib"
SWAP_USED_MIB = "swap_used_mib"
SWAP_TOTAL_MIB = "swap_total_mib"
EMC_PCT = "emc_pct"
EMC_MHZ = "emc_mhz"
GPU_PCT = "gpu_pct"  # GR3D_FREQ load: a Jetson's GPU utilisation
GPU_MHZ = "gpu_mhz"
ONLINE = "online"
LOAD_PCT = "load_pct"
MHZ = "mhz"
SENSOR = "sensor"
RAIL = "rail"
INSTANT_MW = "instant_mw"
AVERAGE_MW = "average_mw"
BOARD_INPUT = "board_input"  # 1 on the rail that feeds the whole board (or the row summing AGX Xavier's)

RAPL = SampleTable(
    "rapl",
    (
        (T_NS, INT64),
        (ZONE, STRING),
        (DOMAIN, STRING),
        (ENERGY_UJ, INT64),
        (MAX_ENERGY_RANGE_UJ, INT64),
    ),  # fmt: skip
    "RAPL energy counters of each package and DRAM zone (Intel and AMD, where /sys/class/powercap is readable)",
)
TEGRA = SampleTable(
    "tegra",
    (
        (T_NS, INT64),
        (RAM_USED_MIB, FLOAT64),
        (RAM_TOTAL_MIB, FLOAT64),
        (SWAP_USED_MIB, FLOAT64),
        (SWAP_TOTAL_MIB, FLOAT64),
        (EMC_PCT, FLOAT64),
        (EMC_MHZ, FLOAT64),
        (GPU_PCT, FLOAT64),
        (GPU_MHZ, FLOAT64),
    ),  # fmt: skip
    "a Jetson board's tegrastats line: RAM, swap, memory controller and GPU load",
)
TEGRA_CORES = SampleTable(
    "tegra_cores",
    (
        (T_NS, INT64),
        (CORE, INT64),
        (ONLINE, INT64),
        (LOAD_PCT, FLOAT64),
        (MHZ, FLOAT64),
    ),
    "a Jetson board's CPU cores as tegrastats reports them (an `off` core is online 0)",
)
TEMPS = SampleTable(
    "temps",
    (
        (T_NS, INT64),
        (SENSOR, STRING),
        (TEMP_C, FLOAT64),
    ),
    "a Jetson board's temperature sensors",
)
RAILS = SampleTable(
    "rails",
    (
        (T_NS, INT64),
        (RAIL, STRING),
        (INSTANT_MW, FLOAT64),
        (AVERAGE_MW, FLOAT64),
        (BOARD_INPUT, INT64),
    ),  # fmt: skip
    "a Jetson board's power rails, instant and average, with the board's input marked",
)
RAPL_TABLE, TEGRA_TABLE, TEGRA_CORES_TABLE, TEMPS_TABLE, RAILS_TABLE = (
    t.name for t in (RAPL, TEGRA, TEGRA_CORES, TEMPS, RAILS)
)

STEPS = SampleTable(
    STEPS_TABLE,
    tuple(zip(STEP_COLUMNS, (INT64, INT64, INT64, INT64, FLOAT64, FLOAT64, FLOAT64, INT64, STRING), strict=True)),
    "one row per training step, written by the worker: epoch (from 1), step (from 0 in the epoch), images, "
    "start_ns (when the step began waiting for its batch), then seconds waiting for data, computing, and "
    "in the host-device sync that reads the loss (null where the probe could not see it: optimizer-counted steps),"
    " the process's rank, and who saw the step (worker: the built-in workload; torch.DataLoader, keras.fit, marker"
    " ...: the probe in a user's command; kineto.ProfilerStep: an imported PyTorch trace's own step ranges)",
    defaults={RANK: 0, PROBE: PROBE_WORKER},
)


COLLECTIVES = SampleTable(
    COLLECTIVES_TABLE,
    tuple(zip(COLLECTIVE_COLUMNS, (INT64, INT64, STRING, INT64, INT64, INT64), strict=True)),
    "one row per collective a rank of a data-parallel run entered (`--nproc`: each DDP gradient bucket's "
    "all-reduce): epoch, step, what it was, when the rank arrived and when it completed there (Unix ns), and "
    "the rank; the straggler analysis (analyzers/figures/straggler.py) reads who arrived last",
    defaults={RANK: 0},
)

STEP_PARTS = SampleTable(
    STEP_PARTS_TABLE,
    tuple(zip(STEP_PART_COLUMNS, (INT64, INT64, INT64, INT64, FLOAT64, FLOAT64, FLOAT64, INT64), strict=True)),
    "a PyTorch step of a user's command split where the probe sees it, one row per row of the steps table "
    "(same epoch, step, rank and start_ns): seconds in the forward pass and loss (the batch handed out to backward() "
    "called), in backward() (under DDP the gradients' all-reduce too), in optimizer.step(); and when the step "
    "called backward() (Unix ns; null: it called none), where DDP's all-reduce begins: the ranks' arrivals "
    "the straggler analysis reads where no collective is recorded",
    defaults={RANK: 0},
)

SAMPLE_TABLES: dict[str, SampleTable] = {
    t.name: t
    for t in (
        PROCESS,
        THREADS_TABLE,
        CORES,
        GPUS,
        RAPL,
        TEGRA,
        TEGRA_CORES,
        TEMPS,
        RAILS,
        STEPS,
        COLLECTIVES,
        STEP_PARTS,
    )
}
