"""Golden numbers from the numpy reference, for every engine to reproduce.

    python -m tests.oracles.golden            # rewrites tests/fixtures/golden_tiny.json

A tiny model is trained for 20 steps in float32 (what the engines match) and
again in float64 from the same float32 start (how far float32 rounding alone
moves things, to size tolerances). tests/test_golden.py checks the committed
file equals what this command generates, so it is never edited by hand.

JSON fields (all arrays of floats are base64 of little-endian float32).
Rounding differs between implementations (and BLAS builds), so compare
floats with tolerances: step losses agree with loss_f64 to ~1e-6 relative
here, and float32 engines should stay within ~1e-4 over the 20 steps.
- format, version: "tinygpt-golden", 1. generator: the command above.
- config: the ModelConfig {vocab_size, n_layer, n_embd, n_head, block_size}.
- train: the TrainConfig (types.ts names) the steps used; lr there is the peak,
  the per-step lr is in steps[i].lr and is what to pass to trainStep.
- param_count: total parameters; tensors: [{name, shape, offset, size}] in
  canonical order, offset and size counted in floats within the flat vectors.
- init_params: the flat initial parameters (setState with m = v = 0, step 0).
- steps: 20 x {step, lr, x, y, loss_f32, loss_f64, grad_norm_f32, grad_norm_f64}:
  x and y are batch_size*block_size token ids (row-major [B, T]); loss_* is the
  mean cross-entropy of that batch before the update (what trainStep resolves
  with); grad_norm_* the global gradient L2 norm before clipping.
- grads_step0: {name: {shape, f32, max_abs_f64_diff}}: raw gradients (before
  clipping) of the step-0 loss for a few tensors, and how far the float64
  gradient is from the float32 one.
- logits_step0: the initial model's logits (vocab_size floats) at the last
  position of the first sequence of steps[0].x (what prefill returns).
- final: after the 20 updates, {params: {name: {sum, l2, head}}} (sum and L2
  norm in float64 of the float32 tensor, head = its first 4 values),
  noise_tensors (the attention key biases: their true gradient is exactly 0,
  because softmax ignores adding one constant to a row of scores, so what
  they get is rounding noise that Adam turns into steps of about lr; their
  final values are implementation-defined: compare them loosely, each element
  within the sum of the lrs of its starting value),
  m_l2 and v_l2 (L2 norms of the whole Adam moment vectors), loss_f32 and
  loss_f64 (the loss of steps[0]'s batch under the final weights: Backend.loss).
- sample: {prompt, max_new_tokens, tokens, min_margin}: greedy (temperature 0)
  continuation of prompt from the final float32 weights, and the smallest gap
  between the best and second-best logit over those choices (ties would make
  greedy decoding implementation-defined; the gap shows how close the nearest
  one is). After 20 steps the model has mostly learnt that spaces are common.
"""
import base64
import json
import math
from pathlib import Path

import numpy as np

from tests.oracles import conformance
from tinygpt import model
from tinygpt.train import Trainer, TrainConfig, lr_at

PATH = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "golden_tiny.json"
CONFIG = model.GPTConfig(vocab_size=256, n_layer=2, n_embd=32, n_head=2, block_size=16)
TRAIN = TrainConfig(batch_size=4, lr=1e-2, warmup_steps=5, seed=1337)
STEPS = 20
GRAD_TENSORS = ["position_embedding.weight", "ln_final.weight", "blocks.0.attn.q_proj.weight",
                "blocks.0.ln1.bias", "blocks.1.mlp.fc_out.weight", "blocks.1.mlp.fc_in.bias"]
PROMPT = b"Shall I "
SAMPLE_TOKENS = 24
# Sonnet 18 (public domain): a text small enough for the model to start learning in 20 steps.
TEXT = (b"Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
        b"Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date;\n"
        b"Sometime too hot the eye of heaven shines,\nAnd often is his gold complexion dimm'd;\n")


def f32_base64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode("ascii")


