"""Matmul throughput: every WGSL matmul variant through wgpu-py on the adapter at hand, numpy's
matmul on the same machine's CPU, and cuBLAS (fp32 with TF32 off, TF32, and fp16 on the tensor
cores) where torch sees CUDA.

Each kernel is first checked against numpy (float64) on fresh random inputs, output poisoned
with NaN, at an odd shape and at the smallest timed size; a kernel that fails is not timed.
Times are GPU timestamps around one compute pass of many back-to-back dispatches (wall clock
when the adapter has no timestamp queries), median of several passes.

Writes content/data/matmul.json (or --out) in the shape tinygpt/site_build/plots.py documents and
prints a table with each figure's ratio to cuBLAS.

    python bench/bench_matmul.py                 # 1024^3, 2048^3, 4096^3 and the preset shapes
    python bench/bench_matmul.py --sizes 256 512 --no-presets   # a quick look on a CPU adapter
    python bench/bench_matmul.py --dawn          # also the engine's kernels through Dawn in Node

--dawn bundles bench/matmul_dawn.ts (the engine's kernel table, params and bind groups, through
Dawn as the web app's Node CLI runs them) and adds its series, "WGSL via Dawn: <kernel>", with the
presets' weight gradients (tn, cut along K as the graph cuts them) beside their layer shapes.
--lever <id> gates a GPU lever there and times its kernels beside the plain ones; --dawn-only
leaves out wgpu-py and numpy (a GPU host without wgpu-py):

    python bench/bench_matmul.py --dawn --dawn-only --lever coop-matrix --dawn-f16-toggle --node /tmp/node --no-bundle
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tinygpt.site_build.node import build_cli, dawn_env  # noqa: E402
from tinygpt.facts import FACTS  # noqa: E402
from machine import cpu_name, cuda_torch  # noqa: E402

VARIANTS = ROOT / "bench" / "matmul"
gpu = None  # tests.oracles.gpu, the wgpu-py runner: imported in main() unless --dawn-only
DAWN = ROOT / "dist-cli" / "matmul_dawn.js"


class Kernel:
    def __init__(self, name, shader, entry, tile, aligned=False, bias=True):
        self.name, self.shader, self.entry, self.tile, self.aligned = name, shader, entry, tile, aligned
        self.bias = bias  # whether the entry point declares binding 3
        # A module of shaders/ takes its tile as the override BLOCK; the old variants have theirs built in.
        self.constants = {} if isinstance(shader, Path) else {"BLOCK": tile}

    def bindings(self, a, b, c):
        return {1: a, 2: b, 4: c} | ({3: np.zeros(c.shape[-1], np.float32)} if self.bias else {})

    def operands(self, A, B):
        """A [M,K], B [K,N] as this entry point wants them stored."""
        if "_nt" in self.entry:
            return A, np.ascontiguousarray(B.T)
        if "_tn" in self.entry:
            return np.ascontiguousarray(A.T), B
        return A, B

    def groups(self, M, N):
        return (-(-N // self.tile), -(-M // self.tile), 1)


KERNELS = [
    Kernel("tiled16 (plain)", VARIANTS / "tiled16.wgsl", "matmul_nn", 16, bias=False),
    Kernel("reg8x8 (first cut)", VARIANTS / "reg8x8.wgsl", "matmul_nn", 128),
    *[Kernel(f"matmul {o}", "matmul", f"matmul_{o}", 128) for o in ("nn", "nt", "tn")],
    *[Kernel(f"matmul_vec4 {o}", "matmul_vec4", f"matmul_{o}", 128, aligned=True) for o in ("nn", "nt", "tn")],
    *[Kernel(f"matmul_vec4 {o}_64", "matmul_vec4", f"matmul_{o}", 64, aligned=True) for o in ("nn", "nt", "tn")],
]


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def rel_error(out, ref):
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref)) if np.isfinite(out).all() else float("inf")


def check(kernel, rng, M, N, K):
    A, B = randn(rng, M, K), randn(rng, K, N)
    a, b = kernel.operands(A, B)
    poison = np.full((M, N), np.nan, np.float32)
    out = gpu.run(kernel.shader, kernel.entry, dict(M=M, N=N, K=K, flags=0), kernel.bindings(a, b, poison),
                  kernel.groups(M, N), out=[4], constants=kernel.constants)[4].reshape(M, N)
    return rel_error(out, A.astype(np.float64) @ B)


def gpu_seconds(kernel, rng, M, N, K):
    a, b = kernel.operands(randn(rng, M, K), randn(rng, K, N))
    buffers = {0: gpu.uniform(kernel.shader, dict(M=M, N=N, K=K, flags=0))}
    buffers |= {i: gpu.upload(x) for i, x in kernel.bindings(a, b, np.zeros((M, N), np.float32)).items()}
    return gpu.seconds_per_dispatch(kernel.shader, kernel.entry, buffers, kernel.groups(M, N), constants=kernel.constants)


def numpy_seconds(rng, M, N, K):
    A, B = randn(rng, M, K), randn(rng, K, N)
    A @ B
    times = []
    for _ in range(3):
        start = time.perf_counter()
        A @ B
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# cuBLAS's modes: the series name, the operands' dtype, whether TF32 is on, and the error it must stay under.
CUBLAS = {"fp32": ("cuBLAS fp32 (TF32 off)", "float32", False, 1e-5), "tf32": ("cuBLAS TF32", "float32", True, 5e-3),
          "fp16": ("cuBLAS fp16 (tensor cores)", "float16", False, 5e-3)}


def cublas_seconds(torch, M, N, K, mode="fp32", passes=5, min_pass_s=0.05):
    _, dtype, tf32, tolerance = CUBLAS[mode]
    torch.backends.cuda.matmul.allow_tf32 = tf32
    A = torch.randn(M, K, device="cuda", dtype=getattr(torch, dtype))
    B = torch.randn(K, N, device="cuda", dtype=getattr(torch, dtype))
    out = A @ B
    ref = A.double() @ B.double()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < tolerance, f"cuBLAS {mode} error {err:.3g}" + (": is TF32 still on?" if mode == "fp32" else "")

    def one_pass(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            torch.matmul(A, B, out=out)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e-3 / reps

    one_pass(3)
    reps = max(3, min(1000, int(min_pass_s / max(one_pass(3), 1e-7))))
    seconds = statistics.median(one_pass(reps) for _ in range(passes))
    torch.backends.cuda.matmul.allow_tf32 = False
    return seconds


def dawn(node, shapes, flags):
    """The engine's matmul kernels through Dawn: {adapter, timing, results: [{series, op, label, seconds, ...}]}."""
    run = subprocess.run([node, str(DAWN), json.dumps(shapes), *flags], cwd=ROOT, env=dawn_env(), stdout=subprocess.PIPE, text=True, check=False)
    if run.returncode != 0:
        raise SystemExit(f"{DAWN.name} exited {run.returncode} (its stderr is above)")
    return json.loads(run.stdout)


