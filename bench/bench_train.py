"""Training throughput of the WebGPU backend (Node + Dawn, the code users run)
beside PyTorch eager fp32 (TF32 off) training the same model on the same GPU.

    python bench/bench_train.py                      # bundle the CLI, all presets, write content/data/train_gpu.json
    python bench/bench_train.py --presets huge --steps 20 --node /tmp/node --no-bundle --out $OUT/train_gpu.json

Tokens/s counts batch_size * block_size tokens per optimizer step, timed after
a few warm-up steps. PyTorch runs only where torch with CUDA is importable; the
ratio is WebGPU / PyTorch.
"""
import argparse
import json
import math
import platform
import subprocess
import sys
import sysconfig
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tinygpt import model  # noqa: E402
from tinygpt.site_build.node import build_cli, dawn_env  # noqa: E402
from tinygpt.facts import FACTS, preset  # noqa: E402
from machine import cuda_torch  # noqa: E402

CLI = ROOT / "dist-cli" / "train.js"
WARMUP = 3


def corpus(path: Path, size: int = 4 << 20) -> Path:
    """Python standard-library sources (one of the app's corpora), present wherever Python is."""
    out = bytearray()
    for f in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        out += f.read_bytes()
        if len(out) >= size:
            break
    path.write_bytes(bytes(out[:size]))
    return path


def webgpu(node: str, preset_id: str, steps: int, text: Path, tmp: Path) -> dict:
    stats = tmp / f"{preset_id}.json"
    cmd = [node, str(CLI), "--preset", preset_id, "--corpus", str(text), "--steps", str(steps), "--out",
           str(tmp / f"{preset_id}.tinygpt"), "--eval-every", "0", "--stats", str(stats), "--quiet", "--profile"]
    run = subprocess.run(cmd, cwd=ROOT, env=dawn_env(), capture_output=True, text=True, timeout=400)
    if run.returncode != 0:
        return {"error": (run.stdout + run.stderr)[-2000:]}
    return json.loads(stats.read_text())


def torch_eager(preset_id: str, steps: int, text: Path) -> dict | None:
    """The same model, initialisation and step in PyTorch eager (tests/oracles/torch_model.py)."""
    torch = cuda_torch()
    if torch is None:
        return None
    from tests.oracles.torch_model import adamw, torch_loss
    from tinygpt.train import TrainConfig
    config, tc = model.GPTConfig.from_preset(preset_id), TrainConfig.from_preset(preset_id)
    B, T = tc.batch_size, config.block_size
    dev = torch.device("cuda")
    P = {k: torch.tensor(v, device=dev, requires_grad=True) for k, v in model.init_params(config, tc.seed).items()}
    params = list(P.values())
    opt = adamw(params, tc)
    data = torch.frombuffer(bytearray(text.read_bytes()), dtype=torch.uint8).to(dev).long()
    gen = torch.Generator(device=dev).manual_seed(0)

    def step():
        starts = torch.randint(0, len(data) - T - 1, (B,), device=dev, generator=gen)
        rows = starts[:, None] + torch.arange(T + 1, device=dev)
        chunk = data[rows]
        loss = torch_loss(config, P, chunk[:, :-1], chunk[:, 1:])[1]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, tc.grad_clip)
        opt.step()
        return loss

    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    return {"tokens_per_s": steps * B * T / elapsed, "ms_per_step": 1000 * elapsed / steps, "final_loss": loss.item(),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__}


def plot_fields(doc: dict) -> dict:
    """The speedup page's view (tinygpt/site_build/plots.py) of a finished run."""
    rows = doc["results"]
    def points(key):
        return [{"x": r["preset"], "y": round(r[key]["tokens_per_s"], 1)} for r in rows if r[key] and "tokens_per_s" in r[key]]
    return {
        "hardware": f"{doc['gpu']} (WebGPU adapter: {doc['webgpu_adapter']})",
        "x_label": "preset",
        "series": [
            {"name": "WebGPU backend (Dawn in Node)", "unit": "tokens/s", "points": points("webgpu")},
            {"name": "PyTorch eager fp32", "unit": "tokens/s", "points": points("pytorch_eager_fp32")},
            {"name": "WebGPU / PyTorch", "unit": "ratio", "points": [{"x": r["preset"], "y": round(r["ratio"], 3)} for r in rows if "ratio" in r]},
        ],
        "rows": [{"preset": r["preset"], "params": r["params"], "WebGPU ms/step": round(r["webgpu"]["ms_per_step"], 2)} for r in rows if "ms_per_step" in r["webgpu"]],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default=",".join(p["id"] for p in FACTS["presets"]))
    ap.add_argument("--steps", type=int, default=30, help="timed steps per preset (after %d warm-up steps)" % WARMUP)
    ap.add_argument("--node", default="node")
    ap.add_argument("--no-bundle", action="store_true", help="use the existing dist-cli/train.js (python build.py cli)")
    ap.add_argument("--out", type=Path, default=ROOT / "content" / "data" / "train_gpu.json")
    args = ap.parse_args()
    if not args.no_bundle:
        build_cli(ROOT)
    results = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        text = corpus(tmp / "corpus.txt")
        for pid in args.presets.split(","):
            p = preset(pid)
            row = {"preset": pid, "params": model.param_count(model.GPTConfig.from_preset(pid)), "batch_size": p["batch_size"], "block_size": p["block_size"]}
            gpu = webgpu(args.node, pid, args.steps + WARMUP, text, tmp)
            row["webgpu"] = gpu
            try:
                ref = torch_eager(pid, args.steps, text)
            except Exception as e:  # a failed baseline is reported, not fatal to the WebGPU figures
                ref = {"error": f"{type(e).__name__}: {e}"}
            row["pytorch_eager_fp32"] = ref
            if ref and "tokens_per_s" in ref and "tokens_per_s" in gpu:
                row["ratio"] = gpu["tokens_per_s"] / ref["tokens_per_s"]
            results.append(row)
            tok = gpu.get("tokens_per_s", math.nan)
            line = f"{pid:7s} webgpu {tok:12.0f} tok/s"
            if "ratio" in row:
                line += f"   pytorch {ref['tokens_per_s']:12.0f} tok/s   ratio {row['ratio']:.3f}"
            for r in (gpu.get("profile") or [])[:8]:
                line += f"\n    {r['ms']:8.2f} ms {r['dispatches']:3d} x {r['op']} ({r['workgroups']} wg)"
            for side, r in (("webgpu", gpu), ("pytorch", ref)):
                if r and "error" in r:
                    line += f"\n  {side} error: {r['error']}"
            print(line, flush=True)
    out = {
        "benchmark": "train_gpu",
        "title": "Training speed on the GPU: WebGPU backend vs PyTorch eager fp32 (TF32 off)",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": {"machine": platform.machine(), "system": platform.platform(), "python": platform.python_version()},
        "gpu": next((r["pytorch_eager_fp32"]["device"] for r in results if r["pytorch_eager_fp32"] and "device" in r["pytorch_eager_fp32"]), None),
        "webgpu_adapter": next((r["webgpu"]["device"] for r in results if "device" in r["webgpu"]), None),
        "steps": args.steps, "warmup_steps": WARMUP,
        "command": "python bench/bench_train.py " + " ".join(sys.argv[1:]),
        "results": results,
    }
    out.update(plot_fields(out))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
