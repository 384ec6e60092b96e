"""CUDA API names, declared once: how a call is shown, how two traces' calls are matched, and which calls
launch kernels, synchronise, or allocate device memory. Every table, comparison, phase cut and diagnosis
rule takes them from here (a test fails on a second spelling).

CUPTI names some calls with a version suffix (`cudaLaunchKernel_v7000`, `cudaLaunchKernelExC_v11060`);
Kineto records them without. nsys's display rule cuts a 4-digit suffix only; a match name cuts any
`_v` + 4 to 6 digits, so one function traced by two backends is one name.
"""

from __future__ import annotations

import re

VERSION_SUFFIX = r"_v[0-9]{4,6}$"
"""CUPTI's version suffix of an API name (the same pattern in Python and in DuckDB's SQL)."""
_SUFFIX = re.compile(VERSION_SUFFIX)

LAUNCH_CALLS = frozenset(
    {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cudaGraphLaunch",
     "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cuGraphLaunch"}
)  # fmt: skip
"""Calls that put kernels on a GPU stream (match names: runtime and driver API)."""
SYNC_CALLS = frozenset(
    {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
     "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"}
)  # fmt: skip
"""Calls that block the host until the GPU catches up."""
ALLOC_CALLS = frozenset({"cudaMalloc", "cudaFree", "cuMemAlloc", "cuMemFree"})
"""Device-memory allocation and release outside a caching allocator."""


def display_name(name: str) -> str:
    """nsys's rule, verbatim from its SQL: when the 6th- and 5th-last characters are `_v`, drop the
    last 6 (cudaLaunchKernel_v7000 -> cudaLaunchKernel; cudaLaunchKernelExC_v11060 stays as is)."""
    return name[:-6] if len(name) >= 6 and name[-6:-4] == "_v" else name


def match_name(name: str) -> str:
    """The name two traces are matched on: any `_vNNNN[NN]` version suffix dropped. nsys's display rule
    keeps `cudaLaunchKernelExC_v11060` (a 5-digit version), while Kineto records `cudaLaunchKernelExC`;
    matched as they are, the one function would show up as two."""
    return _SUFFIX.sub("", name)


def sql_in(column: str, names: frozenset[str]) -> str:
    """A DuckDB condition: `column`'s match name is one of `names`."""
    listed = ", ".join(f"'{n}'" for n in sorted(names))
    return f"regexp_replace({column}, '{VERSION_SUFFIX}', '') IN ({listed})"
