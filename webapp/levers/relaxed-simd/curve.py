"""The release check of the relaxed-SIMD lever, beside its gate: facts.gate's
curve_steps steps on Shakespeare with the plain build and with the relaxed one
(same preset, batches and schedule, one thread each), and the largest relative
difference between the two loss curves (bench/curve_rule.py), against
facts.gate.curve_rel_tolerance.
Writes content/data/cpu_curve.json (both curves, plotted on the speedup page).

    python webapp/levers/relaxed-simd/curve.py                  # tiny, 500 steps
    python webapp/levers/relaxed-simd/curve.py --preset small

Exits 1 when the curves differ by more than the tolerance.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
from curve_rule import finish, gap, points  # noqa: E402
from machine import cpu_name  # noqa: E402
from tinygpt.site_build.bundle import compile_cpu_wasm  # noqa: E402
from tinygpt.site_build.corpora import CORPORA, prepared  # noqa: E402
from tinygpt.site_build.node import node_bundle, relaxed_simd_flags  # noqa: E402
from tinygpt.facts import FACTS  # noqa: E402

OUT = ROOT / "content" / "data" / "cpu_curve.json"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--steps", type=int, default=FACTS["gate"]["curve_steps"])
    ap.add_argument("--node", default="node")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    tolerance = FACTS["gate"]["curve_rel_tolerance"]
    shakespeare = next(c for c in CORPORA if c["id"] == "shakespeare")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "shakespeare.txt"
        corpus.write_bytes(prepared(shakespeare, ROOT / ".cache"))
        built = Path(tmp)
        compile_cpu_wasm(ROOT, built / "cpu.wasm")
        node_bundle(ROOT, ["webapp/levers/relaxed-simd/curve.ts"], built)
        cmd = [args.node, *relaxed_simd_flags(args.node), built / "curve.mjs", built / "cpu.wasm", args.preset,
               str(args.steps), corpus]
        curves = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)
    plain, relaxed = curves["plain"], curves["relaxed"]
    g = gap(relaxed, plain)
    ok = g["pass"]
    print(f"{args.preset}, {args.steps} steps on Shakespeare: loss {plain[0]:.4f} -> {plain[-1]:.4f} (plain), "
          f"{relaxed[-1]:.4f} (relaxed); largest difference of the {g['window']}-step running means "
          f"{g['largest relative difference']:.3%} at step {g['at step']} ({'within' if ok else 'OVER'} {tolerance:.0%}; "
          f"per step at most {g['largest per-step difference']:.3%})")
    doc = {
        "benchmark": "cpu_curve",
        "title": f"Loss curves of the CPU backend's two builds ({args.preset}, Shakespeare)",
        "hardware": f"{cpu_name()} ({os.cpu_count()} logical CPUs), one thread",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python webapp/levers/relaxed-simd/curve.py " + " ".join(sys.argv[1:]),
        "x_label": "step",
        "series": [{"name": f"{name} SIMD", "unit": "loss",
                    "points": points(losses)}
                   for name, losses in (("plain", plain), ("relaxed", relaxed))],
        "rows": [{"preset": args.preset, "steps": args.steps, "largest relative difference": f"{g['largest relative difference']:.3%}",
                  "at step": g["at step"], f"over {g['window']} steps": "running mean",
                  "largest per-step difference": f"{g['largest per-step difference']:.3%}",
                  "tolerance": f"{tolerance:.0%}", "verdict": "pass" if ok else "fail"}],
    }
    finish(doc, args.out, ok)


if __name__ == "__main__":
    main()
