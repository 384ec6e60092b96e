"""Summaries of a run's trace tables: the CUDA API split, kernels, operators, threads."""
