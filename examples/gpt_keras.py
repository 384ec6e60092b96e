"""The character-level GPT of gpt_pytorch.py in Keras, trained with `Model.fit` (TensorFlow backend).

python examples/gpt_keras.py --epochs 2
tracer profile -- python examples/gpt_keras.py --epochs 2
"""

import argparse
from pathlib import Path

import keras
import numpy as np

CORPUS = Path(__file__).with_name("data") / "tiny_corpus.txt"


def char_windows(text: str, block: int, samples: int) -> tuple[np.ndarray, int]:
    """Every `block + 1` characters of the text, `block // 2` apart (as gpt_pytorch.py's CharWindows)."""
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.int32)
    starts = range(0, len(ids) - block - 1, block // 2)
    return np.stack([ids[s : s + block + 1] for s in starts])[:samples], len(chars)


class TokenAndPosition(keras.layers.Layer):
    def __init__(self, vocab: int, block: int, dim: int) -> None:
        super().__init__()
        self.tokens = keras.layers.Embedding(vocab, dim)
        self.positions = keras.layers.Embedding(block, dim)

    def call(self, idx):
        return self.tokens(idx) + self.positions(keras.ops.arange(keras.ops.shape(idx)[1]))


def gpt(vocab: int, block: int, dim: int = 96, layers: int = 3, heads: int = 4) -> keras.Model:
    idx = keras.Input((block,), dtype="int32")
    x = TokenAndPosition(vocab, block, dim)(idx)
    for _ in range(layers):
        h = keras.layers.LayerNormalization(epsilon=1e-5)(x)
        x = x + keras.layers.MultiHeadAttention(heads, dim // heads)(h, h, use_causal_mask=True)
        h = keras.layers.LayerNormalization(epsilon=1e-5)(x)
        x = x + keras.layers.Dense(dim)(keras.layers.Dense(4 * dim, activation="gelu")(h))
    logits = keras.layers.Dense(vocab)(keras.layers.LayerNormalization(epsilon=1e-5)(x))
    return keras.Model(idx, logits)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--samples", type=int, default=512, help="windows of text per epoch")
    args = p.parse_args()

    keras.utils.set_random_seed(0)
    windows, vocab = char_windows(CORPUS.read_text(), args.block, args.samples)
    model = gpt(vocab, args.block)
    print(f"parameters: {model.count_params():,}")
    model.compile(
        optimizer=keras.optimizers.AdamW(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(windows[:, :-1], windows[:, 1:], batch_size=args.batch, epochs=args.epochs, verbose=2)


if __name__ == "__main__":
    main()