def batches() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(TRAIN.seed)
    tokens = np.frombuffer(TEXT, dtype=np.uint8)
    T = CONFIG.block_size
    out = []
    for _ in range(STEPS):
        starts = rng.integers(0, len(tokens) - T, size=TRAIN.batch_size)
        x = np.stack([tokens[s:s + T] for s in starts]).astype(np.int64)
        y = np.stack([tokens[s + 1:s + 1 + T] for s in starts]).astype(np.int64)
        out.append((x, y))
    return out


def greedy(params: dict) -> dict:
    return conformance.greedy_sample(CONFIG, params, PROMPT, SAMPLE_TOKENS)


def generate() -> dict:
    init = model.init_params(CONFIG, TRAIN.seed, np.float32)
    runs = {"f32": Trainer(CONFIG, TRAIN, {k: v.copy() for k, v in init.items()}),
            "f64": Trainer(CONFIG, TRAIN, {k: v.astype(np.float64) for k, v in init.items()})}
    data = batches()

    grads0 = {}
    for dtype, trainer in runs.items():
        _, _, acts = model.forward(CONFIG, trainer.params, *data[0])
        grads0[dtype] = model.backward(CONFIG, trainer.params, acts)
    logits0 = model.next_logits(CONFIG, init, data[0][0][0])

    steps = []
    for i, (x, y) in enumerate(data):
        lr = lr_at(i, TRAIN)
        record = {"step": i, "lr": lr, "x": x.ravel().tolist(), "y": y.ravel().tolist()}
        for dtype, trainer in runs.items():
            out = trainer.train_step(x, y, lr)
            record[f"loss_{dtype}"] = out["loss"]
            record[f"grad_norm_{dtype}"] = out["grad_norm"]
        steps.append(record)

    final32 = runs["f32"].params
    offset, tensors = 0, []
    for name, shape, _ in model.tensor_specs(CONFIG):
        tensors.append({"name": name, "shape": list(shape), "offset": offset, "size": math.prod(shape)})
        offset += math.prod(shape)

    def l2(d: dict) -> float:
        return float(np.linalg.norm(model.flatten(d, CONFIG).astype(np.float64)))

    return {
        "format": "tinygpt-golden",
        "version": 1,
        "generator": "python -m tests.oracles.golden",
        "config": CONFIG.to_dict(),
        "train": TRAIN.to_dict(),
        "param_count": model.param_count(CONFIG),
        "tensors": tensors,
        "init_params": f32_base64(model.flatten(init, CONFIG)),
        "steps": steps,
        "grads_step0": {name: {"shape": list(grads0["f32"][name].shape), "f32": f32_base64(grads0["f32"][name]),
                               "max_abs_f64_diff": float(np.max(np.abs(grads0["f64"][name] - grads0["f32"][name])))}
                        for name in GRAD_TENSORS},
        "logits_step0": f32_base64(logits0),
        "final": {
            "params": {name: {"sum": float(np.sum(p, dtype=np.float64)),
                              "l2": float(np.linalg.norm(p.astype(np.float64))),
                              "head": [float(v) for v in p.ravel()[:4]]} for name, p in final32.items()},
            "noise_tensors": [name for name in final32 if model.noise_gradient(name)],
            "m_l2": l2(runs["f32"].m),
            "v_l2": l2(runs["f32"].v),
            "loss_f32": model.forward(CONFIG, final32, *data[0])[1],
            "loss_f64": model.forward(CONFIG, runs["f64"].params, *data[0])[1],
        },
        "sample": greedy(final32),
    }


def dumps(golden: dict) -> str:
    return json.dumps(golden, separators=(",", ":")) + "\n"


def main():
    golden = generate()
    PATH.parent.mkdir(parents=True, exist_ok=True)
    PATH.write_text(dumps(golden))
    losses = [s["loss_f32"] for s in golden["steps"]]
    print(f"wrote {PATH} ({PATH.stat().st_size:,} bytes): loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"sample {bytes(golden['sample']['tokens'])!r}")


if __name__ == "__main__":
    main()
