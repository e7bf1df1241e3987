"""Sampling speed, one stream: a 64-byte prompt, then 512 new bytes (temperature 0.8, top-k 40),
tokens/s per preset (WebGPU: the median of 5 samples in one process), with the KV cache (the app's
path: on WebGPU the bytes are chosen on the GPU, a batch a submission), with the KV cache but each
byte chosen on the CPU from logits read back (WebGPU), and with the full window the cache replaced
(every byte re-runs the last block_size bytes).

    python bench/bench_sample.py --backend webgpu    # WebGPU through Dawn in Node (dist-cli/sample.js), content/data/sample_gpu.json
    python bench/bench_sample.py --backend webgpu --presets tiny,medium,huge --node /tmp/node --no-bundle --dawn-f16-toggle --out $OUT/sample_gpu.json
    python bench/bench_sample.py --backend wasm      # the WebAssembly backend here at 1 and 2 threads, content/data/sample_cpu.json

WebGPU runs the plain kernels, each GPU lever alone (on and off: a lever this adapter lacks, or
whose gate fails, is reported; int8, the sampling lever, decodes on its int8 weights), and the
app's path (every shipped lever that passes). WebAssembly decodes on the f32 weights and on the
int8 lever's copy of them (its copy made before the clock starts, bench/cpu_sample_node.ts). Beside them,
in the same run, PyTorch eager on the same device (CUDA for WebGPU, the CPU at the same thread
count for WebAssembly) with a KV cache (tests/oracles/torch_model.py torch_logits_cached, a token
id read back per byte, as a user's loop does) and without one. Weights are each preset's seeded
initialisation: sampling's cost does not depend on what they hold.
"""
import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tinygpt import model  # noqa: E402
from tinygpt.facts import FACTS  # noqa: E402
from tinygpt.site_build.node import build_cli, dawn_env, node_bundle, relaxed_simd_flags  # noqa: E402
from bench_train import corpus  # noqa: E402
from machine import cuda_torch  # noqa: E402

PROMPT_BYTES, NEW_BYTES, TEMPERATURE, TOP_K = 64, 512, 0.8, 40
REPEAT = 5  # WebGPU: samples per run after a warm-up one, the median reported (these hosts are shared)
GPU_LEVERS = [lever["id"] for lever in FACTS["levers"] if lever["backend"] == "webgpu"]
PATHS = {"kv": "KV cache", "full": "full window"}


# dist-cli/sample.js's flag for each WebGPU path: the app's (tokens chosen on the GPU, a batch a
# submission), each token chosen on the CPU from logits read back, and the full window.
SAMPLE_FLAGS = {"kv": [], "host": ["--host-draw"], "full": ["--full-window"]}


def webgpu(node: str, preset_id: str, prompt: str, levers: str, path: str, toggle: bool, tmp: Path) -> dict:
    """dist-cli/sample.js's stats for one run on `path` (SAMPLE_FLAGS), or the error it stopped with."""
    stats = tmp / f"{preset_id}-{levers}-{path}.json"
    cmd = [node, str(ROOT / "dist-cli" / "sample.js"), "--preset", preset_id, "--prompt", prompt, "--tokens", str(NEW_BYTES),
           "--temperature", str(TEMPERATURE), "--top-k", str(TOP_K), "--levers", levers, "--repeat", str(REPEAT), "--stats", str(stats), "--quiet",
           *SAMPLE_FLAGS[path], *(["--dawn-f16-toggle"] if toggle else [])]
    run = subprocess.run(cmd, cwd=ROOT, env=dawn_env(), capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        return {"error": (run.stdout + run.stderr)[-2000:]}
    return json.loads(stats.read_text())


def wasm(node: str, built: Path, preset_id: str, threads: int, prompt: Path, full: bool) -> list[dict]:
    """The app's build: relaxed SIMD where this Node has it and its gate passes."""
    cmd = [node, *relaxed_simd_flags(node), built / "cpu_sample_node.mjs", built / "cpu.wasm", preset_id, str(threads), prompt, str(NEW_BYTES),
           str(TEMPERATURE), str(TOP_K), *(["full"] if full else [])]
    return json.loads(subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.PIPE, text=True).stdout)


