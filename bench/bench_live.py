#!/usr/bin/env python3
"""The live feed under load, on loopback: the built dist/ with its Functions and the room under
`wrangler pages dev` (tinygpt/site_build/pages_dev.py), and bench/live_load.mjs's clients, each from
its own loopback address and each sending one event a second inside the rate limits, every client
receiving every event. Per client count: events sent and taken, deliveries per second, events lost
(taken but not received by a client connected throughout) and the delivery latency, send to
receipt, p50 and p99. Target: p99 under 250 ms at 500 clients, none lost. Writes
content/data/live_load.json.

    python bench/bench_live.py                      # 100, 250 and 500 clients, 30 s each
    python bench/bench_live.py --clients 500 --seconds 30
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tinygpt.facts import FACTS  # noqa: E402
from tinygpt.site_build.pages_dev import pages_dev  # noqa: E402
from machine import cpu_name  # noqa: E402

TARGET_P99_MS = 250
RUN_LIMIT_S = 600  # a guard against a hang: a run is its seconds, the connecting and a drain of 15 s


def node_version() -> str:
    return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[100, 250, 500])
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--out", type=Path, default=ROOT / "content" / "data" / "live_load.json")
    args = parser.parse_args()
    if not (ROOT / "dist" / "index.html").is_file():
        sys.exit("dist/ is missing: run `python build.py` first")

    load_before = os.getloadavg()[0]
    runs = []
    with tempfile.TemporaryDirectory() as tmp, pages_dev(ROOT, ROOT / "dist", Path(tmp) / "wrangler.log") as url:
        for clients in args.clients:
            out = subprocess.run(["node", "bench/live_load.mjs", "--url", url, "--clients", str(clients), "--seconds", str(args.seconds)],
                                 cwd=ROOT, capture_output=True, text=True, timeout=RUN_LIMIT_S)
            if out.returncode != 0:
                sys.exit(f"live_load.mjs failed at {clients} clients:\n{out.stderr}")
            run = json.loads(out.stdout.strip().splitlines()[-1])
            runs.append(run)
            print(f"{clients:4} clients, {args.seconds} s: {run['taken']}/{run['sent']} events taken, {run['refused']} refused, "
                  f"{run['delivered_per_s']:,.0f} deliveries/s, {run['lost']} lost, "
                  f"latency p50 {run['p50_ms']} ms, p99 {run['p99_ms']} ms (target < {TARGET_P99_MS})", flush=True)

    result = {
        "benchmark": "live_load",
        "title": "Live feed: delivery latency under load (loopback)",
        "hardware": f"{cpu_name()}, {os.cpu_count()} cores; wrangler pages dev (workerd) and the clients on the same machine",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python bench/bench_live.py" + ("" if args.clients == [100, 250, 500] else " --clients " + " ".join(map(str, args.clients)))
                   + ("" if args.seconds == 30 else f" --seconds {args.seconds}"),
        "x_label": "clients, each sending one event a second",
        "series": [
            {"name": "p50", "unit": "ms", "points": [{"x": r["clients"], "y": r["p50_ms"]} for r in runs]},
            {"name": "p99", "unit": "ms", "points": [{"x": r["clients"], "y": r["p99_ms"]} for r in runs]},
            {"name": f"target p99 ({TARGET_P99_MS} ms)", "unit": "ms", "points": [{"x": r["clients"], "y": TARGET_P99_MS} for r in runs]},
            {"name": "deliveries", "unit": "messages/s", "points": [{"x": r["clients"], "y": r["delivered_per_s"]} for r in runs]},
        ],
        "rows": [{"clients": r["clients"], "seconds": r["seconds"], "events sent": r["sent"], "taken": r["taken"],
                  "refused": r["refused"], "deliveries/s": r["delivered_per_s"], "lost": r["lost"],
                  "p50 ms": r["p50_ms"], "p99 ms": r["p99_ms"], "max ms": r["max_ms"]} for r in runs],
        "notes": f"Every client receives every event, batched by the room at most every {FACTS['live']['flush_ms']} ms. "
                 "The load generator and the local runtime share the machine's cores, and the generator offers no "
                 "permessage-deflate (a browser does; inflating every socket's frames in one process would measure "
                 f"it instead of the room). Node {node_version()}; load average {load_before:.1f} on "
                 f"{os.cpu_count()} cores before the first run.",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    worst = max(runs, key=lambda r: r["clients"])
    if worst["lost"] or worst["p99_ms"] is None or worst["p99_ms"] >= TARGET_P99_MS:
        print(f"target missed at {worst['clients']} clients: p99 {worst['p99_ms']} ms, {worst['lost']} lost")


if __name__ == "__main__":
    main()
