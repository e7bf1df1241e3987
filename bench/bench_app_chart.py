"""How long the app's loss chart takes to redraw as its history grows, in
headless Chromium against the built dist/.

    python bench/bench_app_chart.py [--points 1000 10000 100000] [--redraws 20]

For each size a Tiny model whose history holds that many points (a synthetic
decaying curve with noise: drawing cost does not depend on the values) is
imported into /app/; then the log-scale box is flipped --redraws times and the
chart's redraw is timed inside the animation frame it runs in (see TIMED_FLIP).
A frame at 60 Hz is 16.7 ms: "smooth at 10,000 points" means a redraw well
under that. Writes content/data/app_chart.json.
"""
import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tinygpt import checkpoint, model  # noqa: E402
from tinygpt.build import serve  # noqa: E402
from tinygpt.facts import FACTS  # noqa: E402

# Animation-frame callbacks run in the order they were requested: one requested
# before the click, the chart's redraw (requested by the click), one after. The
# time between the first and the last is the redraw's share of that frame.
TIMED_FLIP = """async () => {
    const box = document.querySelector('#log-scale');
    let start = 0;
    const before = new Promise(r => requestAnimationFrame(() => { start = performance.now(); r(); }));
    box.click();
    const after = new Promise(r => requestAnimationFrame(() => r(performance.now())));
    await before;
    return (await after) - start;
}"""


def model_file(points: int, path: Path):
    tiny = FACTS["presets"][0]
    config = model.GPTConfig(vocab_size=FACTS["vocab_size"], n_layer=tiny["n_layer"], n_embd=tiny["n_embd"],
                             n_head=tiny["n_head"], block_size=tiny["block_size"])
    rng = np.random.default_rng(0)
    steps = np.arange(1, points + 1)
    train = 1.5 + 4.0 * np.exp(-steps / (points / 8)) + rng.normal(0, 0.05, points)
    history = [{"step": int(s), "train": float(t)} for s, t in zip(steps, train)]
    for p in history[49::50]:
        p["val"] = p["train"] + 0.1
    ckpt = checkpoint.Checkpoint(config=config, params=model.init_params(config, seed=0), history=history)
    path.write_bytes(checkpoint.to_bytes(ckpt))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--redraws", type=int, default=20)
    args = parser.parse_args()
    dist = ROOT / "dist"
    if not (dist / "app" / "index.html").exists():
        sys.exit("dist/app/index.html is missing: run `python build.py` first")

    from playwright.sync_api import sync_playwright

    server, url = serve.start_in_thread(dist)
    rows = []
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        exe = os.environ.get("TINYGPT_CHROMIUM") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        version = browser.version
        for n in args.points:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(url + "/app/")
            page.wait_for_selector("#worker-status[data-ready=yes]")
            path = Path(tmp) / f"history-{n}.tinygpt"
            model_file(n, path)
            page.set_input_files("#import-file", str(path))
            page.wait_for_selector(f"#messages :text('Loaded {path.name}')", timeout=120_000)
            page.locator("#loss-chart").scroll_into_view_if_needed()
            page.evaluate(TIMED_FLIP)  # the first draw after import warms caches
            times = sorted(page.evaluate(TIMED_FLIP) for _ in range(args.redraws))
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
        "notes": "The chart's redraw after a click on the log-scale box, timed within its animation frame; "
                 "a 60 Hz frame is 16.7 ms.",
    }
    out = ROOT / "content" / "data" / "app_chart.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
