"""Measuring: runs a training or a user's command and writes its run folder (process control, samplers, trace
backends, environments, datasets)."""