def preset_shapes():
    """(label, M, N, K) of each preset's linear layers over one batch (M = batch_size * block_size)."""
    shapes = []
    for p in FACTS["presets"]:
        M, C = p["batch_size"] * p["block_size"], p["n_embd"]
        shapes += [(f"{p['id']} qkvo", M, C, C), (f"{p['id']} fc_in", M, 4 * C, C),
                   (f"{p['id']} fc_out", M, C, 4 * C), (f"{p['id']} head", M, FACTS["vocab_size"], C)]
    return shapes


def weight_gradient_shapes():
    """(label, M, N, K) of each preset's weight gradients over one batch (K = batch_size * block_size)."""
    shapes = []
    for p in FACTS["presets"]:
        rows, C = p["batch_size"] * p["block_size"], p["n_embd"]
        shapes += [(f"{p['id']} dW qkv", C, 3 * C, rows), (f"{p['id']} dW fc_in", C, 4 * C, rows), (f"{p['id']} dW fc_out", 4 * C, C, rows)]
    return shapes


def hardware(torch, dawn_run, gpu) -> str:
    cpu = cpu_name()
    parts = [f"WebGPU adapter: {gpu.describe()} via wgpu-py", f"CPU: {cpu} x{os.cpu_count()} (numpy)"] if gpu else []
    if dawn_run:
        parts.append(f"Dawn: {dawn_run['adapter']} (Node {dawn_run['node']}, {dawn_run['timing']})")
    if torch:
        parts.append(f"cuBLAS: {torch.cuda.get_device_name()} (torch {torch.__version__})")
    return "; ".join(parts)


