"""LoRA fine-tuning beside full training of the same model on the same backend: tokens/s and
resident memory of each, and their ratios (fine-tuning over full training). The adapter has
facts.json lora's defaults (rank, alpha, targets) on a frozen base. Writes
content/data/lora_cpu.json (or --out).

    python bench/bench_lora.py                                # tiny,small,medium at 1 and 2 threads
    python bench/bench_lora.py --presets huge --threads 1 --rounds 2 --seconds 1 --out content/data/lora_cpu_huge.json
                                                              # Huge: over a minute a step on 2 cores

The WebAssembly backend runs in Node (bench/lora_node.ts), both modes in one process, their
timed runs alternating --rounds times; the tokens/s ratio is the median of each round's
back-to-back pair (bench/bench_cpu.py says why). Resident memory is Backend.residentBytes after a
warm-up step: the WebAssembly memory, which holds everything a step touches. Every result names
its backend, so a WebGPU run can sit beside this one in the same shape.

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
BACKENDS = {"wasm": "WebAssembly"}  # a result's "backend" -> its name on the page


def adapter_size(preset_id: str) -> dict:
    """The default adapter's f32 size on a preset, from the reference's layout."""
    params = sum(rows * cols for _, (rows, cols) in adapter_specs(model.GPTConfig.from_preset(preset_id), LoraConfig()))
    nbytes = 4 * params
    return {"preset": preset_id, "params": params, "bytes": nbytes, "under_1mb": nbytes < ADAPTER_TARGET_BYTES}


def wasm(node: list[str], built: Path, preset_id: str, threads: int, seconds: float, rounds: int) -> dict:
    """One case from bench/lora_node.ts, with the ratios of fine-tuning over full training."""
    cmd = [*node, built / "lora_node.mjs", built / "cpu.wasm", str(seconds), str(rounds), preset_id, str(threads)]
    r = json.loads(subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.PIPE, text=True).stdout)
    paired = [f / t for f, t in zip(r["finetune"]["rounds_tokens_per_s"], r["full"]["rounds_tokens_per_s"])]
    memory = r["finetune"]["resident_bytes"] / r["full"]["resident_bytes"]
    return {"backend": "wasm", **r, "tokens_per_s_ratio": statistics.median(paired), "tokens_per_s_ratio_rounds": paired,
            "resident_ratio": memory, "resident_under_half": memory < MEMORY_TARGET_RATIO}


def label(backend: str, mode: str, threads: int) -> str:
    return f"{BACKENDS[backend]}, {MODES[mode]}, {threads} thread{'s' if threads > 1 else ''}"


def plot_fields(doc: dict) -> dict:
    """The speedup page's view (tinygpt/site_build/plots.py) of a finished run: tokens/s of each mode per preset, the ratios in the table."""
    results = doc["results"]
    series = {}
    for r in results:
        for mode in MODES:
            series.setdefault(label(r["backend"], mode, r["threads"]), []).append({"x": r["preset"], "y": round(r[mode]["tokens_per_s"], 1)})
    mb = lambda n: round(n / 2 ** 20, 1)  # noqa: E731
    rows = [{"backend": r["backend"], "preset": r["preset"], "threads": r["threads"], "SIMD": r["simd"],
             "full tokens/s": round(r["full"]["tokens_per_s"]), "fine-tune tokens/s": round(r["finetune"]["tokens_per_s"]),
             "tokens/s ratio": round(r["tokens_per_s_ratio"], 2),
             "full MiB": mb(r["full"]["resident_bytes"]), "fine-tune MiB": mb(r["finetune"]["resident_bytes"]),
             "memory ratio": round(r["resident_ratio"], 3),
             "adapter params": r["adapter_params"], "adapter bytes": r["adapter_bytes"]} for r in results]
    target = next(a for a in doc["adapters"] if a["preset"] == TARGET_PRESET)
    memory = sorted({f"{r['resident_ratio']:.2f}" for r in results}, key=float)
    notes = (f"Ratios are fine-tuning over full training. The default adapter (rank {LoraConfig().rank} on "
             f"{' and '.join(LoraConfig().targets)}) on {preset(TARGET_PRESET)['label']}: {target['params']:,} parameters, {target['bytes']:,} bytes, "
             f"{'under' if target['under_1mb'] else 'not under'} 1 MB. Fine-tuning's resident memory is "
             f"{' to '.join(dict.fromkeys([memory[0], memory[-1]]))} of full training's (the target: under {MEMORY_TARGET_RATIO}).")
    return {"x_label": "preset", "series": [{"name": name, "unit": "tokens/s", "points": points} for name, points in series.items()],
            "rows": rows, "notes": notes}


def main(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="tiny,small,medium")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=4.0, help="timed seconds per run of each mode (at least one step)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs of each mode per case")
    ap.add_argument("--node", default="node")
    ap.add_argument("--out", type=Path, default=OUT)
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    presets = args.presets.split(",")
    node = [args.node, *relaxed_simd_flags(args.node)]
    results = []
    with tempfile.TemporaryDirectory() as d:
        built = Path(d)
        from tinygpt.site_build.bundle import compile_cpu_wasm
        compile_cpu_wasm(ROOT, built / "cpu.wasm")
        node_bundle(ROOT, ["bench/lora_node.ts", "webapp/cpu/test/thread_worker.ts"], built)
        for preset_id in presets:
            for threads in [int(t) for t in args.threads.split(",")]:
                results.append(r := wasm(node, built, preset_id, threads, args.seconds, args.rounds))
                print(f"{preset_id:7s} {threads} thread(s) {r['simd']:7s} full {r['full']['tokens_per_s']:8.0f} tok/s "
                      f"{r['full']['resident_bytes'] / 2 ** 20:7.1f} MiB | fine-tune {r['finetune']['tokens_per_s']:8.0f} tok/s "
                      f"{r['finetune']['resident_bytes'] / 2 ** 20:7.1f} MiB | tokens/s x{r['tokens_per_s_ratio']:.2f}, "
                      f"memory x{r['resident_ratio']:.3f}{'' if r['resident_under_half'] else ' (not under half)'}", flush=True)
    adapters = [adapter_size(p) for p in dict.fromkeys([*presets, TARGET_PRESET])]
    for a in adapters:
        print(f"adapter {a['preset']:7s} {a['params']:9,d} params {a['bytes']:11,d} bytes{'' if a['under_1mb'] else ' (not under 1 MB)'}")
    node_version = subprocess.run([args.node, "--version"], capture_output=True, text=True).stdout.strip()
    doc = {
        "benchmark": args.out.stem,
        "title": f"LoRA fine-tuning beside full training: tokens/s and resident memory ({', '.join(presets)})",
        "hardware": f"{cpu_name()} ({os.cpu_count()} logical CPUs)",
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
