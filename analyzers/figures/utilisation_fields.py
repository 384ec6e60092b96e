"""The names of a run's FLOPs, peak and MFU in JSON, with their meaning: apart from `utilisation`, so that
the command line's list of JSON outputs (tracer/cli/json_output.py) reads them without importing a run's records."""

JSON_FIELDS = {
    "flops_per_image": "training FLOPs of one image (built-in models; null for a script or a trace)",
    "flops_per_step": "training FLOPs of one step of one rank (multiply-add = 2)",
    "flops_source": "how the FLOPs were counted, or 'not counted: why'",
    "achieved_flops_per_s": "model FLOPs per second over the steady steps, every rank's",
    "peak_flops_per_s": "the peak of the devices the run used, at its dtype (null: not known)",
    "peak_dtype": "fp32, tf32, fp16/bf16 or fp8",
    "peak_source": "where the peak comes from (a datasheet, or measured on the machine), or why it is not known",
    "peak_nominal_flops_per_s": "a CPU's nominal peak beside the measured one, where its name states its clock",
    "mfu": "model FLOPs utilisation over the steady steps, a fraction of 1",
    "whole_achieved_flops_per_s": "model FLOPs per second over every epoch, warm-up included",
    "whole_mfu": "MFU over every epoch",
    "mfu_by_rank": "one object per rank of a run of several ranks: rank, achieved_flops_per_s, mfu",
}
"""`analyze --format json`'s fields on MFU, declared once (tracer/cli/json_output.py lists them)."""
