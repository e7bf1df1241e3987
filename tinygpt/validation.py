"""The validation metric (facts.json data.validation_metric), the loss a model is judged by:

    python -m tinygpt.validation gallery/shakespeare-tiny.tinygpt --corpus shakespeare

The mean next-byte loss over up to max_windows non-overlapping windows spread
evenly over the held-out split, evaluated with the numpy reference. The engines
compute the same windows (webapp/engine/data.ts validationStarts) and the same
mean (Trainer.validationLoss). The periodic validation during training
(train.evaluate) is a cheaper, rougher figure.
"""
import argparse
import time

import numpy as np

from tinygpt import model
from tinygpt.facts import FACTS
from tinygpt.train import load_corpus, split, windows

MAX_WINDOWS = FACTS["data"]["validation_metric"]["max_windows"]
# Windows per forward pass: bounds the activations (Huge: about 100 MB at 32), not the value.
BATCH_WINDOWS = 32


def validation_starts(n_tokens: int, block_size: int, max_windows: int = MAX_WINDOWS) -> list[int]:
    """Where the metric's windows of block_size + 1 bytes start in n_tokens validation bytes: k of them,
    the whole windows the split holds or max_windows if fewer, window j at floor(j n / k)."""
    k = min(n_tokens // (block_size + 1), max_windows)
    if k < 1:
        raise ValueError(f"{n_tokens} validation bytes cannot hold one window of {block_size}+1")
    return [j * n_tokens // k for j in range(k)]


def validation_loss(config: model.GPTConfig, params: dict, corpus: bytes, max_windows: int = MAX_WINDOWS) -> float:
    """The metric for `params` on `corpus` (all of it: the validation split is taken here)."""
    _, val = split(corpus)
    starts = validation_starts(len(val), config.block_size, max_windows)
    total = 0.0
    for i in range(0, len(starts), BATCH_WINDOWS):
        part = starts[i:i + BATCH_WINDOWS]
        # Every window has block_size positions, so the mean over all is the batch means weighted by windows.
        total += model.forward(config, params, *windows(val, part, config.block_size))[1] * len(part)
    return total / len(starts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="a .tinygpt file")
    ap.add_argument("--corpus", required=True, help="a prepared corpus id or a text file (as tinygpt.train takes)")
    ap.add_argument("--max-windows", type=int, default=MAX_WINDOWS,
                    help="another cap, to measure how the value moves with it (default: facts.json's)")
    args = ap.parse_args(argv)

    from tinygpt import checkpoint

    ckpt = checkpoint.load(args.model)
    name, data = load_corpus(args.corpus)
    t0 = time.time()
    loss = validation_loss(ckpt.config, ckpt.params, data, args.max_windows)
    count = len(validation_starts(len(split(data)[1]), ckpt.config.block_size, args.max_windows))
    print(f"{args.model} on {name}: validation loss {loss:.4f} over {count} windows of "
          f"{ckpt.config.block_size}+1 bytes ({time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
