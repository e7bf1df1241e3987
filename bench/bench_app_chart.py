"""How long the app's loss chart takes to redraw as its history grows, in
headless Chromium.

    python bench/bench_app_chart.py [--points 1000 10000 100000] [--redraws 20]

The chart runs on a page of its own (bench/chart_page.ts, bundled with
esbuild from the app's own chart.ts), because a live run holds every point it
trained while a .tinygpt file keeps at most max_history_points, too few to
import a long run. For each size the chart is given that many points (a
synthetic decaying curve with noise: drawing cost does not depend on the
values), then its scale is flipped --redraws times and each redraw is timed
inside the animation frame it runs in. A frame at 60 Hz is 16.7 ms: "smooth at
10,000 points" means a redraw well under that. Writes content/data/app_chart.json.
"""
import argparse
import datetime
import functools
import http.server
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = """<!doctype html><meta charset="utf-8"><title>chart</title>
<canvas style="width: 1100px; height: 320px; display: block"></canvas>
<script type="module" src="chart_page.js"></script>"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(folder: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=folder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--redraws", type=int, default=20)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(ROOT / "node_modules" / ".bin" / "esbuild"), "bench/chart_page.ts", "--bundle",
                        "--format=esm", f"--outfile={tmp}/chart_page.js", "--log-level=warning"], cwd=ROOT, check=True)
        Path(tmp, "index.html").write_text(PAGE)
        server, url = serve(tmp)
        exe = os.environ.get("TINYGPT_CHROMIUM") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        version = browser.version
        for n in args.points:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(url + "/index.html")
            page.wait_for_function("typeof window.load === 'function'")
            page.evaluate("n => window.load(n)", n)
            page.evaluate("window.timedFlip()")  # the first draw warms caches
            times = sorted(page.evaluate("window.timedFlip()") for _ in range(args.redraws))
            median, worst = times[len(times) // 2], times[-1]
            rows.append({"points": n, "median ms": round(median, 2), "worst ms": round(worst, 2)})
            print(f"{n:>7} points: redraw median {median:6.2f} ms, worst {worst:6.2f} ms", flush=True)
            page.close()
        browser.close()
        server.shutdown()

    result = {
        "benchmark": "app_chart",
        "title": "Loss chart redraw time by history length",
        "hardware": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, headless Chromium {version}",
        "date": datetime.date.today().isoformat(),
        "command": "python bench/bench_app_chart.py " + " ".join(sys.argv[1:]),
        "x_label": "points in the history",
        "series": [
            {"name": "median", "unit": "ms", "points": [{"x": r["points"], "y": r["median ms"]} for r in rows]},
            {"name": "worst", "unit": "ms", "points": [{"x": r["points"], "y": r["worst ms"]} for r in rows]},
        ],
        "rows": rows,
        "notes": "The app's chart (webapp/app/chart.ts) on a page of its own, redrawn after a change of scale, "
                 "timed within its animation frame; a 60 Hz frame is 16.7 ms.",
    }
    out = ROOT / "content" / "data" / "app_chart.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
