"""Prints its own lines to stdout, one per step, and a last line counting them."""

for step in range(5):
    print(f"loss at step {step}: {1.0 / (step + 1):.4f}")
print("5 lines printed")
