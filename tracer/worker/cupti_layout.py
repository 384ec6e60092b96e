"""CUPTI activity record layouts, declared once per CUPTI major version (Python 3.6, standard library).

The in-worker collector (`tracer.worker.cupti_trace`) writes CUPTI's activity buffers as they are; the
tracer decodes them after the run (`tracer.tracing.cupti_decode`). Both walk a buffer with these layouts:
the collector to find kernel name pointers at stop, the decoder to view each kind through a NumPy
structured dtype. Reached from the tool through `tracer.worker.schema` only.

Taken from CUDA 13.0's `cupti_activity.h` (CUPTI_API_VERSION 130001, nvidia-cuda-cupti 13.0.85):
records are `__attribute__((packed, aligned(8)))`, so fields follow each other without padding and each
record's size is rounded up to 8 bytes; CUPTILP64 is defined on 64-bit Linux. Offsets and sizes were
checked against cupti-python 13.0.1's own `activity_*_dtype`s (API 40, Kernel10 216, Memcpy6 96,
Memset4 88 bytes), and the buffer walk against `cuptiActivityGetNextRecord`.
Field types are NumPy type codes (`u4`, `i8`, `V7` for padding bytes); pointers are `u8`.
"""

from typing import Dict, Optional, Tuple

Fields = Tuple[Tuple[str, str], ...]

# CUpti_ActivityKind values used here (cupti_activity.h, stable across versions).
KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_DRIVER = 4
KIND_RUNTIME = 5
KIND_CONCURRENT_KERNEL = 10
#: The kinds the collector enables, in the order it enables them.
ENABLED_KINDS = (KIND_RUNTIME, KIND_DRIVER, KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET)
RECORD_ALIGNMENT = 8
#: CUpti_CallbackDomain values of the two API domains.
DOMAIN_DRIVER = 1
DOMAIN_RUNTIME = 2

API_13 = (  # CUpti_ActivityAPI (RUNTIME and DRIVER records)
    ("kind", "u4"),
    ("cbid", "u4"),
    ("start", "u8"),
    ("end", "u8"),
    ("process_id", "u4"),
    ("thread_id", "u4"),
    ("correlation_id", "u4"),
    ("return_value", "u4"),
)
KERNEL10_13 = (  # CUpti_ActivityKernel10 (CONCURRENT_KERNEL records in CUDA 13)
    ("kind", "u4"),
    ("cache_config", "u1"),
    ("shared_memory_config", "u1"),
    ("registers_per_thread", "u2"),
    ("partitioned_global_cache_requested", "u4"),
    ("partitioned_global_cache_executed", "u4"),
    ("start", "u8"),
    ("end", "u8"),
    ("completed", "u8"),
    ("device_id", "u4"),
    ("context_id", "u4"),
    ("stream_id", "u4"),
    ("grid_x", "i4"),
    ("grid_y", "i4"),
    ("grid_z", "i4"),
    ("block_x", "i4"),
    ("block_y", "i4"),
    ("block_z", "i4"),
    ("static_shared_memory", "i4"),
    ("dynamic_shared_memory", "i4"),
    ("local_memory_per_thread", "u4"),
    ("local_memory_total", "u4"),
    ("correlation_id", "u4"),
    ("grid_id", "i8"),
    ("name", "u8"),  # const char *: CUPTI's memory in the traced process, resolved there at stop
    ("reserved0", "u8"),
    ("queued", "u8"),
    ("submitted", "u8"),
    ("launch_type", "u1"),
    ("is_shared_memory_carveout_requested", "u1"),
    ("shared_memory_carveout_requested", "u1"),
    ("padding", "u1"),
    ("shared_memory_executed", "u4"),
    ("graph_node_id", "u8"),
    ("shmem_limit_config", "u4"),
    ("graph_id", "u4"),
    ("p_access_policy_window", "u8"),
    ("channel_id", "u4"),
    ("channel_type", "u4"),
    ("cluster_x", "u4"),
    ("cluster_y", "u4"),
    ("cluster_z", "u4"),
    ("cluster_scheduling_policy", "u4"),
    ("local_memory_total_v2", "u8"),
    ("max_potential_cluster_size", "u4"),
    ("max_active_clusters", "u4"),
    ("is_device_launched", "u1"),
    ("padding3", "V7"),
)
MEMCPY6_13 = (  # CUpti_ActivityMemcpy6
    ("kind", "u4"),
    ("copy_kind", "u1"),
    ("src_kind", "u1"),
    ("dst_kind", "u1"),
    ("flags", "u1"),
    ("bytes", "u8"),
    ("start", "u8"),
    ("end", "u8"),
    ("device_id", "u4"),
    ("context_id", "u4"),
    ("stream_id", "u4"),
    ("correlation_id", "u4"),
    ("runtime_correlation_id", "u4"),
    ("pad", "u4"),
    ("reserved0", "u8"),
    ("graph_node_id", "u8"),
    ("graph_id", "u4"),
    ("channel_id", "u4"),
    ("channel_type", "u4"),
    ("is_device_launched", "u1"),
    ("pad2", "V3"),
    ("copy_count", "u8"),
)
MEMSET4_13 = (  # CUpti_ActivityMemset4
    ("kind", "u4"),
    ("value", "u4"),
    ("bytes", "u8"),
    ("start", "u8"),
    ("end", "u8"),
    ("device_id", "u4"),
    ("context_id", "u4"),
    ("stream_id", "u4"),
    ("correlation_id", "u4"),
    ("flags", "u2"),
    ("memory_kind", "u2"),
    ("pad", "u4"),
    ("reserved0", "u8"),
    ("graph_node_id", "u8"),
    ("graph_id", "u4"),
    ("channel_id", "u4"),
    ("channel_type", "u4"),
    ("is_device_launched", "u1"),
    ("pad2", "V3"),
)

#: CUPTI major version -> {activity kind: (C struct name, fields)}.
LAYOUTS: Dict[int, Dict[int, Tuple[str, Fields]]] = {
    13: {
        KIND_RUNTIME: ("CUpti_ActivityAPI", API_13),
        KIND_DRIVER: ("CUpti_ActivityAPI", API_13),
        KIND_CONCURRENT_KERNEL: ("CUpti_ActivityKernel10", KERNEL10_13),
        KIND_MEMCPY: ("CUpti_ActivityMemcpy6", MEMCPY6_13),
        KIND_MEMSET: ("CUpti_ActivityMemset4", MEMSET4_13),
    },
}


def major_of(api_version: int) -> int:
    """CUPTI's API version (cuptiGetVersion: 130001) -> its major (13)."""
    return int(api_version) // 10000


def layouts_for(api_version: int) -> Optional[Dict[int, Tuple[str, Fields]]]:
    """The layouts of this CUPTI API version, or None where none is declared."""
    return LAYOUTS.get(major_of(api_version))


def field_size(code: str) -> int:
    return int(code[1:])


def field_offset(fields: Fields, name: str) -> int:
    """Byte offset of field `name` in a packed record."""
    offset = 0
    for field, code in fields:
        if field == name:
            return offset
        offset += field_size(code)
    raise KeyError(name)


def record_size(fields: Fields) -> int:
    """sizeof the record: the packed fields rounded up to RECORD_ALIGNMENT."""
    total = sum(field_size(code) for _, code in fields)
    return (total + RECORD_ALIGNMENT - 1) // RECORD_ALIGNMENT * RECORD_ALIGNMENT
