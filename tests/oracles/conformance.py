"""References for the backend conformance suite (webapp/engine/test/conformance.ts)
beside the golden fixture: short numpy-reference runs on shapes the golden model
does not reach, written at test time (tests/test_engine_node.py and
tests/test_cpu_node.py) into one folder, one JSON file each:

- odd.json: sizes that are no multiple of 8 or 16 (rows, columns, a context of 7)
  and a head size of 20 (16 + 4 columns): every CPU kernel's remainder paths;
- unaligned.json: n_embd 18 (no multiple of 4), heads of 6: the WebGPU
  backend's scalar matmuls, which the CPU backend refuses (its SIMD needs
  multiples of 4);
- split.json: a batch of 13 x 80 = 1040 positions and a context longer than one
  attention block: the WebGPU backend splits its weight-gradient and LayerNorm
  reductions.

Each holds config, train (types.ts names), init_params (flat float32), steps
[{x, y, lr, loss}] (constant lr, uniformly random tokens), prompt and logits
(next_logits of the trained model) and l2 (each trained tensor's L2 norm).

And top_p.json: the tokens the reference can draw (draw_weights above 0) from seeded logits
under TOP_P's temperature, top-k and top-p: {logits, temperature, top_k, top_p, kept}.

And kernels.json: the reference's matrix products on random inputs, for kernels only a GPU with
subgroup matrices runs (the coop-matrix lever's; its tests read this where wgpu-py cannot compile
them): {matmul: [{M, N, K, a [M,K], b [K,N], bias [N], c0 [M,N], ab}]}, the arrays as base64
float32.

And sample.json: the greedy continuation of a prompt by a gallery model (SAMPLE), long enough
for the sampling window to slide three times (facts.json sampling): {model (its path in the
repository), prompt, max_new_tokens, tokens, min_margin (greedy_sample)}.

And validation.json: the validation metric (tinygpt/validation.py) of that gallery model on
VALIDATION_BYTES of the docs, whose split holds a number of windows no multiple of the model's
batch size, so an engine's short last batch is checked too: {model, corpus (base64), windows, loss}.
"""
import base64
import json
from pathlib import Path

import numpy as np

from tinygpt import checkpoint, model
from tinygpt.train import Trainer, TrainConfig, split
from tinygpt.validation import validation_loss, validation_starts

CASES = {
    "odd": (model.GPTConfig(vocab_size=256, n_layer=2, n_embd=20, n_head=1, block_size=7),
            TrainConfig(batch_size=3, lr=3e-2, warmup_steps=0, seed=5), 3, 7),
    "unaligned": (model.GPTConfig(vocab_size=256, n_layer=1, n_embd=18, n_head=3, block_size=7),
                  TrainConfig(batch_size=2, lr=3e-2, warmup_steps=0, seed=6), 3, 8),
    "split": (model.GPTConfig(vocab_size=256, n_layer=1, n_embd=64, n_head=2, block_size=80),
              TrainConfig(batch_size=13, lr=1e-2, warmup_steps=0, seed=11), 2, 12),
}
PROMPT = [72, 105, 33, 10, 84]
# (M, N, K): no multiple of a 64 block (multiples of 4, for 16-byte loads); long enough to split along K.
MATMUL = [(200, 136, 72), (64, 128, 1024)]
ROOT = Path(__file__).resolve().parents[2]
TOP_P = {"temperature": 1.5, "top_k": 12, "top_p": 0.7}
SAMPLE = ("gallery/shakespeare-tiny.tinygpt", b"ROMEO:\nWhat light through yonder window breaks?", 100)
VALIDATION_BYTES = 24400  # 2440 validation bytes: 37 windows of 64+1, two batches of 16 and a short one


