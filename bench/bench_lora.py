"""LoRA fine-tuning beside full training of the same model on the same backend: tokens/s and
resident memory of each, and their ratios (fine-tuning over full training). The adapter has
facts.json lora's defaults (rank, alpha, targets) on a frozen base. Writes
content/data/lora_cpu.json (or --out).

    python bench/bench_lora.py                                # tiny,small,medium at 1 and 2 threads
    python bench/bench_lora.py --presets huge --threads 1 --rounds 2 --seconds 1 --out content/data/lora_cpu_huge.json
                                                              # Huge: over a minute a step on 2 cores
    python bench/bench_lora.py --backend webgpu --presets small,medium,huge --node /tmp/node --no-bundle \
        --dawn-f16-toggle --out $OUT/lora_gpu.json             # the WebGPU backend through Dawn (the device machine)

The WebAssembly backend runs in Node (bench/lora_node.ts), both modes in one process, their
timed runs alternating --rounds times; the tokens/s ratio is the median of each round's
back-to-back pair (bench/bench_cpu.py says why). Resident memory is Backend.residentBytes after a
warm-up step: the WebAssembly memory, which holds everything a step touches.

The WebGPU backend runs in the Node CLI (dist-cli/train.js, the engine the app runs, with the GPU
levers that pass their gates, --levers): a base from the preset's seed, then --rounds alternating
runs of --steps steps of each mode from it (full: --init BASE; fine-tuning: --init BASE --lora),
tokens/s timed after the CLI's warm-up steps, resident memory the backend's buffers
(GpuBackend.residentBytes). Every result names its backend, so both sit in one shape. --steps 0
measures the memory alone (the backend holds every buffer from its creation), for a host whose
speed means nothing, SwiftShader's Vulkan on the CPU: its plot is then of memory.

The issue's targets, checked here: the default adapter on Huge is under 1 MB (its size comes
from the layout, tinygpt.lora.adapter_specs, so it is reported whether or not Huge is measured),
and fine-tuning holds less than half the resident memory of full training.
"""
import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from machine import cpu_name

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tinygpt import model  # noqa: E402
from tinygpt.facts import preset  # noqa: E402
from tinygpt.lora import LoraConfig, adapter_specs  # noqa: E402
from tinygpt.site_build.node import node_bundle, relaxed_simd_flags  # noqa: E402

OUT = ROOT / "content" / "data" / "lora_cpu.json"
ADAPTER_TARGET_BYTES = 1_000_000  # the "under 1 MB", in decimal megabytes, the stricter reading
MEMORY_TARGET_RATIO = 0.5  # the "less than half the resident memory of full training"
TARGET_PRESET = "huge"  # the preset the adapter target is stated for
MODES = {"full": "full training", "finetune": "LoRA fine-tuning"}
BACKENDS = {"wasm": "WebAssembly", "webgpu": "WebGPU"}  # a result's "backend" -> its name on the page
CLI = ROOT / "dist-cli" / "train.js"


def adapter_size(preset_id: str) -> dict:
    """The default adapter's f32 size on a preset, from the reference's layout."""
    params = sum(rows * cols for _, (rows, cols) in adapter_specs(model.GPTConfig.from_preset(preset_id), LoraConfig()))
    nbytes = 4 * params
    return {"preset": preset_id, "params": params, "bytes": nbytes, "under_1mb": nbytes < ADAPTER_TARGET_BYTES}


def wasm(node: list[str], built: Path, preset_id: str, threads: int, seconds: float, rounds: int) -> dict:
    """One case from bench/lora_node.ts, with the ratios of fine-tuning over full training."""
    cmd = [*node, built / "lora_node.mjs", built / "cpu.wasm", str(seconds), str(rounds), preset_id, str(threads)]
    r = json.loads(subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.PIPE, text=True).stdout)
    return {"backend": "wasm", **r, **ratios(r)}


def ratios(r: dict) -> dict:
    """Fine-tuning over full training: tokens/s (the median of the rounds' back-to-back pairs; None untimed) and resident memory."""
    paired = [f / t for f, t in zip(r["finetune"]["rounds_tokens_per_s"], r["full"]["rounds_tokens_per_s"])]
    memory = r["finetune"]["resident_bytes"] / r["full"]["resident_bytes"]
    return {"tokens_per_s_ratio": statistics.median(paired) if paired else None, "tokens_per_s_ratio_rounds": paired,
            "resident_ratio": memory, "resident_under_half": memory < MEMORY_TARGET_RATIO}


