"""Training the numpy reference: data, schedule, clipping, AdamW, the loop and a CLI.

    python -m tinygpt.train --preset tiny --corpus shakespeare --steps 200 --out tiny.tinygpt

One step is exactly what every engine's Backend.trainStep does: forward, mean
cross-entropy, backward, global-norm clipping, then AdamW with the learning
rate the schedule gives for that step.
"""
import argparse
import hashlib
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tinygpt import model
from tinygpt.facts import FACTS, preset


@dataclass
class TrainConfig:
    """Field names as TrainConfig in webapp/engine/types.ts."""
    batch_size: int
    lr: float
    beta1: float = FACTS["optimizer"]["beta1"]
    beta2: float = FACTS["optimizer"]["beta2"]
    eps: float = FACTS["optimizer"]["eps"]
    weight_decay: float = FACTS["optimizer"]["weight_decay"]
    grad_clip: float = FACTS["optimizer"]["grad_clip"]
    warmup_steps: int = FACTS["optimizer"]["warmup_steps"]
    seed: int = 0

    @classmethod
    def from_preset(cls, preset_id: str, **overrides) -> "TrainConfig":
        p = preset(preset_id)
        return cls(**{"batch_size": p["batch_size"], "lr": p["lr"], **overrides})

    def to_dict(self) -> dict:
        return asdict(self)


def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warmup from lr/warmup_steps at step 0 to lr at step warmup_steps-1, then constant."""
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    return tc.lr


def clip_grad_norm(grads: dict, max_norm: float) -> float:
    """Scale all gradients by max_norm/norm when their global L2 norm exceeds max_norm.
    Returns the norm before clipping."""
    norm = math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads.values()))
    if norm > max_norm:
        scale = max_norm / norm
        for g in grads.values():
            g *= scale
    return norm


def adamw_update(params: dict, grads: dict, m: dict, v: dict, step: int, lr: float, tc: TrainConfig):
    """One AdamW update in place; `step` counts from 1 (bias correction). Weight
    decay is decoupled (lr * wd * p) and applies to 2-D tensors only."""
    correction1 = 1.0 - tc.beta1 ** step
    correction2 = 1.0 - tc.beta2 ** step
    for name, p in params.items():
        g = grads[name]
        m[name] = tc.beta1 * m[name] + (1.0 - tc.beta1) * g
        v[name] = tc.beta2 * v[name] + (1.0 - tc.beta2) * (g * g)
        update = (m[name] / correction1) / (np.sqrt(v[name] / correction2) + tc.eps)
        if p.ndim == 2:
            update = update + tc.weight_decay * p
        p -= lr * update


class Trainer:
    """Parameters, Adam moments and the step counter of one run."""

    def __init__(self, config: model.GPTConfig, tc: TrainConfig, params: dict | None = None, dtype=np.float32):
        self.config, self.tc = config, tc
        self.params = params if params is not None else model.init_params(config, tc.seed, dtype)
        self.m = {k: np.zeros_like(p) for k, p in self.params.items()}
        self.v = {k: np.zeros_like(p) for k, p in self.params.items()}
        self.step = 0
        self.history: list[dict] = []

    def train_step(self, x: np.ndarray, y: np.ndarray, lr: float | None = None) -> dict:
        """One step on batch (x, y); lr defaults to the schedule's. Returns loss, grad norm, lr."""
        lr = lr_at(self.step, self.tc) if lr is None else lr
        _, loss, acts = model.forward(self.config, self.params, x, y)
        grads = model.backward(self.config, self.params, acts)
        norm = clip_grad_norm(grads, self.tc.grad_clip)
        self.step += 1
        adamw_update(self.params, grads, self.m, self.v, self.step, lr, self.tc)
        return {"loss": loss, "grad_norm": norm, "lr": lr}


# ---------------------------------------------------------------------------
# Data.

