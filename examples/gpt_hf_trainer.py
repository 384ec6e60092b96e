"""A small GPT-2 (Hugging Face transformers, built from a config: nothing downloaded) trained on
examples/data/tiny_corpus.txt by transformers' `Trainer`, character by character.

    python examples/gpt_hf_trainer.py --epochs 2
    tracer profile -- python examples/gpt_hf_trainer.py --epochs 2

A script as Trainer users write one: a dataset of `input_ids`/`labels` dicts, `TrainingArguments` and
`Trainer(...).train()`, evaluated on held-out text after each epoch. The Trainer iterates its DataLoader
through accelerate (one batch read ahead), calls backward and steps the optimizer itself; the tool's probe
sees the steps through the DataLoader, and the evaluations are not epochs.
Same text, windows and batch size as gpt_pytorch.py.
"""

import sys
import tempfile
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

sys.path.insert(0, str(Path(__file__).parent))
from gpt_pytorch import CORPUS, CharWindows, training_arguments  # noqa: E402 - the same windows of text as the plain loop


class TokenWindows(torch.utils.data.Dataset):
    """CharWindows as the dicts a causal language model takes (the model shifts the labels itself)."""

    def __init__(self, windows: CharWindows) -> None:
        self.windows = windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int) -> dict:
        x, _ = self.windows[i]
        return {"input_ids": x, "labels": x}


def main() -> None:
    p = training_arguments(__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--accumulate", type=int, default=1, help="batches whose gradients make one optimizer step")
    p.add_argument("--cpu", action="store_true", help="train on the CPU even where there is a GPU")
    args = p.parse_args()

    text = CORPUS.read_text()
    windows, held_out = CharWindows(text, args.block, args.samples), CharWindows(text[-2000:], args.block, 64)
    config = GPT2Config(vocab_size=windows.vocab, n_positions=args.block, n_embd=96, n_layer=3, n_head=4)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(
            output_dir=out,
            num_train_epochs=args.epochs,
            per_device_train_batch_size=args.batch,
            gradient_accumulation_steps=args.accumulate,
            learning_rate=3e-3,
            dataloader_num_workers=args.workers,
            dataloader_drop_last=True,
            logging_strategy="epoch",
            eval_strategy="epoch",
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            use_cpu=args.cpu,
            seed=0,
        )
        trainer = Trainer(
            model=model, args=training, train_dataset=TokenWindows(windows), eval_dataset=TokenWindows(held_out)
        )
        result = trainer.train()
    print(f"trained {result.global_step} steps: mean loss {result.training_loss:.3f}")


if __name__ == "__main__":
    main()