def greedy_sample(config: model.GPTConfig, params: dict, prompt: bytes, n: int) -> dict:
    """model.generate at temperature 0, with the smallest gap between the best and second-best
    logit over its choices: ties would make greedy decoding implementation-defined, and the gap
    says how close the nearest one is."""
    tokens, margins, start = list(prompt), [], 0
    for _ in range(n):
        start = model.window_start(start, len(tokens), config.block_size)
        logits = model.next_logits(config, params, tokens[start:]).astype(np.float64)
        top2 = np.sort(logits)[-2:]
        margins.append(top2[1] - top2[0])
        tokens.append(int(np.argmax(logits)))
    assert tokens[len(prompt):] == model.generate(config, params, prompt, n, temperature=0)
    return {"prompt": list(prompt), "max_new_tokens": n, "tokens": tokens[len(prompt):], "min_margin": float(min(margins))}


def reference_run(config: model.GPTConfig, train: TrainConfig, steps: int, data_seed: int) -> tuple[dict, Trainer]:
    """`steps` reference steps at a constant lr on uniformly random tokens, for a test to replay on an
    engine: the config, the starting parameters, each step's batch and loss; and the trained Trainer."""
    init = model.init_params(config, train.seed)
    trainer = Trainer(config, train, {k: v.copy() for k, v in init.items()})
    rng = np.random.default_rng(data_seed)
    record = []
    for _ in range(steps):
        x, y = (rng.integers(0, config.vocab_size, (train.batch_size, config.block_size)) for _ in "xy")
        record.append({"x": x.ravel().tolist(), "y": y.ravel().tolist(), "lr": train.lr,
                       "loss": trainer.train_step(x, y, train.lr)["loss"]})
    doc = {"config": config.to_dict(), "train": train.to_dict(), "init_params": model.flatten(init, config).tolist(),
           "steps": record}
    return doc, trainer


def kernel_cases(seed: int = 7) -> dict:
    """kernels.json's cases (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    flat = lambda a: base64.b64encode(np.asarray(a, np.float32).tobytes()).decode()  # noqa: E731
    matmul = []
    for M, N, K in MATMUL:
        a, b, bias, c0 = f32(M, K), f32(K, N), f32(N), f32(M, N)
        matmul.append({"M": M, "N": N, "K": K, "a": flat(a), "b": flat(b), "bias": flat(bias), "c0": flat(c0),
                       "ab": flat(a.astype(np.float64) @ b)})
    return {"matmul": matmul}


def write(folder: Path) -> None:
    """Every case as folder/<name>.json."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (config, train, steps, data_seed) in CASES.items():
        doc, trainer = reference_run(config, train, steps, data_seed)
        doc["prompt"] = PROMPT
        doc["logits"] = model.next_logits(config, trainer.params, PROMPT).tolist()
        doc["l2"] = {k: float(np.linalg.norm(v.astype(np.float64))) for k, v in trainer.params.items()}
        (folder / f"{name}.json").write_text(json.dumps(doc))
    logits = np.random.default_rng(3).normal(0, 1, 256).astype(np.float32)
    kept = np.flatnonzero(model.draw_weights(logits, TOP_P["temperature"], TOP_P["top_k"], TOP_P["top_p"])).tolist()
    (folder / "top_p.json").write_text(json.dumps({"logits": logits.tolist(), **TOP_P, "kept": kept}))
    (folder / "kernels.json").write_text(json.dumps(kernel_cases()))
    path, prompt, n = SAMPLE
    ck = checkpoint.load(ROOT / path)
    (folder / "sample.json").write_text(json.dumps({"model": path, **greedy_sample(ck.config, ck.params, prompt, n)}))
    corpus = b"".join(p.read_bytes() for p in sorted((ROOT / "content" / "docs").glob("*.md")))[:VALIDATION_BYTES]
    count = len(validation_starts(len(split(corpus)[1]), ck.config.block_size))
    assert len(corpus) == VALIDATION_BYTES and count % ck.trainer["config"]["batch_size"], "the docs no longer give a short last batch"
    (folder / "validation.json").write_text(json.dumps({"model": path, "corpus": base64.b64encode(corpus).decode(), "windows": count,
                                                        "loss": validation_loss(ck.config, ck.params, corpus)}))
