"""The WebAssembly CPU backend in Node: compile cpu.wasm with asc exactly as the
site build does, bundle webapp/cpu/test/*.test.ts with esbuild, run `node --test`.
The Node tests check golden parity with tests/fixtures/golden_tiny.json, parity
with the numpy reference on an odd-shaped model written here (every kernel's
remainder paths), the getState round trip, micro-batching, two threads on
shared memory, the fallback to one thread, and bad input."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np

from tinygpt import model
from tinygpt.train import Trainer, TrainConfig

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "node_modules" / ".bin"


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True, timeout=300, **kw)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} exited {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def odd_reference(path: Path):
    """Three numpy-reference steps on a model whose sizes are no multiple of 8 or 16
    (rows, columns, sequence length) and whose head size is 20 (16 + 4 columns)."""
    config = model.GPTConfig(vocab_size=256, n_layer=2, n_embd=20, n_head=1, block_size=7)
    train = TrainConfig(batch_size=3, lr=3e-2, warmup_steps=0, seed=5)
    init = model.init_params(config, train.seed)
    trainer = Trainer(config, train, {k: v.copy() for k, v in init.items()})
    rng = np.random.default_rng(7)
    steps = []
    for _ in range(3):
        x, y = (rng.integers(0, 256, (train.batch_size, config.block_size)) for _ in "xy")
        steps.append({"x": x.ravel().tolist(), "y": y.ravel().tolist(), "lr": train.lr,
                      "loss": trainer.train_step(x, y, train.lr)["loss"]})
    prompt = [72, 105, 33, 10, 84]
    path.write_text(json.dumps({
        "config": config.to_dict(), "train": train.to_dict(), "init_params": model.flatten(init, config).tolist(),
        "steps": steps, "prompt": prompt, "logits": model.next_logits(config, trainer.params, prompt).tolist()}))


def test_cpu_backend_in_node(tmp_path):
    wasm = tmp_path / "cpu.wasm"
    run([BIN / "asc", "--config", "webapp/cpu/asconfig.json", "--target", "release", "--outFile", wasm])
    tests = sorted((ROOT / "webapp" / "cpu" / "test").glob("*.test.ts"))
    assert tests, "no webapp/cpu/test/*.test.ts found"
    run([BIN / "esbuild", *tests, ROOT / "webapp/cpu/test/thread_worker.ts", "--bundle", "--platform=node", "--format=esm",
         f"--outdir={tmp_path}", "--out-extension:.js=.mjs", "--log-level=warning"])
    odd_reference(tmp_path / "odd.json")
    bundles = sorted(tmp_path.glob("*.test.mjs"))
    run(["node", "--test", *bundles], env={**os.environ, "TINYGPT_CPU_WASM": str(wasm), "TINYGPT_CPU_ODD": str(tmp_path / "odd.json")})
