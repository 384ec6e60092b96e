"""Runs side by side: pairs of data modes, any number of runs compared, and why two runs differ."""
