"""What a timeline draws: lanes, their zoom indexes, the GPU rows, the Chrome-trace export and the stored view."""
