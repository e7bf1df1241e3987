"""The GPU levers' release check (facts.gate): facts.gate.curve_steps steps on Shakespeare with
the plain f32 kernels, with each GPU lever alone and with the stack of those that ran, all on one
adapter from the same seed and batches, through the train CLI (the engine the app runs). Each
curve must stay within facts.gate.curve_rel_tolerance of the plain run's (bench/curve_rule.py:
their running means over facts.gate.curve_window steps, at every step). Writes
content/data/gpu_curves.json: the curves (the speedup page plots them) and, per lever, the
SHA-256 of its shaders (wgsl.lever_digest), which tests/test_lever_curves.py holds the shaders
to: a lever whose shaders changed since its curve was measured fails CI until this runs again.

    python bench/lever_curves.py --dawn-f16-toggle           # on a GPU host: small, 500 steps
    python bench/lever_curves.py --preset tiny --steps 50 --batch-size 2 --no-stack --out /tmp/curves.json   # CI's short version

A lever this adapter lacks (or whose gate fails here) is reported and left out. Exits 1 when a
curve strays past the tolerance.
"""
import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
from tinygpt.facts import FACTS  # noqa: E402
from tinygpt.site_build import wgsl  # noqa: E402
from tinygpt.site_build.corpora import CORPORA, prepared  # noqa: E402
from tinygpt.site_build.node import build_cli, dawn_env  # noqa: E402
from curve_rule import finish, gap, points  # noqa: E402

OUT = ROOT / "content" / "data" / "gpu_curves.json"
CLI = ROOT / "dist-cli" / "train.js"
# Levers that change training; a sampling lever (facts "serves": "sampling") is held to its held-out loss instead.
GPU_LEVERS = [lever["id"] for lever in FACTS["levers"] if lever["backend"] == "webgpu" and lever.get("serves") != "sampling"]


def built(root: Path = ROOT) -> list[str]:
    """The GPU levers that exist (a folder in webapp/levers/), in facts.levers order."""
    return [lever for lever in GPU_LEVERS if (root / "webapp" / "levers" / lever).is_dir()]


def train(args, corpus: Path, tmp: Path, levers: str) -> dict:
    stats = tmp / f"{levers}.json"
    cmd = [args.node, str(CLI), "--preset", args.preset, "--corpus", str(corpus), "--steps", str(args.steps),
           *(["--batch-size", str(args.batch_size)] if args.batch_size else []),
           "--out", str(tmp / "model.tinygpt"), "--eval-every", "0", "--stats", str(stats), "--quiet", "--levers", levers,
           *(["--dawn-f16-toggle"] if args.dawn_f16_toggle else [])]
    run = subprocess.run(cmd, cwd=ROOT, env=dawn_env(), capture_output=True, text=True)
    if run.returncode != 0:
        said = [line for line in (run.stderr + run.stdout).splitlines() if line.startswith("train: ")]
        return {"error": said[0] if said else f"exit {run.returncode}: {(run.stderr + run.stdout).strip()[-500:]}"}
    return json.loads(stats.read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--steps", type=int, default=FACTS["gate"]["curve_steps"])
    ap.add_argument("--batch-size", type=int, help="the preset's unless given (CI's short version trains small batches on a software GPU)")
    ap.add_argument("--levers", default=",".join(built()), help="the GPU levers to check (default: every one built)")
    ap.add_argument("--corpus", type=Path, help="Shakespeare as the app trains on it (default: prepared from the registry)")
    ap.add_argument("--node", default="node")
    ap.add_argument("--dawn-f16-toggle", action="store_true", help="set Dawn's vulkan_enable_f16_on_nvidia (benchmark hosts only)")
    ap.add_argument("--no-stack", action="store_true", help="each lever alone only (CI's short version, on a slow software GPU)")
    ap.add_argument("--no-bundle", action="store_true", help="use the existing dist-cli/train.js (python build.py cli)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    tolerance = FACTS["gate"]["curve_rel_tolerance"]
    if not args.no_bundle:
        build_cli(ROOT)
    levers = [lever for lever in args.levers.split(",") if lever]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        corpus = args.corpus
        if corpus is None:
            corpus = tmp / "shakespeare.txt"
            corpus.write_bytes(prepared(next(c for c in CORPORA if c["id"] == "shakespeare"), ROOT / ".cache"))
        plain = train(args, corpus, tmp, "none")
        if "error" in plain:
            sys.exit(f"lever_curves: the plain run failed: {plain['error']}")
        runs = {lever: train(args, corpus, tmp, lever) for lever in levers}
        ran = [lever for lever in levers if "losses" in runs[lever]]
        if len(ran) > 1 and not args.no_stack:
            runs[",".join(ran)] = train(args, corpus, tmp, ",".join(ran))
    base = plain["losses"]
    rows, series, ok = [], [{"name": "plain f32", "unit": "loss", "points": base}], True
    for config, run in runs.items():
        ids = config.split(",")
        row = {"levers": config, "shaders": {lever: wgsl.lever_digest(ROOT, lever) for lever in ids}}
        if "losses" not in run:
            row |= {"verdict": "not run here", "why": run["error"]}
            print(f"{config}: not run here ({run['error']})")
        else:
            g = gap(run["losses"], base)
            ok &= g["pass"]
            row |= {"verdict": "pass" if g["pass"] else "fail", "largest relative difference": round(g["largest relative difference"], 6),
                    "at step": g["at step"], f"over {g['window']} steps": "running mean",
                    "largest per-step difference": round(g["largest per-step difference"], 6),
                    "final loss": round(run["losses"][-1], 5), "plain final loss": round(base[-1], 5)}
            series.append({"name": "+" + ", +".join(ids), "unit": "loss", "points": run["losses"]})
            print(f"{config}: loss {run['losses'][0]:.4f} -> {run['losses'][-1]:.4f} (plain {base[-1]:.4f}); largest difference "
                  f"of the {g['window']}-step running means {g['largest relative difference']:.3%} at step {g['at step']} "
                  f"({'within' if g['pass'] else 'OVER'} {tolerance:.0%}; per step at most {g['largest per-step difference']:.3%})")
        rows.append(row)
    for s in series:
        s["points"] = points(s["points"])
    doc = {
        "benchmark": "gpu_curves",
        "title": f"Loss curves of the GPU levers beside the plain f32 kernels ({args.preset}, Shakespeare)",
        "hardware": f"WebGPU adapter: {plain['device']}",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python bench/lever_curves.py " + " ".join(sys.argv[1:]),
        "preset": args.preset, "steps": args.steps, "batch_size": plain["batch_size"], "tolerance": tolerance,
        "x_label": "step", "series": series, "rows": rows,
    }
    finish(doc, args.out, ok)


if __name__ == "__main__":
    main()
