"""Training tokens/s on the CPU: the WebAssembly backend in Node (1..N threads)
beside the numpy reference and PyTorch CPU eager (when importable), same
preset configs, same machine. Writes content/data/train_cpu.json (or --out;
the file's name is the result's id on the speedup page).

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
count, for each SIMD build measured. Shared and cloud hosts change speed from
minute to minute (we saw one run 20% slower than the next), which skews a ratio
of two runs taken far apart; so each (preset, threads) case runs WASM and then
PyTorch back to back, the whole set is repeated --rounds times, and each figure
is the median over rounds: tokens/s of each backend, and the ratio of each
round's back-to-back pair.
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from machine import cpu_name  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tinygpt.site_build.node import node_bundle, relaxed_simd_flags  # noqa: E402

OUT = ROOT / "content" / "data" / "train_cpu.json"


def build(dest: Path):
    from tinygpt.site_build.bundle import compile_cpu_wasm
    dest.mkdir(parents=True, exist_ok=True)
    compile_cpu_wasm(ROOT, dest / "cpu.wasm")
    node_bundle(ROOT, ["bench/cpu_node.ts", "webapp/cpu/test/thread_worker.ts"], dest)


def bench_wasm(built: Path, preset_id: str, threads: int, seconds: float, node: list[str], simd: str,
               spin_ms: float | None) -> list[dict]:
    """node: the node binary and its flags (node_flags)."""
    cmd = [*node, built / "cpu_node.mjs", built / "cpu.wasm", str(seconds), preset_id,
           str(threads), simd, *([] if spin_ms is None else [str(spin_ms)])]
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
    """The same model, initialisation and step in PyTorch eager (tests/oracles/torch_model.py)."""
    import torch
    from tinygpt import model
    from tests.oracles.torch_model import adamw, torch_loss
    from tinygpt.train import TrainConfig
    torch.set_num_threads(threads)
    cfg, tc = model.GPTConfig.from_preset(preset_id), TrainConfig.from_preset(preset_id)
    params = {k: torch.tensor(v, requires_grad=True) for k, v in model.init_params(cfg, tc.seed).items()}

    opt = adamw(params.values(), tc)
    x, y, n = batch(preset_id)
    x, y = torch.tensor(x), torch.tensor(y)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch_loss(cfg, params, x, y)[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), tc.grad_clip)
        opt.step()

    return timed(step, n, seconds)


def summarise(runs: list[tuple[int, dict]]) -> tuple[list[dict], list[dict]]:
    """Per-round results -> (one result per case, its tokens/s the median over rounds; the WASM/PyTorch
    ratios, each the median of the rounds' back-to-back ratios)."""
    def key(r):
        return r["backend"], r["preset"], r["threads"], r.get("simd")
    cases = {}
    for _, r in runs:
        cases.setdefault(key(r), []).append(r)
    results = []
    for (backend, preset_id, threads, simd), rs in cases.items():
        tps = [r["tokens_per_s"] for r in rs]
        results.append({"backend": backend, "preset": preset_id, "threads": threads, **({"simd": simd} if simd else {}),
                        "tokens_per_s": statistics.median(tps),
                        "seconds_per_step": statistics.median(r["seconds_per_step"] for r in rs), "rounds": tps})
    torch_at = {(i, r["preset"], r["threads"]): r["tokens_per_s"] for i, r in runs if r["backend"] == "torch"}
    paired = {}
    for i, r in runs:
        if r["backend"] == "wasm" and (i, r["preset"], r["threads"]) in torch_at:
            paired.setdefault((r["preset"], r["threads"], r["simd"]), []).append(
                r["tokens_per_s"] / torch_at[(i, r["preset"], r["threads"])])
    ratios = [{"preset": p, "threads": t, "simd": simd, "wasm_over_torch": statistics.median(rs), "rounds": rs}
              for (p, t, simd), rs in paired.items()]
    return results, ratios


def plot_fields(doc: dict) -> dict:
    """The speedup page's view (tinygpt/site_build/plots.py) of a finished run: tokens/s per preset and backend."""
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
    ap.add_argument("--seconds", type=float, default=6.0, help="timed seconds per case and round (at least 2 steps)")
    ap.add_argument("--rounds", type=int, default=3, help="times every case runs; figures are medians over rounds")
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

    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
        print("PyTorch is not importable here: no PyTorch figures, no ratio", file=sys.stderr)
    node = [args.node, *relaxed_simd_flags(args.node)]
    runs = []  # (round, result)
    with tempfile.TemporaryDirectory() as tmp:
        built = args.prebuilt or Path(tmp)
        if not args.prebuilt:
            build(built)
        for round_ in range(args.rounds):
            print(f"round {round_ + 1} of {args.rounds}", file=sys.stderr)
            for preset_id in presets:
                for t in threads:
                    runs += [(round_, r) for r in bench_wasm(built, preset_id, t, args.seconds, node, args.simd, args.spin_ms)]
                    if torch_version:
                        runs.append((round_, {"backend": "torch", "preset": preset_id, "threads": t,
                                              **bench_torch(preset_id, t, args.seconds)}))
                        print(f"torch {preset_id} {t} threads: {runs[-1][1]['tokens_per_s']:.0f} tok/s", file=sys.stderr)
    results, ratios = summarise(runs)
    for preset_id in presets:
        if preset_id in numpy_presets and (r := bench_numpy_bounded(preset_id, args.seconds, 60 + 10 * args.seconds)):
            results.append({"backend": "numpy", "preset": preset_id, "threads": None, **r})
    for r in results:
        simd = f" ({r['simd']} SIMD)" if r["backend"] == "wasm" else ""
        print(f"{r['backend']:6} {r['preset']:7} threads={str(r['threads'] or 'blas'):4} {r['tokens_per_s']:10.0f} tok/s{simd}")
    for r in ratios:
        rounds = ", ".join(f"{x:.2f}" for x in r["rounds"])
        print(f"ratio  {r['preset']:7} threads={r['threads']:<4} wasm/torch = {r['wasm_over_torch']:.2f} ({r['simd']} SIMD; rounds {rounds})")
    node_version = subprocess.run([args.node, "--version"], capture_output=True, text=True).stdout.strip()
    doc = {
        "benchmark": args.out.stem,
        "title": "Training speed on the CPU: WebAssembly backend, numpy reference, PyTorch eager"
                 + (f" ({args.note})" if args.note else ""),
        "command": "python bench/bench_cpu.py " + shlex.join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hardware": {"cpu": cpu_name(), "logical_cpus": os.cpu_count(), "machine": platform.machine()},
        "note": args.note,
        "software": {"node": node_version, "node_flags": node[1:], "python": platform.python_version(), "torch": torch_version},
        "wasm_simd": args.simd,
        "rounds": args.rounds,
        "results": results,
        "ratios": ratios,
    }
    doc.update(plot_fields(doc))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
