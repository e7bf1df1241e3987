"""Training speed of the reference on this machine's CPU: numpy, and PyTorch eager fp32 if importable.

    python bench/bench_reference.py [--presets tiny,small] [--min-seconds 3]

For each preset, full training steps (forward, backward, clipping, AdamW) on
random batches of the preset's batch_size x block_size tokens, repeated until
min-seconds have passed (at least one step; one untimed warm-up step where a
step is quick). Prints tokens/s and writes content/data/reference_cpu.json,
in the speedup page's plot shape (tinygpt/site_build/plots.py); each machine (by CPU
model and core count) keeps its own entry in "runs", so runs on different
hosts add up instead of overwriting each other.
"""
import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tinygpt import model  # noqa: E402
from tinygpt.facts import FACTS  # noqa: E402
from tinygpt.train import Trainer, TrainConfig  # noqa: E402
from machine import cpu_name  # noqa: E402

OUT = ROOT / "content" / "data" / "reference_cpu.json"




def timed(step, min_seconds: float) -> tuple[int, float]:
    """(steps, seconds): one untimed warm-up when a step is quick, then steps until min_seconds."""
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    if first > min_seconds:
        return 1, first
    steps, t0 = 0, time.perf_counter()
    while steps == 0 or time.perf_counter() - t0 < min_seconds:
        step()
        steps += 1
    return steps, time.perf_counter() - t0


def bench_numpy(preset_id, config, batch, min_seconds):
    trainer = Trainer(config, TrainConfig.from_preset(preset_id))
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (batch, config.block_size))
    return timed(lambda: trainer.train_step(x, np.roll(x, -1, axis=1)), min_seconds)


def bench_torch(preset_id, config, batch, min_seconds):
    import torch

    from tests.oracles.torch_model import adamw, torch_loss

    tc = TrainConfig.from_preset(preset_id)
    P = {k: torch.tensor(v, requires_grad=True) for k, v in model.init_params(config, 0).items()}
    opt = adamw(P.values(), tc)
    x = torch.randint(0, 256, (batch, config.block_size))
    y = torch.roll(x, -1, dims=1)

    def step():
        opt.zero_grad()
        torch_loss(config, P, x, y)[1].backward()
        torch.nn.utils.clip_grad_norm_(list(P.values()), tc.grad_clip)
        opt.step()
    return timed(step, min_seconds)


def plot_shape(runs: list[dict]) -> dict:
    """The measured-results shape of tinygpt/site_build/plots.py (one bar group per preset,
    one series per machine and implementation), with the raw runs kept beside it."""
    def machine(r):
        return f"{r['host']['cpu']} x{r['host']['cores']}"
    series, rows = [], []
    for r in runs:
        for impl, label in (("numpy", "numpy reference"), ("torch", f"PyTorch {r['host']['torch']} eager fp32")):
            points = [{"x": row["preset"], "y": row[impl]["tokens_per_s"]} for row in r["results"] if impl in row]
            if points:
                series.append({"name": f"{label}, {machine(r)}", "unit": "tokens/s", "points": points})
            rows += [{"machine": machine(r), "implementation": label, "preset": row["preset"], "params": row["params"],
                      "tokens/step": row["batch_size"] * row["block_size"], "tokens/s": row[impl]["tokens_per_s"]}
                     for row in r["results"] if impl in row]
    return {
        "benchmark": "reference_cpu",
        "title": "Reference training speed on CPU",
        "hardware": "; ".join(f"{machine(r)} (numpy {r['host']['numpy']}, BLAS threads {r['host']['blas_threads']}, "
                              f"load {r['load_average_1m']})" for r in runs),
        "date": max(r["date"] for r in runs),
        "command": "python bench/bench_reference.py",
        "x_label": "preset",
        "series": series,
        "rows": rows,
        "notes": "Full training steps (forward, backward, clipping, AdamW) at each preset's batch and context, "
                 "float32. Shared machines: the load average is the other work running at the time.",
        "runs": runs,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default=",".join(p["id"] for p in FACTS["presets"]))
    ap.add_argument("--min-seconds", type=float, default=3.0)
    args = ap.parse_args()
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None

    results = []
    for preset_id in args.presets.split(","):
        config = model.GPTConfig.from_preset(preset_id)
        batch = next(p["batch_size"] for p in FACTS["presets"] if p["id"] == preset_id)
        tokens = batch * config.block_size
        row = {"preset": preset_id, "params": model.param_count(config), "batch_size": batch,
               "block_size": config.block_size}
        for name, fn in (("numpy", bench_numpy), ("torch", bench_torch if torch_version else None)):
            if fn is None:
                continue
            steps, seconds = fn(preset_id, config, batch, args.min_seconds)
            row[name] = {"tokens_per_s": round(tokens * steps / seconds, 1), "steps": steps,
                         "seconds": round(seconds, 3)}
            print(f"{preset_id:7s} {name:6s} {tokens * steps / seconds:10.0f} tokens/s  ({steps} steps, {seconds:.2f} s)",
                  flush=True)
        results.append(row)

    host = {"cpu": cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "torch": torch_version,
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default")}
    # Other work on the machine slows numpy's BLAS threads a lot: record how busy it was.
    entry = {"host": host, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "load_average_1m": round(os.getloadavg()[0], 2),
             "command": "python bench/bench_reference.py " + " ".join(sys.argv[1:]), "results": results}
    runs = json.loads(OUT.read_text())["runs"] if OUT.exists() else []
    runs = [r for r in runs if (r["host"]["cpu"], r["host"]["cores"]) != (host["cpu"], host["cores"])] + [entry]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(plot_shape(runs), indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
