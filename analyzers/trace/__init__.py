"""What a trace holds and how its names read, declared once: the normalised tables, CUDA API and kernel names, the
clock."""
