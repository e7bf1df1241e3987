"""Training throughput of the WebGPU backend (Node + Dawn, the code users run)
on the plain f32 kernels, with each GPU lever alone and with the stack of those
that ran, beside PyTorch training the same model on the same GPU in the same
run: eager fp32 (TF32 off), eager TF32, and bf16 autocast (all with SDPA).

    python bench/bench_train.py                      # bundle the CLI, all presets, write content/data/train_gpu.json
    python bench/bench_train.py --presets huge --steps 20 --node /tmp/node --no-bundle --dawn-f16-toggle --out $OUT/train_gpu.json

Tokens/s counts batch_size * block_size tokens per optimizer step, timed after
a few warm-up steps. A lever this adapter lacks, or whose gate fails here, is
reported and left out of the stack. PyTorch runs only where torch with CUDA is
importable; the ratio is the app's path (the shipped levers that ran) / PyTorch eager fp32.
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
from lever_curves import GPU_LEVERS  # noqa: E402  (the levers that change training)

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


SHIPPED = {lever["id"] for lever in FACTS["levers"] if lever["status"] == "shipped"}
# PyTorch as its users run it: the fp32 yardstick, TF32 matmuls, bf16 autocast.
TORCH_MODES = {"pytorch_eager_fp32": "PyTorch eager fp32 (TF32 off)", "pytorch_tf32": "PyTorch TF32",
               "pytorch_bf16_autocast": "PyTorch bf16 autocast"}


def webgpu(node: str, preset_id: str, steps: int, text: Path, tmp: Path, levers: str, toggle: bool) -> dict:
    """The CLI's stats for one run with `levers` (a --levers value), or the error it stopped with."""
    stats = tmp / f"{preset_id}-{levers}.json"
    cmd = [node, str(CLI), "--preset", preset_id, "--corpus", str(text), "--steps", str(steps), "--out",
           str(tmp / f"{preset_id}.tinygpt"), "--eval-every", "0", "--stats", str(stats), "--quiet", "--profile",
           "--levers", levers, *(["--dawn-f16-toggle"] if toggle else [])]
    run = subprocess.run(cmd, cwd=ROOT, env=dawn_env(), capture_output=True, text=True, timeout=400)
    if run.returncode != 0:
        return {"error": (run.stdout + run.stderr)[-2000:]}
    return json.loads(stats.read_text())


def torch_run(preset_id: str, steps: int, text: Path, mode: str) -> dict | None:
    """The same model, initialisation and step in PyTorch eager (tests/oracles/torch_model.py), in `mode` (TORCH_MODES)."""
    torch = cuda_torch()
    if torch is None:
        return None
    tf32 = mode == "pytorch_tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
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
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "pytorch_bf16_autocast"):
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
    cuda_torch()  # the fp32 yardstick's settings back for whatever runs next
    return {"tokens_per_s": steps * B * T / elapsed, "ms_per_step": 1000 * elapsed / steps, "final_loss": loss.item(),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__}


# A profiled step's op families, by the op's name: the rest are LayerNorm, GELU, the split and
# bias sums, the embeddings, the loss and the optimizer.
FAMILIES = {"matmuls": "matmul_", "attention": "attention_"}
REST = "the rest"


def families(profile: list[dict]) -> dict[str, float]:
    """GPU ms of one profiled step (train --profile) by op family."""
    ms = dict.fromkeys([*FAMILIES, REST], 0.0)
    for r in profile:
        ms[next((f for f, prefix in FAMILIES.items() if r["op"].startswith(prefix)), REST)] += r["ms"]
    return ms


def plot_fields(doc: dict) -> dict:
    """The speedup page's view (tinygpt/site_build/plots.py) of a finished run."""
    rows = doc["results"]
    def points(side, key):
        return [{"x": r["preset"], "y": round(r[side][key]["tokens_per_s"], 1)} for r in rows
                if (r[side].get(key) or {}).get("tokens_per_s")]
    def profiled(path, family):
        return [{"x": r["preset"], "y": round(families(g["profile"])[family], 2)} for r in rows
                if (g := r["webgpu"].get(path(r)) or {}).get("profile")]
    configs = list(dict.fromkeys(k for r in rows for k in r["webgpu"]))
    series = [
        *({"name": f"WebGPU, {label(c)}", "unit": "tokens/s", "points": points("webgpu", c)} for c in configs),
        *({"name": name, "unit": "tokens/s", "points": points("pytorch", mode)} for mode, name in TORCH_MODES.items()),
        {"name": "WebGPU, the app's path / PyTorch eager fp32", "unit": "ratio", "points": [{"x": r["preset"], "y": round(r["ratio"], 3)} for r in rows if "ratio" in r]},
        *({"name": f"{who}: {family}", "unit": "GPU ms a step", "points": profiled(path, family)}
          for who, path in (("plain f32", lambda r: "none"), ("the app's path", lambda r: r.get("app"))) for family in [*FAMILIES, REST]),
    ]
    return {
        "hardware": f"{doc['gpu']} (WebGPU adapter: {doc['webgpu_adapter']})",
        "notes": "GPU ms a step: one more step after the timed ones, profiled dispatch by dispatch "
                 "(train --profile: GPU timestamps around each dispatch, each in a pass of its own, so "
                 "the families sum to more than the step takes), by op family.",
        "x_label": "preset",
        "series": [s for s in series if s["points"]],  # a lever that ran nowhere (its gate refused it) has none
        "rows": [{"preset": r["preset"], "params": r["params"],
                  **{f"{label(c)} ms/step": round(g["ms_per_step"], 2) for c, g in r["webgpu"].items() if "ms_per_step" in g},
                  **({"the app's path / plain": round(r["stack_speedup"], 3)} if "stack_speedup" in r else {})} for r in rows],
    }