def webgpu(node: str, preset_id: str, steps: int, rounds: int, levers: str, toggle: bool, tmp: Path) -> dict:
    """One case on the WebGPU backend: the CLI's stats for each mode, round after round, from one base."""
    from tinygpt.site_build.node import dawn_env
    text = tmp / "corpus.txt"
    if not text.exists():  # the reference's sources: bytes that are there wherever this runs
        text.write_bytes(b"".join(f.read_bytes() for f in sorted((ROOT / "tinygpt").glob("*.py"))) * 4)
    base = tmp / f"{preset_id}-base.tinygpt"

    def cli(*extra: str, out: Path) -> dict:
        stats = out.with_suffix(".json")
        cmd = [node, str(CLI), "--preset", preset_id, "--corpus", str(text), "--out", str(out), "--eval-every", "0",
               "--quiet", "--stats", str(stats), "--levers", levers, *(["--dawn-f16-toggle"] if toggle else []), *extra]
        # A guard against a hang: Huge on SwiftShader (Vulkan on the CPU) runs for tens of minutes.
        run = subprocess.run(cmd, cwd=ROOT, env=dawn_env(), capture_output=True, text=True, timeout=3 * 3600)
        if run.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{(run.stdout + run.stderr)[-3000:]}")
        return json.loads(stats.read_text())

    cli("--steps", "0", out=base)
    modes = {"full": ["--init", str(base)], "finetune": ["--init", str(base), "--lora"]}
    runs = {mode: [] for mode in modes}
    for _ in range(rounds):  # alternating, as the CPU half does
        for mode, extra in modes.items():
            runs[mode].append(cli("--steps", str(steps), *extra, out=tmp / f"{preset_id}-{mode}.tinygpt"))
    first = runs["finetune"][0]
    r = {"preset": preset_id, "device": first["device"], "levers": first["levers"], "tokens_per_step": first["batch_size"] * first["block_size"],
         "lora": first["lora"], "adapter_params": first["adapter_params"], "adapter_bytes": 4 * first["adapter_params"]}
    for mode, rs in runs.items():
        timed = {"seconds_per_step": statistics.median(x["ms_per_step"] for x in rs) / 1000, "tokens_per_s": statistics.median(x["tokens_per_s"] for x in rs),
                 "rounds_tokens_per_s": [x["tokens_per_s"] for x in rs], "final_loss": rs[-1]["final_loss"]} if steps else \
            {"seconds_per_step": None, "tokens_per_s": None, "rounds_tokens_per_s": [], "final_loss": None}
        r[mode] = {"steps": sum(x["timed_steps"] for x in rs), **timed, "resident_bytes": max(x["resident_bytes"] for x in rs)}
    return {"backend": "webgpu", **r, **ratios(r)}


def path(r: dict) -> str:
    """How a result ran, beyond its backend: threads and SIMD, or the GPU levers."""
    if r["backend"] == "webgpu":
        return "+" + ", +".join(r["levers"]) if r["levers"] else "plain f32 kernels"
    return f"{r['threads']} thread{'s' if r['threads'] > 1 else ''}"


def label(r: dict, mode: str) -> str:
    return f"{BACKENDS[r['backend']]}, {MODES[mode]}, {path(r)}"


def plot_fields(doc: dict) -> dict:
    """The speedup page's view (tinygpt/site_build/plots.py) of a finished run: tokens/s of each mode per preset (of a run
    measuring memory alone, its MiB), the ratios in the table."""
    results = doc["results"]
    timed = all(r["tokens_per_s_ratio"] is not None for r in results)
    mb = lambda n: round(n / 2 ** 20, 1)  # noqa: E731
    series = {}
    for r in results:
        for mode in MODES:
            y = round(r[mode]["tokens_per_s"], 1) if timed else mb(r[mode]["resident_bytes"])
            series.setdefault(label(r, mode), []).append({"x": r["preset"], "y": y})
    speed = lambda r: {"full tokens/s": round(r["full"]["tokens_per_s"]), "fine-tune tokens/s": round(r["finetune"]["tokens_per_s"]),  # noqa: E731
                       "tokens/s ratio": round(r["tokens_per_s_ratio"], 2)} if timed else {}
    rows = [{"backend": r["backend"], "preset": r["preset"], "path": path(r) + (f", {r['simd']} SIMD" if "simd" in r else ""), **speed(r),
             "full MiB": mb(r["full"]["resident_bytes"]), "fine-tune MiB": mb(r["finetune"]["resident_bytes"]),
             "memory ratio": round(r["resident_ratio"], 3),
             "adapter params": r["adapter_params"], "adapter bytes": r["adapter_bytes"]} for r in results]
    target = next(a for a in doc["adapters"] if a["preset"] == TARGET_PRESET)
    memory = sorted({f"{r['resident_ratio']:.2f}" for r in results}, key=float)
    notes = (f"Ratios are fine-tuning over full training. The default adapter (rank {LoraConfig().rank} on "
             f"{' and '.join(LoraConfig().targets)}) on {preset(TARGET_PRESET)['label']}: {target['params']:,} parameters, {target['bytes']:,} bytes, "
             f"{'under' if target['under_1mb'] else 'not under'} 1 MB. Fine-tuning's resident memory is "
             f"{' to '.join(dict.fromkeys([memory[0], memory[-1]]))} of full training's (the target: under {MEMORY_TARGET_RATIO}).")
    return {"x_label": "preset", "series": [{"name": name, "unit": "tokens/s" if timed else "MiB", "points": points} for name, points in series.items()],
            "rows": rows, "notes": notes}


