"""LoRA adapters in the numpy reference (facts.json lora): a frozen base model,
and a small trainable low-rank term on chosen projections.

    adapter = Adapter.init(config, LoraConfig(rank=8, alpha=16, targets=("q", "v")), seed=0)
    trainer = LoraTrainer(config, base_params, adapter, TrainConfig.from_preset("tiny"))
    trainer.train_step(x, y)
    merged = adapter.merge(base_params)   # a plain model: W + (alpha / rank) A B

model.forward and model.backward apply the adapter (`lora=`); this module says
which tensors it has, how they start, how they train and how they fold into
the base.
"""
import math
from dataclasses import dataclass

import numpy as np

from tinygpt import model
from tinygpt.facts import FACTS
from tinygpt.train import TrainConfig, adamw_update, clip_grad_norm, lr_at

LORA = FACTS["lora"]
PROJECTIONS: dict[str, str] = LORA["projections"]


@dataclass(frozen=True)
class LoraConfig:
    rank: int = LORA["rank"]
    alpha: float = LORA["alpha"]
    targets: tuple[str, ...] = tuple(LORA["targets"])

    def __post_init__(self):
        if not isinstance(self.rank, int) or isinstance(self.rank, bool) or not 1 <= self.rank <= LORA["max_rank"]:
            raise ValueError(f"LoRA rank must be an integer from 1 to {LORA['max_rank']}, got {self.rank!r}")
        if not (isinstance(self.alpha, (int, float)) and math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"LoRA alpha must be a positive number, got {self.alpha!r}")
        unknown = [t for t in self.targets if t not in PROJECTIONS]
        if unknown or not self.targets or len(set(self.targets)) != len(self.targets):
            raise ValueError(f"LoRA targets must be distinct names from {', '.join(PROJECTIONS)}, got {list(self.targets)}")

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    @classmethod
    def from_header(cls, adapter: dict) -> "LoraConfig":
        """The settings an adapter file's header.adapter records."""
        return cls(adapter["rank"], adapter["alpha"], tuple(adapter["targets"]))

    def header(self, base_sha256: str) -> dict:
        """header.adapter for these settings on the base whose weights hash to base_sha256."""
        return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets), "base_sha256": base_sha256}


_BLOCK_SHAPES = {t["name"]: t["shape"] for t in FACTS["tensors"]["block"]}


def part_shape(config: model.GPTConfig, projection: str, part: str, rank: int) -> tuple[int, int]:
    """The shape of an adapter's A ("a": [in, rank]) or B ("b": [rank, out]) on a projection (attn.q_proj, ...)."""
    d_in, d_out = model.shape_of(_BLOCK_SHAPES[f"blocks.{{i}}.{projection}.weight"], config)
    return (d_in, rank) if part == "a" else (rank, d_out)


def adapter_specs(config: model.GPTConfig, lc: LoraConfig) -> list[tuple[str, tuple[int, int]]]:
    """(name, shape) of every adapter tensor, in the file's order (facts.json lora._doc)."""
    return [(f"blocks.{i}.{PROJECTIONS[target]}.lora_{part}", part_shape(config, PROJECTIONS[target], part, lc.rank))
            for i in range(config.n_layer) for target in PROJECTIONS if target in lc.targets for part in "ab"]


@dataclass
class Adapter:
    """An adapter's settings and tensors (name -> array, as adapter_specs names them)."""
    lc: LoraConfig
    tensors: dict[str, np.ndarray]

    @classmethod
    def init(cls, config: model.GPTConfig, lc: LoraConfig, seed: int = 0, dtype=np.float32) -> "Adapter":
        rng = np.random.default_rng(seed)
        tensors = {}
        for name, (rows, cols) in adapter_specs(config, lc):
            if name.endswith(".lora_a"):
                tensors[name] = (rng.standard_normal((rows, cols)) / math.sqrt(rows)).astype(dtype)
            else:
                tensors[name] = np.zeros((rows, cols), dtype)
        return cls(lc, tensors)

    @property
    def scale(self) -> float:
        return self.lc.scale

    def pair(self, layer: int, projection: str):
        """(A, B) for the base tensor blocks.<layer>.<projection>, or None where it is not adapted."""
        a = self.tensors.get(f"blocks.{layer}.{projection}.lora_a")
        return None if a is None else (a, self.tensors[f"blocks.{layer}.{projection}.lora_b"])

    def merge(self, params: dict) -> dict:
        """The base's parameters with the adapter folded in: W + scale A B on each adapted projection."""
        merged = dict(params)
        for name, a in self.tensors.items():
            if name.endswith(".lora_a"):
                base = name.removesuffix(".lora_a")
                w = params[f"{base}.weight"]
                merged[f"{base}.weight"] = (w + self.scale * (a @ self.tensors[f"{base}.lora_b"])).astype(w.dtype)
        return merged


class LoraTrainer:
    """Trains an adapter on a frozen base: only the adapter has gradients, moments and updates."""

    def __init__(self, config: model.GPTConfig, base: dict, adapter: Adapter, tc: TrainConfig):
        self.config, self.base, self.adapter, self.tc = config, base, adapter, tc
        self.m = {k: np.zeros_like(t) for k, t in adapter.tensors.items()}
        self.v = {k: np.zeros_like(t) for k, t in adapter.tensors.items()}
        self.step = 0

    def train_step(self, x: np.ndarray, y: np.ndarray, lr: float | None = None) -> dict:
        """One step on batch (x, y), as train.Trainer's but over the adapter's tensors alone."""
        lr = lr_at(self.step, self.tc) if lr is None else lr
        _, loss, acts = model.forward(self.config, self.base, x, y, lora=self.adapter)
        grads = model.backward(self.config, self.base, acts)
        grads = {name: grads[name] for name in self.adapter.tensors}
        norm = clip_grad_norm(grads, self.tc.grad_clip)
        self.step += 1
        adamw_update(self.adapter.tensors, grads, self.m, self.v, self.step, lr, self.tc)
        return {"loss": loss, "grad_norm": norm, "lr": lr}
