"""What each .tinygpt reader spends on the costliest inputs the format allows
(tests.oracles.checkpoint_corpus.at_the_limits: headers near max_header_bytes built
to be slow or large to parse), against the spec's bound of 1 s of CPU and
64 MiB beyond the file. Python is timed in-process (CPU time; peak from
tracemalloc in a second run), TypeScript by `inspect --stats` in Node (CPU
time; peak from the kernel's resident high-water mark). Each figure is the
median of --rounds runs. Writes content/data/checkpoint_readers.json.

    python bench/bench_checkpoint.py [--rounds 5]
"""
import argparse
import datetime
import json
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from machine import cpu_name

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.oracles import checkpoint_corpus  # noqa: E402
from tinygpt import checkpoint  # noqa: E402
from tinygpt.site_build.node import build_cli  # noqa: E402

MiB = 2**20


def python_cost(buf: bytes) -> tuple[float, float, str]:
    start = time.process_time()
    verdict = checkpoint.verdict(buf)
    ms = (time.process_time() - start) * 1000
    tracemalloc.start()
    checkpoint.verdict(buf)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return ms, peak / MiB, verdict.get("rule", "accepted")


def node_cost(inspect: Path, path: Path) -> tuple[float, float, str]:
    run = subprocess.run(["node", str(inspect), "--stats", str(path)], capture_output=True, text=True, check=True)
    line = json.loads(run.stdout)
    return line["cpu_ms"], line["peak_bytes"] / MiB, line.get("rule", "accepted")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "content" / "data" / "checkpoint_readers.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        inspect = build_cli(ROOT, Path(tmp))["inspect"]
        node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
        for label, buf in checkpoint_corpus.at_the_limits().items():
            path = Path(tmp) / f"{label}.tinygpt"
            path.write_bytes(buf)
            py = [python_cost(buf) for _ in range(args.rounds)]
            ts = [node_cost(inspect, path) for _ in range(args.rounds)]
            med = lambda runs, i: round(statistics.median(r[i] for r in runs), 1)  # noqa: E731
            row = {"input": label, "bytes": len(buf), "verdict": py[0][2],
                   "python ms": med(py, 0), "python MiB": med(py, 1),
                   "typescript ms": med(ts, 0), "typescript MiB": med(ts, 1)}
            assert ts[0][2] == py[0][2], f"{label}: the readers disagree ({py[0][2]} vs {ts[0][2]})"
            rows.append(row)
            print(f"{label:28} {len(buf) / MiB:5.2f} MiB  {row['verdict']:14}  python {row['python ms']:6.1f} ms "
                  f"{row['python MiB']:5.1f} MiB   typescript {row['typescript ms']:6.1f} ms {row['typescript MiB']:5.1f} MiB",
                  flush=True)
    series = [{"name": f"{reader} {what}", "unit": unit, "points": [{"x": r["input"], "y": r[f"{reader} {unit}"]} for r in rows]}
              for what, unit in (("CPU time", "ms"), ("peak memory", "MiB")) for reader in ("python", "typescript")]
    result = {
        "benchmark": "checkpoint_readers",
        "title": "Reading the costliest .tinygpt files the format allows",
        "hardware": f"{cpu_name()}, Python {platform.python_version()}, Node {node}",
        "date": datetime.date.today().isoformat(),
        "command": "python bench/bench_checkpoint.py " + shlex.join(sys.argv[1:]),
        "x_label": "input (tests/oracles/checkpoint_corpus.py, at_the_limits)",
        "series": series,
        "rows": rows,
        "notes": f"Medians of {args.rounds} runs. The bound is 1,000 ms of CPU and 64 MiB beyond the file. Python's "
                 "peak is what tracemalloc counts; TypeScript's is the rise of the process's resident high-water mark.",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
