"""Campaigns: a plan file's matrix of runs, run one at a time here (`local`) or one per node on a Ray
cluster (`ray_runner`), resumable through the campaign record (`record`)."""
