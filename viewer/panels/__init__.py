"""The viewer's panels, each fed from `viewer.data.RunData` and nothing else."""