def split(data: bytes | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation token arrays: the last val_fraction of the bytes is validation."""
    tokens = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    n_val = int(len(tokens) * FACTS["data"]["val_fraction"])
    return tokens[:len(tokens) - n_val], tokens[len(tokens) - n_val:]


def get_batch(tokens: np.ndarray, batch_size: int, block_size: int, rng: np.random.Generator):
    """batch_size random windows: x the tokens, y the same shifted by one."""
    if len(tokens) < block_size + 1:
        raise ValueError(f"{len(tokens)} tokens cannot fill one window of {block_size}+1")
    return windows(tokens, rng.integers(0, len(tokens) - block_size, size=batch_size), block_size)


def windows(tokens: np.ndarray, starts, block_size: int):
    """The windows at `starts`: x the tokens, y the same shifted by one."""
    x = np.stack([tokens[s:s + block_size] for s in starts]).astype(np.int64)
    y = np.stack([tokens[s + 1:s + 1 + block_size] for s in starts]).astype(np.int64)
    return x, y


def val_starts(n_tokens: int, block_size: int, count: int) -> list[int]:
    """Where the `count` validation windows start: evenly spaced, window j at floor(j (n - T) / count),
    the same whatever the seed and in every engine (webapp/engine/data.ts valStarts)."""
    return [j * (n_tokens - block_size) // count for j in range(count)]


def evaluate(config: model.GPTConfig, params: dict, tokens: np.ndarray, batches: int, batch_size: int) -> float:
    """Mean loss over `batches` batches of the fixed validation windows of `tokens`, as the engines'
    Trainer.evaluate: two validations of the same weights agree, here and in the app."""
    block = min(config.block_size, len(tokens) - 1)
    starts = val_starts(len(tokens), block, batches * batch_size)
    losses = []
    for b in range(batches):
        x, y = windows(tokens, starts[b * batch_size:(b + 1) * batch_size], block)
        losses.append(model.forward(config, params, x, y)[1])
    return float(np.mean(losses))


# ---------------------------------------------------------------------------
# CLI.

def load_corpus(name: str) -> tuple[str, bytes]:
    path = Path(name)
    if not path.exists():
        path = Path(__file__).resolve().parent.parent / ".cache" / "corpora" / f"{name}.txt"
    if not path.exists():
        raise SystemExit(f"corpus {name!r}: no such file, and no prepared {path} (run `python build.py` first)")
    return path.stem, path.read_bytes()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="tiny", choices=[p["id"] for p in FACTS["presets"]])
    ap.add_argument("--corpus", default="shakespeare", help="a prepared corpus id or a text file")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write a .tinygpt checkpoint here")
    ap.add_argument("--optimizer-state", action="store_true", help="save Adam moments too")
    args = ap.parse_args(argv)

    from tinygpt import checkpoint

    name, data = load_corpus(args.corpus)
    train_tokens, val_tokens = split(data)
    config = model.GPTConfig.from_preset(args.preset)
    tc = TrainConfig.from_preset(args.preset, seed=args.seed)
    trainer = Trainer(config, tc)
    rng = np.random.default_rng(args.seed)
    print(f"{args.preset}: {model.param_count(config):,} parameters, {len(train_tokens):,} train / {len(val_tokens):,} val bytes")
    t0 = time.time()
    for step in range(args.steps):
        out = trainer.train_step(*get_batch(train_tokens, tc.batch_size, config.block_size, rng))
        point = {"step": trainer.step, "train": out["loss"]}
        if trainer.step % args.eval_every == 0 or step == args.steps - 1:
            point["val"] = evaluate(config, trainer.params, val_tokens, FACTS["app"]["eval_batches"], tc.batch_size)
            print(f"step {trainer.step:5d}  train {out['loss']:.4f}  val {point['val']:.4f}  {time.time() - t0:.1f}s")
        trainer.history.append(point)
    if args.out:
        dataset = {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        checkpoint.save(args.out, checkpoint.from_trainer(trainer, dataset=dataset, include_optimizer=args.optimizer_state))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
