"""Golden numbers for LoRA fine-tuning, from the numpy reference, for every engine to reproduce.

    python -m tests.oracles.golden_lora       # rewrites tests/fixtures/golden_lora_tiny.json

The base is golden_tiny.json's model after its 20 float32 steps (stored here whole,
as base_params, since its fixture keeps only norms), frozen; an adapter on every projection (so every forward and backward branch
runs) trains for that fixture's 20 batches (its steps' x and y) in float32, and
again in float64 from the same float32 start to size tolerances. Its B starts
nonzero, unlike a new adapter's, so the first forward already differs from the
base and A's first gradient is not zero. tests/test_lora.py checks the committed
file is what this command generates.

JSON fields (float arrays are base64 of little-endian float32):
- format, version: "tinygpt-golden-lora", 1. generator: the command above.
- lora: {rank, alpha, targets}: the adapter's settings (header.adapter's, less the base).
- tensors: [{name, shape, offset, size}]: the adapter's tensors in file order
  (facts.json lora._doc), offsets and sizes in floats within the flat vectors.
- base_params: the frozen base's flat parameters (golden_tiny.json's tensor layout).
- init_adapter: the flat initial adapter (its Adam moments start at zero, step 0).
- steps: 20 x {step, lr, loss_f32, loss_f64, grad_norm_f32, grad_norm_f64}: golden_tiny.json's
  steps[i] batch; loss_* is that batch's mean loss before the update, grad_norm_* the global
  L2 norm of the adapter's gradient before clipping.
- logits_step0: the last position's logits of steps[0].x's first sequence under base + the
  initial adapter (what prefill returns).
- final: after the 20 updates, {tensors: {name: l2}} (the float32 adapter's L2 norms, in
  float64), m_l2 and v_l2 (the whole Adam moment vectors'), loss_f32 (steps[0]'s batch).
- sample: greedy continuation, as golden_tiny.json's, from the base with the final adapter
  merged in: an engine sampling base + adapter must make the same choices.
"""
import json
import math

import numpy as np

from tests.oracles import conformance, golden
from tinygpt import lora, model
from tinygpt.train import Trainer, lr_at

PATH = golden.PATH.with_name("golden_lora_tiny.json")
LORA = lora.LoraConfig(rank=4, alpha=12, targets=tuple(lora.PROJECTIONS))
B_STD = 0.02


def initial_adapter() -> lora.Adapter:
    adapter = lora.Adapter.init(golden.CONFIG, LORA, golden.TRAIN.seed)
    rng = np.random.default_rng(golden.TRAIN.seed + 1)
    for name, t in adapter.tensors.items():
        if name.endswith(".lora_b"):
            t[...] = (B_STD * rng.standard_normal(t.shape)).astype(np.float32)
    return adapter


def flat(tensors: dict) -> np.ndarray:
    return np.concatenate([t.ravel() for t in tensors.values()])


def generate() -> dict:
    data = golden.batches()
    pretrain = Trainer(golden.CONFIG, golden.TRAIN, model.init_params(golden.CONFIG, golden.TRAIN.seed, np.float32))
    for i, (x, y) in enumerate(data):
        pretrain.train_step(x, y, lr_at(i, golden.TRAIN))
    base = pretrain.params
    start = initial_adapter()
    runs = {dtype: lora.LoraTrainer(golden.CONFIG, {k: v.astype(dtype) for k, v in base.items()},
                                    lora.Adapter(LORA, {k: v.astype(dtype) for k, v in start.tensors.items()}), golden.TRAIN)
            for dtype in (np.float32, np.float64)}
    logits0 = model.forward(golden.CONFIG, base, data[0][0][:1], lora=start)[0][0, -1]

    steps = []
    for i, (x, y) in enumerate(data):
        record = {"step": i, "lr": lr_at(i, golden.TRAIN)}
        for dtype, trainer in runs.items():
            out = trainer.train_step(x, y, record["lr"])
            record[f"loss_{np.dtype(dtype).name.replace('float', 'f')}"] = out["loss"]
            record[f"grad_norm_{np.dtype(dtype).name.replace('float', 'f')}"] = out["grad_norm"]
        steps.append(record)

    run = runs[np.float32]
    offset, tensors = 0, []
    for name, shape in lora.adapter_specs(golden.CONFIG, LORA):
        tensors.append({"name": name, "shape": list(shape), "offset": offset, "size": math.prod(shape)})
        offset += math.prod(shape)
    l2 = lambda a: float(np.linalg.norm(a.astype(np.float64)))  # noqa: E731
    return {
        "format": "tinygpt-golden-lora",
        "version": 1,
        "generator": "python -m tests.oracles.golden_lora",
        "lora": {"rank": LORA.rank, "alpha": LORA.alpha, "targets": list(LORA.targets)},
        "tensors": tensors,
        "base_params": golden.f32_base64(model.flatten(base, golden.CONFIG)),
        "init_adapter": golden.f32_base64(flat(start.tensors)),
        "steps": steps,
        "logits_step0": golden.f32_base64(logits0),
        "final": {
            "tensors": {name: l2(t) for name, t in run.adapter.tensors.items()},
            "m_l2": l2(flat(run.m)),
            "v_l2": l2(flat(run.v)),
            "loss_f32": model.forward(golden.CONFIG, base, *data[0], lora=run.adapter)[1],
        },
        "sample": conformance.greedy_sample(golden.CONFIG, run.adapter.merge(base), golden.PROMPT, golden.SAMPLE_TOKENS),
    }


def main():
    fixture = generate()
    PATH.write_text(golden.dumps(fixture))
    losses = [s["loss_f32"] for s in fixture["steps"]]
    print(f"wrote {PATH} ({PATH.stat().st_size:,} bytes): loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"sample {bytes(fixture['sample']['tokens'])!r}")


if __name__ == "__main__":
    main()