def app_path(ran: list[str]) -> str:
    """The configuration the app runs: the shipped levers that ran (a --levers value)."""
    return ",".join(lever for lever in ran if lever in SHIPPED) or "none"


def label(config: str) -> str:
    return {"none": "plain f32"}.get(config, f"+{config}" if "," not in config else "stack (+" + ", +".join(config.split(",")) + ")")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="small,medium,huge")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per run (after %d warm-up steps)" % WARMUP)
    ap.add_argument("--levers", default=",".join(GPU_LEVERS), help="the GPU levers to run alone and stacked")
    ap.add_argument("--node", default="node")
    ap.add_argument("--dawn-f16-toggle", action="store_true", help="set Dawn's vulkan_enable_f16_on_nvidia (benchmark hosts only)")
    ap.add_argument("--no-bundle", action="store_true", help="use the existing dist-cli/train.js (python build.py cli)")
    ap.add_argument("--out", type=Path, default=ROOT / "content" / "data" / "train_gpu.json")
    args = ap.parse_args()
    if not args.no_bundle:
        build_cli(ROOT)
    levers = [lever for lever in args.levers.split(",") if lever]
    results = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        text = corpus(tmp / "corpus.txt")
        for pid in args.presets.split(","):
            p = preset(pid)
            row = {"preset": pid, "params": model.param_count(model.GPTConfig.from_preset(pid)), "batch_size": p["batch_size"],
                   "block_size": p["block_size"], "webgpu": {}, "pytorch": {}}
            run = lambda config: webgpu(args.node, pid, args.steps + WARMUP, text, tmp, config, args.dawn_f16_toggle)  # noqa: E731
            row["webgpu"]["none"] = run("none")
            for lever in levers:
                row["webgpu"][lever] = run(lever)
            ran = [lever for lever in levers if "tokens_per_s" in row["webgpu"][lever]]
            if len(ran) > 1:
                row["webgpu"][",".join(ran)] = run(",".join(ran))
            row["app"] = app_path(ran)
            if row["app"] not in row["webgpu"]:  # several shipped levers among others: their own run
                row["webgpu"][row["app"]] = run(row["app"])
            for mode in TORCH_MODES:
                try:
                    row["pytorch"][mode] = torch_run(pid, args.steps, text, mode)
                except Exception as e:  # a failed baseline is reported, not fatal to the WebGPU figures
                    row["pytorch"][mode] = {"error": f"{type(e).__name__}: {e}"}
            plain = row["webgpu"]["none"].get("tokens_per_s")
            stack = row["webgpu"][row["app"]].get("tokens_per_s")
            ref = (row["pytorch"]["pytorch_eager_fp32"] or {}).get("tokens_per_s")
            if plain and stack:
                row["stack_speedup"] = stack / plain
            if stack and ref:
                row["ratio"] = stack / ref
            results.append(row)
            for config, g in row["webgpu"].items():
                line = f"{pid:7s} webgpu {label(config):40s} " + (f"{g['tokens_per_s']:12.0f} tok/s" if "tokens_per_s" in g else "did not run: " + g.get("error", "?").strip().splitlines()[-1])
                if (config == "none" or "," in config) and g.get("profile"):
                    line += f"\n    profile ({g.get('profile_timing')} timing):"
                    for r in g["profile"][:8]:
                        line += f"\n    {r['ms']:8.2f} ms {r['dispatches']:3d} x {r['op']} ({r['workgroups']} wg)"
                print(line, flush=True)
            for mode, r in row["pytorch"].items():
                if r:
                    print(f"{pid:7s} {TORCH_MODES[mode]:47s} " + (f"{r['tokens_per_s']:12.0f} tok/s" if "tokens_per_s" in r else r["error"]), flush=True)
            if "stack_speedup" in row:
                print(f"{pid:7s} the app's path ({label(row['app'])}) / plain f32: {row['stack_speedup']:.3f}" + (f", / PyTorch eager fp32: {row['ratio']:.3f}" if "ratio" in row else ""), flush=True)
    first = lambda side, key: next((r[side][k][key] for r in results for k in r[side] if (r[side][k] or {}).get(key)), None)  # noqa: E731
    out = {
        "benchmark": "train_gpu",
        "title": "Training speed on the GPU: WebGPU backend, plain and with each lever, vs PyTorch",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": {"machine": platform.machine(), "system": platform.platform(), "python": platform.python_version()},
        "gpu": first("pytorch", "device"),
        "webgpu_adapter": first("webgpu", "device"),
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