def main(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=sorted(BACKENDS), default="wasm")
    ap.add_argument("--presets", default="tiny,small,medium")
    ap.add_argument("--threads", default="1,2", help="WebAssembly: the thread counts to measure")
    ap.add_argument("--seconds", type=float, default=4.0, help="WebAssembly: timed seconds per run of each mode (at least one step)")
    ap.add_argument("--steps", type=int, default=40, help="WebGPU: steps per run of each mode (the CLI times all but its warm-up; 0: memory alone)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs of each mode per case")
    ap.add_argument("--levers", default="all", help="WebGPU: the CLI's --levers")
    ap.add_argument("--dawn-f16-toggle", action="store_true", help="WebGPU: Dawn's vulkan_enable_f16_on_nvidia (benchmark hosts only)")
    ap.add_argument("--no-bundle", action="store_true", help="WebGPU: use dist-cli/ as it is (build.py cli made it)")
    ap.add_argument("--node", default="node")
    ap.add_argument("--out", type=Path, default=OUT)
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    presets = args.presets.split(",")
    node = [args.node, *relaxed_simd_flags(args.node)] if args.backend == "wasm" else [args.node]
    results = []
    with tempfile.TemporaryDirectory() as d:
        built = Path(d)
        if args.backend == "wasm":
            from tinygpt.site_build.bundle import compile_cpu_wasm
            compile_cpu_wasm(ROOT, built / "cpu.wasm")
            node_bundle(ROOT, ["bench/lora_node.ts", "webapp/cpu/test/thread_worker.ts"], built)
            cases = [(p, lambda p=p, t=int(t): wasm(node, built, p, t, args.seconds, args.rounds)) for p in presets for t in args.threads.split(",")]
        else:
            if not args.no_bundle:
                from tinygpt.site_build.node import build_cli
                build_cli(ROOT)
            cases = [(p, lambda p=p: webgpu(args.node, p, args.steps, args.rounds, args.levers, args.dawn_f16_toggle, built)) for p in presets]
        for preset_id, measure in cases:
            results.append(r := measure())
            tok = lambda v: "untimed" if v is None else f"{v:8.0f} tok/s"  # noqa: E731
            print(f"{preset_id:7s} {r['backend']} {path(r)} full {tok(r['full']['tokens_per_s'])} "
                  f"{r['full']['resident_bytes'] / 2 ** 20:7.1f} MiB | fine-tune {tok(r['finetune']['tokens_per_s'])} "
                  f"{r['finetune']['resident_bytes'] / 2 ** 20:7.1f} MiB | "
                  f"{'' if r['tokens_per_s_ratio'] is None else 'tokens/s x%.2f, ' % r['tokens_per_s_ratio']}"
                  f"memory x{r['resident_ratio']:.3f}{'' if r['resident_under_half'] else ' (not under half)'}", flush=True)
    adapters = [adapter_size(p) for p in dict.fromkeys([*presets, TARGET_PRESET])]
    for a in adapters:
        print(f"adapter {a['preset']:7s} {a['params']:9,d} params {a['bytes']:11,d} bytes{'' if a['under_1mb'] else ' (not under 1 MB)'}")
    node_version = subprocess.run([args.node, "--version"], capture_output=True, text=True).stdout.strip()
    doc = {
        "benchmark": args.out.stem,
        "title": f"LoRA fine-tuning beside full training: {'tokens/s and ' if all(r['tokens_per_s_ratio'] for r in results) else ''}"
                 f"resident memory ({', '.join(presets)})",
        "hardware": f"{cpu_name()} ({os.cpu_count()} logical CPUs)" if args.backend == "wasm" else f"{results[0]['device']} (WebGPU through Dawn in Node)",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "bench/bench_lora.py", *argv]),
        "host": {"machine": platform.machine(), "system": platform.platform(), "node": node_version, "node_flags": node[1:],
                 "python": platform.python_version()},
        "seconds": args.seconds, "rounds": args.rounds,
        "targets": {"adapter_bytes_under": ADAPTER_TARGET_BYTES, "resident_ratio_under": MEMORY_TARGET_RATIO},
        "results": results,
        "adapters": adapters,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc | plot_fields(doc), indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