def torch_sample(torch, device: str, preset_id: str, prompt: bytes, cached: bool) -> dict:
    """PyTorch eager fp32 sampling NEW_BYTES bytes after `prompt`, the window sliding as the app's
    does: the median of REPEAT runs after a warm-up one, as the WebGPU figures."""
    runs = [_torch_once(torch, device, preset_id, prompt, cached) for _ in range(REPEAT + 1)][1:]
    return {"tokens_per_s": sorted(runs)[len(runs) // 2], "runs_tokens_per_s": runs, "torch": torch.__version__}


def _torch_once(torch, device: str, preset_id: str, prompt: bytes, cached: bool) -> float:
    from tests.oracles.torch_model import torch_logits_cached
    config = model.GPTConfig.from_preset(preset_id)
    T = config.block_size
    P = {k: torch.tensor(v, device=device) for k, v in model.init_params(config, 1).items()}
    gen = torch.Generator(device=device).manual_seed(1)
    tokens, start, cache, logits = list(prompt), max(0, len(prompt) - T), [], None
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.no_grad():
        sync()
        t0 = time.perf_counter()
        for _ in range(NEW_BYTES):
            was = start
            start = model.window_start(start, len(tokens), T) if cached else max(0, len(tokens) - T)
            if cached and logits is not None and start == was:
                logits = torch_logits_cached(config, P, torch.tensor([tokens[-1:]], device=device), cache)[0, -1]
            else:
                cache = []
                logits = torch_logits_cached(config, P, torch.tensor([tokens[start:]], device=device), cache)[0, -1]
            scaled = logits / TEMPERATURE
            scaled[scaled < torch.topk(scaled, TOP_K).values[-1]] = -float("inf")
            tokens.append(int(torch.multinomial(torch.softmax(scaled, -1), 1, generator=gen).item()))
        sync()
    return NEW_BYTES / (time.perf_counter() - t0)


def label(config: str, path: str) -> str:
    if path == "full":
        return "WebGPU, full window (plain f32)"
    if path == "host":
        return "WebGPU, KV cache, chosen on the CPU (plain f32)"
    return {"none": "WebGPU, KV cache, plain f32", "all": "WebGPU, KV cache, the app's path"}.get(config, f"WebGPU, KV cache, +{config}")


def run_webgpu(args, prompt: bytes) -> tuple[list[dict], dict]:
    if not args.no_bundle:
        build_cli(ROOT)
    torch = cuda_torch()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for pid in args.presets.split(","):
            row = {"preset": pid, "params": model.param_count(model.GPTConfig.from_preset(pid)), "webgpu": {}, "pytorch": {}}
            runs = [("none", "kv"), ("none", "host"), ("none", "full"), *((lever, "kv") for lever in GPU_LEVERS), ("all", "kv")]
            for config, path in runs:
                row["webgpu"][f"{config} {path}"] = r = webgpu(args.node, pid, prompt.decode(), config, path,
                                                               args.dawn_f16_toggle, Path(d))
                print(f"{pid:7s} {label(config, path):45s} " + (f"{r['tokens_per_s']:9.0f} tok/s" + (f" (+{', +'.join(r['levers'])})" if config == "all" else "")
                      if "tokens_per_s" in r else "did not run: " + next((line for line in r["error"].splitlines() if line.startswith("sample:")), r["error"].strip()[-200:])), flush=True)
            if torch is not None:
                for path in PATHS:
                    row["pytorch"][path] = r = torch_sample(torch, "cuda", pid, prompt, path == "kv")
                    print(f"{pid:7s} PyTorch eager fp32, {PATHS[path]:26s} {r['tokens_per_s']:9.0f} tok/s", flush=True)
            rows.append(row)
    first = next((g["device"] for r in rows for g in r["webgpu"].values() if "device" in g), None)
    gpu = torch.cuda.get_device_name() if torch is not None else None
    series = [{"name": label(*key.split(" ")), "unit": "tokens/s",
               "points": [{"x": r["preset"], "y": round(r["webgpu"][key]["tokens_per_s"], 1)} for r in rows if "tokens_per_s" in r["webgpu"][key]]}
              for key in rows[0]["webgpu"]]
    series += [{"name": f"PyTorch eager fp32, {PATHS[path]}", "unit": "tokens/s",
                "points": [{"x": r["preset"], "y": round(r["pytorch"][path]["tokens_per_s"], 1)} for r in rows if path in r["pytorch"]]}
               for path in PATHS]
    table = [{"preset": r["preset"], "params": r["params"],
              **{label(*k.split(" ")): round(g["tokens_per_s"]) for k, g in r["webgpu"].items() if "tokens_per_s" in g},
              **{f"PyTorch, {PATHS[p]}": round(g["tokens_per_s"]) for p, g in r["pytorch"].items()}} for r in rows]
    return rows, {"benchmark": "sample_gpu", "title": "Sampling speed on the GPU: WebGPU with the KV cache, plain and with each lever, vs the full window and PyTorch",
                  "hardware": f"{gpu or 'no CUDA here'} (WebGPU adapter: {first})", "gpu": gpu, "webgpu_adapter": first,
                  "series": [s for s in series if s["points"]], "rows": table}


def run_wasm(args, prompt: bytes) -> tuple[list[dict], dict]:
    try:
        import torch
    except ImportError:
        torch = None
    rows = []
    with tempfile.TemporaryDirectory() as d:
        built = Path(d)
        from tinygpt.site_build.bundle import compile_cpu_wasm
        compile_cpu_wasm(ROOT, built / "cpu.wasm")
        node_bundle(ROOT, ["bench/cpu_sample_node.ts", "webapp/cpu/test/thread_worker.ts"], built)
        (built / "prompt.txt").write_bytes(prompt)
        for pid in args.presets.split(","):
            for threads in [int(t) for t in args.threads.split(",")]:
                row = {"preset": pid, "threads": threads, "params": model.param_count(model.GPTConfig.from_preset(pid)), "wasm": {}, "pytorch": {}}
                for r in wasm(args.node, built, pid, threads, built / "prompt.txt", pid in args.full_window.split(",")):
                    row["wasm"][r["path"]] = r
                    row["simd"] = r["simd"]
                    print(f"{pid:7s} {threads} thread(s) WebAssembly {r['simd']:8s} {r['path']:12s} {r['tokens_per_s']:9.0f} tok/s", flush=True)
                if torch is not None:
                    torch.set_num_threads(threads)
                    row["pytorch"]["KV cache"] = r = torch_sample(torch, "cpu", pid, prompt, True)
                    print(f"{pid:7s} {threads} thread(s) PyTorch eager fp32, KV cache {r['tokens_per_s']:9.0f} tok/s", flush=True)
                rows.append(row)
    names = list(dict.fromkeys(f"{side}|{path}|{r['threads']}" for r in rows for side in ("wasm", "pytorch") for path in r[side]))
    series = []
    for name in names:
        side, path, threads = name.split("|")
        points = [{"x": r["preset"], "y": round(r[side][path]["tokens_per_s"], 1)} for r in rows if str(r["threads"]) == threads and path in r[side]]
        series.append({"name": f"{'WebAssembly' if side == 'wasm' else 'PyTorch eager fp32'}, {path}, {threads} thread{'s' if threads != '1' else ''}", "unit": "tokens/s", "points": points})
    table = [{"preset": r["preset"], "threads": r["threads"], "SIMD": r.get("simd"),
              **{f"WebAssembly, {p}": round(g["tokens_per_s"]) for p, g in r["wasm"].items()},
              **{f"PyTorch, {p}": round(g["tokens_per_s"]) for p, g in r["pytorch"].items()}} for r in rows]
    return rows, {"benchmark": "sample_cpu", "title": "Sampling speed on the CPU: WebAssembly with the KV cache (f32 and int8 weights) vs the full window and PyTorch",
                  "hardware": f"{platform.processor() or platform.machine()}, {platform.platform()}", "series": series, "rows": table}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("webgpu", "wasm"), required=True)
    ap.add_argument("--presets", help="default: tiny,medium,huge")
    ap.add_argument("--threads", default="1,2", help="WebAssembly and PyTorch CPU thread counts")
    ap.add_argument("--full-window", default="tiny,medium", help="WebAssembly: the presets to time the (slow) full window on too")
    ap.add_argument("--node", default="node")
    ap.add_argument("--dawn-f16-toggle", action="store_true", help="set Dawn's vulkan_enable_f16_on_nvidia (benchmark hosts only)")
    ap.add_argument("--no-bundle", action="store_true", help="use the existing dist-cli/sample.js (python build.py cli)")
    ap.add_argument("--corpus", type=Path, help="the prompt's source (its first %d bytes); default: Python's own sources" % PROMPT_BYTES)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    args.presets = args.presets or "tiny,medium,huge"
    with tempfile.TemporaryDirectory() as d:
        prompt = (args.corpus or corpus(Path(d) / "corpus.txt")).read_bytes()[:PROMPT_BYTES]
    results, view = (run_webgpu if args.backend == "webgpu" else run_wasm)(args, prompt)
    out = {
        "benchmark": view["benchmark"], "title": view["title"],
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": {"machine": platform.machine(), "system": platform.platform(), "python": platform.python_version()},
        "prompt_bytes": PROMPT_BYTES, "new_bytes": NEW_BYTES, "temperature": TEMPERATURE, "top_k": TOP_K,
        "command": "python bench/bench_sample.py " + " ".join(sys.argv[1:]),
        "results": results, "x_label": "preset",
        **{k: v for k, v in view.items() if k not in ("benchmark", "title")},
    }
    path = args.out or ROOT / "content" / "data" / f"{view['benchmark']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
