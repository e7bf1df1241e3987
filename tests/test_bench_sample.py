"""bench/bench_sample.py on the WebAssembly backend, end to end on Tiny: every path (the KV cache
on f32 and on int8 weights, the full window) samples every byte asked for, and what it writes is a
file the speedup page can plot."""
import json
import subprocess
import sys
from pathlib import Path

from tinygpt.site_build import plots

ROOT = Path(__file__).resolve().parent.parent


def test_wasm_sampling_benchmark_writes_a_plottable_result(tmp_path):
    out = tmp_path / "sample_cpu.json"
    run = subprocess.run([sys.executable, ROOT / "bench" / "bench_sample.py", "--backend", "wasm", "--presets", "tiny",
                          "--threads", "1", "--full-window", "tiny", "--out", out], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    [row] = doc["results"]
    assert set(row["wasm"]) == {"KV cache", "KV cache, int8", "full window"}
    for path, r in row["wasm"].items():
        assert r["tokens"] == doc["new_bytes"] and r["tokens_per_s"] > 0, path
    plots._check(doc, lambda *keys: f"{out}: {keys}")
    assert {s["name"] for s in doc["series"]} >= {"WebAssembly, KV cache, 1 thread", "WebAssembly, KV cache, int8, 1 thread", "WebAssembly, full window, 1 thread"}