def command_flags(argv):
    """The flags that change what is measured (not where the JSON goes)."""
    flags, skip = [], False
    for a in argv:
        if skip or a == "--out":
            skip = not skip
            continue
        flags.append(a)
    return flags


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096], help="square sizes M=N=K")
    ap.add_argument("--no-presets", action="store_true", help="skip the preset layer shapes")
    ap.add_argument("--kernels", nargs="+", help="only kernels whose name contains one of these")
    ap.add_argument("--dawn", action="store_true", help="also time the engine's kernels through Dawn in Node")
    ap.add_argument("--node", default="node", help="the Node binary for --dawn")
    ap.add_argument("--no-bundle", action="store_true", help="--dawn with the existing dist-cli/matmul_dawn.js (python build.py cli)")
    ap.add_argument("--dawn-only", action="store_true", help="--dawn and cuBLAS only: no wgpu-py, no numpy")
    ap.add_argument("--lever", help="--dawn: gate this GPU lever and time its kernels beside the plain ones")
    ap.add_argument("--dawn-f16-toggle", action="store_true", help="--dawn: Dawn's vulkan_enable_f16_on_nvidia (benchmark hosts only)")
    ap.add_argument("--out", type=Path, default=ROOT / "content" / "data" / "matmul.json")
    args = ap.parse_args(argv)
    if args.dawn_only and not args.dawn:
        ap.error("--dawn-only needs --dawn")
    global gpu
    if not args.dawn_only:
        from tests.oracles import gpu
    rng = np.random.default_rng(0)
    torch = cuda_torch()
    kernels = [] if args.dawn_only else [k for k in KERNELS if not args.kernels or any(s in k.name for s in args.kernels)]

    print(f"adapter: {gpu.describe() if gpu else 'not asked (--dawn-only)'}; cuBLAS: {'yes' if torch else 'no (torch with CUDA not importable)'}")
    good = []
    for k in kernels:
        odd = (132, 260, 68) if k.aligned else (37, 65, 100)
        errors = [check(k, rng, *odd), check(k, rng, *(3 * [min(args.sizes)]))]
        ok = max(errors) < 1e-5
        print(f"check {k.name:22s} rel err {max(errors):.2e} {'ok' if ok else 'FAILED: not timed'}")
        if ok:
            good.append(k)

    shapes = [(f"{n}^3", n, n, n) for n in args.sizes]
    if not args.no_presets:
        shapes += preset_shapes()
    # The weight gradients only through Dawn, where the engine's own kernel and split run them.
    gradients = weight_gradient_shapes() if args.dawn and not args.no_presets else []
    results = {}  # (series, label) -> GFLOP/s
    for label, M, N, K in shapes + gradients:
        flops = 2.0 * M * N * K
        square = label.endswith("^3")
        for mode in CUBLAS if torch else ():
            results[CUBLAS[mode][0], label] = flops / cublas_seconds(torch, M, N, K, mode) / 1e9
        if (label, M, N, K) in gradients:
            continue
        if square and gpu:
            results["numpy (CPU)", label] = flops / numpy_seconds(rng, M, N, K) / 1e9
        for k in good:
            if square or k.name != "tiled16 (plain)":
                results[k.name, label] = flops / gpu_seconds(k, rng, M, N, K) / 1e9
        line = "  ".join(f"{s}={v:,.0f}" for (s, lab), v in results.items() if lab == label)
        print(f"{label:14s} {line}", flush=True)

    dawn_run = None
    if args.dawn:
        if not args.no_bundle:
            build_cli(ROOT)
        flags = [*(["--lever", args.lever] if args.lever else []), *(["--dawn-f16-toggle"] if args.dawn_f16_toggle else [])]
        dawn_run = dawn(args.node, [*shapes, *([*g, ["tn"]] for g in gradients)], flags)
        dawn_run["node"] = subprocess.run([args.node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
        print(f"Dawn: {dawn_run['adapter']}; {dawn_run['timing']}; checked {', '.join(dawn_run['checked'])}")
        for r in dawn_run["results"]:
            results[f"WGSL via Dawn: {r['series']}", r["label"]] = r["gflops"]

    series_names = list(dict.fromkeys(s for s, _ in results))
    base = "cuBLAS fp32 (TF32 off)"
    rows = []
    print(f"\n{'kernel':34s} {'shape':14s} {'GFLOP/s':>10s} {'vs cuBLAS':>10s}")
    for label, M, N, K in shapes + gradients:
        for s in series_names:
            if (s, label) not in results:
                continue
            y = results[s, label]
            ratio = y / results[base, label] if (base, label) in results else None
            rows.append({"kernel": s, "shape": f"{label} ({M}x{N}x{K})" if not label.endswith("^3") else label,
                         "GFLOP/s": round(y, 1), "vs cuBLAS": f"{ratio:.1%}" if ratio else "n/a"})
            print(f"{s:34s} {label:14s} {y:10,.0f} {rows[-1]['vs cuBLAS']:>10s}")

    # The plot keeps the references and the A·B (nn) kernels; the table keeps every figure.
    plotted = [s for s in series_names if not s.endswith((" nt", " tn", " nt_64", " tn_64"))]
    series = [{"name": s, "unit": "GFLOP/s",
               "points": [{"x": n, "y": round(results[s, f"{n}^3"], 1)} for n in args.sizes if (s, f"{n}^3") in results]}
              for s in plotted]
    summary = []
    for n in args.sizes:
        wgsl = {s: v for (s, lab), v in results.items()
                if lab == f"{n}^3" and (s in {k.name for k in good} or s.startswith("WGSL via Dawn"))}
        if wgsl:
            best = max(wgsl, key=wgsl.get)
            ratio = f" = {wgsl[best] / results[base, f'{n}^3']:.1%} of cuBLAS" if (base, f"{n}^3") in results else ""
            name = f"{best.removeprefix('WGSL via Dawn: ')} via Dawn" if best.startswith("WGSL via Dawn") else best
            summary.append(f"{n}^3: best WGSL: {name}, {wgsl[best]:,.0f} GFLOP/s{ratio}")
    print("\n" + "\n".join(summary))
    data = {
        "benchmark": "matmul",
        "title": ("matmul throughput" if args.lever else "f32 matmul throughput") + (", the engine's kernels through Dawn" if args.dawn else ""),
        "hardware": hardware(torch, dawn_run, gpu),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python bench/bench_matmul.py", *command_flags(argv if argv is not None else sys.argv[1:])]),
        "x_label": "M = N = K",
        "series": [s for s in series if s["points"]],
        "rows": rows,
        "notes": "C = A·B in f32" + (f" (the {args.lever} lever's kernels: their own precision)" if args.lever else "") + ". "
                 + ("" if args.dawn_only else "WGSL kernels through wgpu-py (naga to SPIR-V, Vulkan), timed with GPU "
                    "timestamps over back-to-back dispatches; numpy on the host CPU. ")
                 + "cuBLAS through PyTorch, fp32 with TF32 off (the 'vs cuBLAS' yardstick), TF32, and fp16 operands on the "
                   "tensor cores, timed with CUDA events. "
                 + ("'WGSL via Dawn' series: the engine's kernel table through Dawn in Node (matmul_dawn.ts), "
                    f"{dawn_run['timing']}; 'kernel table' is the kernel the engine picks for the shape. " if dawn_run else "")
                 + "Preset rows: one batch through each linear layer" + (", and (dW) each weight gradient over one batch, "
                   "cut along K as the engine cuts it, its partials' sum apart. " if gradients else ". ")
                 + "; ".join(summary) + ".",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
