"""A run's figures from its own events, steps and samples: phases, steps, steady throughput, energy, noise between
repeats."""
