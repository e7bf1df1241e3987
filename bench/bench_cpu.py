"""Training tokens/s on the CPU: the WebAssembly backend in Node (1..N threads)
beside the numpy reference and PyTorch CPU eager (when importable), same
preset configs, same machine. Writes content/data/train_cpu.json.

    python bench/bench_cpu.py                        # tiny,small; 1 and 2 threads
    python bench/bench_cpu.py --presets small --threads 1,2,4 --seconds 10
    python bench/bench_cpu.py --simd both            # the relaxed-SIMD and the plain build, side by side
    python bench/bench_cpu.py --build-only DIR       # compile + bundle the Node side into DIR
    python bench/bench_cpu.py --prebuilt DIR         # use DIR (a machine without node_modules)

cpu.wasm carries two builds of the kernels: plain SIMD, and relaxed SIMD (fused
multiply-add), which the backend uses where the engine has it and it passes the
numerics gate. Node 20 needs --experimental-wasm-relaxed-simd for it; this
script passes that flag when the node it runs knows it. Every WASM result says
which build ran ("simd": "relaxed" or "plain").

The ratio reported is WASM tokens/s over PyTorch tokens/s at the same thread
count, for each SIMD build measured.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from machine import cpu_name  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "content" / "data" / "train_cpu.json"


def build(dest: Path):
    from tinygpt.build.bundle import compile_cpu_wasm
    bin_ = ROOT / "node_modules" / ".bin"
    dest.mkdir(parents=True, exist_ok=True)
    compile_cpu_wasm(ROOT, dest / "cpu.wasm")
    for src, name in (("bench/cpu_node.ts", "cpu_node.mjs"), ("bench/cpu_curve.ts", "cpu_curve.mjs"),
                      ("webapp/cpu/test/thread_worker.ts", "thread_worker.mjs")):
        subprocess.run([bin_ / "esbuild", src, "--bundle", "--platform=node", "--format=esm", f"--outfile={dest / name}",
                        "--log-level=warning"], cwd=ROOT, check=True)


RELAXED_FLAG = "--experimental-wasm-relaxed-simd"


def node_flags(node: str) -> list[str]:
    """The flag that turns relaxed SIMD on, for a node that has it behind one (Node 20)."""
    options = subprocess.run([node, "--v8-options"], capture_output=True, text=True).stdout
    return [RELAXED_FLAG] if RELAXED_FLAG in options else []


def bench_wasm(built: Path, presets: list[str], threads: list[int], seconds: float, node: str, simd: str,
               spin_ms: float | None) -> list[dict]:
    cmd = [node, *node_flags(node), built / "cpu_node.mjs", built / "cpu.wasm", str(seconds), ",".join(presets),
           ",".join(map(str, threads)), simd, *([] if spin_ms is None else [str(spin_ms)])]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    return [{"backend": "wasm", "preset": r["preset"], "threads": r["threads"], "simd": r["simd"], "tokens_per_s": r["tokens_per_s"],
             "seconds_per_step": r["seconds_per_step"]} for r in json.loads(out.stdout)]


def timed(step, n_tokens: int, seconds: float) -> dict:
    step()  # warm-up
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or steps < 2:
        step()
        steps += 1
    elapsed = time.perf_counter() - start
    return {"tokens_per_s": steps * n_tokens / elapsed, "seconds_per_step": elapsed / steps}


def batch(preset_id: str):
    import numpy as np
    from tinygpt.facts import preset
    p = preset(preset_id)
    n = p["batch_size"] * p["block_size"]
    x = (np.arange(n) * 7919 % 256).reshape(p["batch_size"], p["block_size"])
    y = (np.arange(n) * 104729 % 256).reshape(p["batch_size"], p["block_size"])
    return x, y, n


def bench_numpy_bounded(preset_id: str, seconds: float, limit: float) -> dict | None:
    """The numpy reference in a child process, given up after `limit` seconds (it is slow on big presets)."""
    code = f"import json, bench_cpu; print(json.dumps(bench_cpu.bench_numpy({preset_id!r}, {seconds})))"
    try:
        out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent, check=True, stdout=subprocess.PIPE, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        print(f"numpy {preset_id}: gave up after {limit:.0f} s", file=sys.stderr)
        return None
    return json.loads(out.stdout)


def bench_numpy(preset_id: str, seconds: float) -> dict:
    from tinygpt import model
    from tinygpt.train import Trainer, TrainConfig
    trainer = Trainer(model.GPTConfig.from_preset(preset_id), TrainConfig.from_preset(preset_id))
    x, y, n = batch(preset_id)
    return timed(lambda: trainer.train_step(x, y), n, seconds)


def bench_torch(preset_id: str, threads: int, seconds: float) -> dict:
    """The same model, initialisation and step in PyTorch eager (tinygpt/torch_model.py)."""
    import torch
    from tinygpt import model
    from tinygpt.torch_model import torch_loss
    from tinygpt.train import TrainConfig
    torch.set_num_threads(threads)
    cfg, tc = model.GPTConfig.from_preset(preset_id), TrainConfig.from_preset(preset_id)
    params = {k: torch.tensor(v, requires_grad=True) for k, v in model.init_params(cfg, tc.seed).items()}

    decay = [p for p in params.values() if p.ndim == 2]
    rest = [p for p in params.values() if p.ndim != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=tc.eps)
    x, y, n = batch(preset_id)
    x, y = torch.tensor(x), torch.tensor(y)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch_loss(cfg, params, x, y)[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), tc.grad_clip)
        opt.step()

    return timed(step, n, seconds)




def plot_fields(doc: dict) -> dict:
    """The speedup page's view (tinygpt/build/plots.py) of a finished run: tokens/s per preset and backend."""
    def label(r):
        if r["backend"] == "numpy":
            return "numpy reference (BLAS threads)"
        if r["backend"] == "wasm":
            name = f"WebAssembly ({'relaxed SIMD' if r['simd'] == 'relaxed' else 'SIMD'})"
        else:
            name = "PyTorch eager"
        return f"{name}, {r['threads']} thread{'s' if r['threads'] > 1 else ''}"
    series = {}
    for r in doc["results"]:
        series.setdefault(label(r), []).append({"x": r["preset"], "y": round(r["tokens_per_s"], 1)})
    hw = doc["hardware"]
    return {
        "hardware": f"{hw['cpu']} ({hw['logical_cpus']} logical CPUs)" + (f"; {doc['note']}" if doc["note"] else ""),
        "x_label": "preset",
        "series": [{"name": name, "unit": "tokens/s", "points": points} for name, points in series.items()],
        "rows": [{"preset": r["preset"], "threads": r["threads"], "SIMD": r["simd"], "WASM / PyTorch": round(r["wasm_over_torch"], 3)}
                 for r in doc["ratios"]],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="tiny,small")
    ap.add_argument("--threads", default="1,2", help="thread counts for WASM and PyTorch (numpy uses its BLAS default)")
    ap.add_argument("--seconds", type=float, default=6.0, help="timed seconds per case (at least 2 steps)")
    ap.add_argument("--build-only", type=Path, metavar="DIR")
    ap.add_argument("--prebuilt", type=Path, metavar="DIR")
    ap.add_argument("--node", default="node")
    ap.add_argument("--simd", choices=("auto", "plain", "both"), default="auto",
                    help="auto: what the app runs (relaxed where available and gated in); plain: the plain build only; both")
    ap.add_argument("--spin-ms", type=float, help="how long idle threads spin before sleeping (webapp/cpu/threads.ts)")
    ap.add_argument("--numpy-presets", help="presets to time the (slow) numpy reference on; default: all of --presets, 'none' for none")
    ap.add_argument("--note", default="", help="where and how it ran, kept in the JSON")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if args.build_only:
        build(args.build_only)
        return
    presets = args.presets.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    numpy_presets = (args.numpy_presets or args.presets).split(",")

    with tempfile.TemporaryDirectory() as tmp:
        built = args.prebuilt or Path(tmp)
        if not args.prebuilt:
            build(built)
        results = bench_wasm(built, presets, threads, args.seconds, args.node, args.simd, args.spin_ms)
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
        print("PyTorch is not importable here: no PyTorch figures, no ratio", file=sys.stderr)
    for preset_id in presets:
        if preset_id in numpy_presets and (r := bench_numpy_bounded(preset_id, args.seconds, 60 + 10 * args.seconds)):
            results.append({"backend": "numpy", "preset": preset_id, "threads": None, **r})
        if torch_version:
            for t in threads:
                results.append({"backend": "torch", "preset": preset_id, "threads": t, **bench_torch(preset_id, t, args.seconds)})
                print(f"torch {preset_id} {t} threads: {results[-1]['tokens_per_s']:.0f} tok/s", file=sys.stderr)
    ratios = []
    for r in results:
        if r["backend"] == "torch":
            for w in results:
                if w["backend"] == "wasm" and w["preset"] == r["preset"] and w["threads"] == r["threads"]:
                    ratios.append({"preset": r["preset"], "threads": r["threads"], "simd": w["simd"],
                                   "wasm_over_torch": w["tokens_per_s"] / r["tokens_per_s"]})
    for r in results:
        simd = f" ({r['simd']} SIMD)" if r["backend"] == "wasm" else ""
        print(f"{r['backend']:6} {r['preset']:7} threads={str(r['threads'] or 'blas'):4} {r['tokens_per_s']:10.0f} tok/s{simd}")
    for r in ratios:
        print(f"ratio  {r['preset']:7} threads={r['threads']:<4} wasm/torch = {r['wasm_over_torch']:.2f} ({r['simd']} SIMD)")
    node_version = subprocess.run([args.node, "--version"], capture_output=True, text=True).stdout.strip()
    doc = {
        "benchmark": "train_cpu",
        "title": "Training speed on the CPU: WebAssembly backend, numpy reference, PyTorch eager",
        "command": "python bench/bench_cpu.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hardware": {"cpu": cpu_name(), "logical_cpus": os.cpu_count(), "machine": platform.machine()},
        "note": args.note,
        "software": {"node": node_version, "node_flags": node_flags(args.node), "python": platform.python_version(), "torch": torch_version},
        "wasm_simd": args.simd,
        "results": results,
        "ratios": ratios,
    }
    doc.update(plot_fields(doc))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
