"""An imported PyTorch-profiler trace recorded with shapes: its FLOPs per step from the operators' shapes
equal FlopCounterMode's count of the same step (the script that wrote the trace prints it); a trace whose
convolutions lack their strides (PyTorch of 2021) is not counted, and says why."""

from __future__ import annotations

import re
from pathlib import Path

from analyzers.figures.op_flops import trace_flops
from analyzers.figures.run_summary import summarise
from analyzers.run.run import Run
from tests.conftest import require_framework, run_tracer
from tests.tracer.worker.helpers import run_in_framework
from tracer.core.runfolder import list_runs

PROFILED_STEPS = """schedule = torch.profiler.schedule(wait=0, warmup=1, active=3)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, schedule=schedule,
                            on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for _ in range(4):
        step()
        prof.step()
"""
"""The tail of each script below: its `step()` run four times under the PyTorch profiler with shapes recorded,
the last three written as a Chrome trace to argv[1]."""

TRACE = (
    """
import sys, torch
from torch.utils.flop_counter import FlopCounterMode
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
                        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Flatten(), torch.nn.Linear(8 * 16 * 16, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
def step():
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
with FlopCounterMode(display=False) as counter:
    step()
print("own_flops_per_step", counter.get_total_flops())
"""
    + PROFILED_STEPS
)


def test_a_traces_shapes_give_flop_counter_modes_count(tmp_path: Path) -> None:
    require_framework("pytorch")
    trace = tmp_path / "shapes.pt.trace.json"
    out = run_in_framework("pytorch", TRACE, str(trace))
    own = re.search(r"own_flops_per_step (\d+)", out)
    assert own is not None, out
    found = trace_flops(trace)
    assert found is not None and found.steps == 3 and found.not_counted == 0
    assert found.flops_per_step == int(own.group(1))
    result = run_tracer("import", str(trace), "--out", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(tmp_path / "runs")
    u = summarise(Run.open(folder.path)).utilisation
    assert u.flops_per_step == int(own.group(1)) and u.flops_source.startswith("from the trace's recorded shapes")
    assert u.achieved_flops_per_s is not None and u.achieved_flops_per_s > 0
    assert u.mfu is None and u.peak.source.startswith("not known")  # a CPU trace: no GPU recorded, no peak


ATTENTION = (
    """
import sys, torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
torch.manual_seed(0)
B, S, E, H = 2, 64, 32, 4
qkv, proj = torch.nn.Linear(E, 3 * E), torch.nn.Linear(E, E)
opt = torch.optim.SGD([*qkv.parameters(), *proj.parameters()], lr=0.01)
x = torch.randn(B, S, E)
def step():
    opt.zero_grad()
    q, k, v = (t.reshape(B, S, H, E // H).transpose(1, 2) for t in qkv(x).chunk(3, dim=-1))
    out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, S, E)
    proj(out).square().mean().backward()
    opt.step()
# The truth: attention on its math path, as the products FlopCounterMode counts (on the CPU it has no
# formula for the fused kernel the profiled steps run, and counts it 0).
with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
    step()
print("own_flops_per_step", counter.get_total_flops())
print("attention_flops_per_step", 3 * 4 * B * H * S * S * (E // H))  # forward, and a backward twice as large
"""
    + PROFILED_STEPS
)


def test_a_traces_fused_attention_counts_as_its_math_path(tmp_path: Path) -> None:
    """`F.scaled_dot_product_attention` recorded as its fused CPU kernel (forward and backward) counts what
    FlopCounterMode counts of the same step run as plain products; its inner kernel is not counted twice."""
    require_framework("pytorch")
    trace = tmp_path / "attention.pt.trace.json"
    out = run_in_framework("pytorch", ATTENTION, str(trace))
    own, attention = (re.search(rf"{what}_flops_per_step (\d+)", out) for what in ("own", "attention"))
    assert own is not None and attention is not None, out
    assert "aten::_scaled_dot_product_flash_attention_for_cpu_backward" in trace.read_text()
    found = trace_flops(trace)
    assert found is not None and found.steps == 3 and found.not_counted == 0
    assert found.flops_per_step == int(own.group(1))
    assert int(attention.group(1)) > found.flops_per_step / 2  # the attention is most of it: counted


def test_convolutions_without_strides_are_not_counted(real_fixtures: Path) -> None:
    found = trace_flops(real_fixtures / "kineto-2021" / "worker0.1623143089861.pt.trace.json.gz")
    assert found is not None and found.steps == 6
    assert found.not_counted == 318  # ResNet-50's convolutions, recorded without Concrete Inputs
