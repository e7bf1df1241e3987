"""Measured results for the speedup page: content/data/*.json, written by the
bench/ scripts (never by hand), drawn here as inline SVG at build time.

The JSON shape every bench script writes:

    {
      "benchmark": "matmul",                 # id, also the file's stem by convention
      "title": "Matmul throughput",          # optional heading; defaults to the id
      "hardware": "NVIDIA H200 via Dawn",    # what it ran on
      "date": "2026-11-30",                  # ISO date (a full ISO time is fine)
      "command": "python bench/bench_matmul.py",
      "x_label": "matrix size",              # optional axis label
      "series": [                            # one line (numeric x) or bar group (text x) each
        {"name": "tiled f32", "unit": "GFLOP/s",
         "points": [{"x": 1024, "y": 812.5}, {"x": 2048, "y": 1210.0}]}
      ],
      "rows": [{"kernel": "tiled", "size": 2048, "GFLOP/s": 1210.0}],   # optional table
      "notes": "TF32 off for cuBLAS."        # optional sentence shown under the plot
    }

Series with different units get separate plots. x values are all numbers
(a line plot) or all strings (grouped bars, in first-seen order). A file with
"series" must match this shape exactly or the build fails; a file without it is
listed on the page as not plotted yet (and noted in the build output), so one
bench script's other format does not stop everyone's build.
"""
import math
from html import escape
from pathlib import Path

from markupsafe import Markup

from .context import BuildError, read_json

W, H = 640, 300
N_COLOURS = 8  # .series-0 ... .series-7 in site/site.css
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 48


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(value))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * step >= value:
            return m * step
    return 10 * step


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _check(data, where) -> dict:
    if not isinstance(data, dict):
        raise BuildError("measured results must be a JSON object", where())
    for key in ("benchmark", "hardware", "date", "command", "series"):
        if key not in data:
            raise BuildError(f"missing key {key!r} (see tinygpt/build/plots.py for the shape)", where())
    if not isinstance(data["series"], list) or not data["series"]:
        raise BuildError("'series' must be a non-empty list", where("series"))
    for i, s in enumerate(data["series"]):
        if not isinstance(s, dict) or not {"name", "unit", "points"} <= s.keys() or not s["points"]:
            raise BuildError(f"series[{i}] needs name, unit and a non-empty points list", where("series", i))
        for j, p in enumerate(s["points"]):
            if not isinstance(p, dict) or not isinstance(p.get("y"), (int, float)) or "x" not in p:
                raise BuildError(f"series[{i}].points[{j}] needs x and a numeric y", where("series", i, "points", j))
        if len({type(p["x"]) is str for p in s["points"]}) > 1:
            raise BuildError(f"series[{i}] mixes text and number x values", where("series", i, "points"))
    return data


def svg(series: list[dict], x_label: str, title: str) -> Markup:
    """One plot of series sharing a unit, each with its colour class `cls`; styled by
    site.css (no inline style)."""
    unit = series[0]["unit"]
    cls = [s["cls"] for s in series]
    xs = [p["x"] for s in series for p in s["points"]]
    categorical = isinstance(xs[0], str)
    ymax = _nice_max(max(p["y"] for s in series for p in s["points"]))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def y_at(v):
        return TOP + ph - ph * v / ymax

    parts = [f'<svg class="plot" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(title)}">',
             f"<title>{escape(title)}</title>"]
    for i in range(6):
        v = ymax * i / 5
        y = y_at(v)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    parts.append(f'<text class="axis-label" x="14" y="{TOP + ph / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {TOP + ph / 2:.0f})">{escape(unit)}</text>')
    if categorical:
        cats = list(dict.fromkeys(xs))
        group = pw / len(cats)
        present = {cat: [k for k, s in enumerate(series) if any(p["x"] == cat for p in s["points"])] for cat in cats}
        bar = min(56, group * 0.8 / max(len(ks) for ks in present.values()))
        for c, cat in enumerate(cats):
            cx = LEFT + group * (c + 0.5)
            parts.append(f'<text class="tick" x="{cx:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{escape(cat)}</text>')
            for slot, k in enumerate(present[cat]):  # bars of one category sit side by side, centred
                s = series[k]
                y = next(p["y"] for p in s["points"] if p["x"] == cat)
                x0 = cx - bar * len(present[cat]) / 2 + bar * slot
                parts.append(f'<rect class="{cls[k]}" x="{x0:.1f}" y="{y_at(y):.1f}" '
                             f'width="{bar:.1f}" height="{TOP + ph - y_at(y):.1f}">'
                             f'<title>{escape(s["name"])}: {_fmt(y)} {escape(unit)}</title></rect>')
    else:
        lo, hi = min(xs), max(xs)
        log = lo > 0 and hi / lo >= 16  # sizes that double: spread them evenly
        f = (lambda v: math.log(v)) if log else (lambda v: v)
        span = (f(hi) - f(lo)) or 1

        inset = 24  # keeps the first and last tick labels inside the figure

        def x_at(v):
            return LEFT + inset + (pw - 2 * inset) * (f(v) - f(lo)) / span

        for v in sorted(set(xs)):
            parts.append(f'<text class="tick" x="{x_at(v):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{_fmt(v)}</text>')
        for k, s in enumerate(series):
            pts = sorted(s["points"], key=lambda p: p["x"])
            path = " ".join(f"{x_at(p['x']):.1f},{y_at(p['y']):.1f}" for p in pts)
            parts.append(f'<polyline class="line {cls[k]}" points="{path}"/>')
            for p in pts:
                parts.append(f'<circle class="{cls[k]}" cx="{x_at(p["x"]):.1f}" cy="{y_at(p["y"]):.1f}" r="3">'
                             f'<title>{escape(s["name"])}: {_fmt(p["y"])} {escape(unit)} at {_fmt(p["x"])}</title></circle>')
    if x_label:
        parts.append(f'<text class="axis-label" x="{LEFT + pw / 2:.0f}" y="{H - 8}" text-anchor="middle">{escape(x_label)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def load(root: Path) -> tuple[list[dict], list[dict]]:
    """content/data/*.json -> (plotted, unplotted). Plotted: {benchmark, title, hardware, date,
    command, notes, plots, legend, rows, columns, source}; unplotted: {source, date, command}."""
    results, unplotted = [], []
    for path in sorted((root / "content" / "data").glob("*.json")):
        source = str(path.relative_to(root))
        data, where = read_json(path, source)
        if isinstance(data, dict) and "series" not in data:
            unplotted.append({"source": source, "date": str(data.get("date", "")), "command": data.get("command", "")})
            continue
        data = _check(data, where)
        title = data.get("title") or data["benchmark"]
        data["series"] = [{**s, "cls": f"series-{i % N_COLOURS}"} for i, s in enumerate(data["series"])]
        units = list(dict.fromkeys(s["unit"] for s in data["series"]))
        figures = [svg([s for s in data["series"] if s["unit"] == u], data.get("x_label", ""), f"{title} ({u})")
                   for u in units]
        legend = [{"name": s["name"], "cls": s["cls"]} for s in data["series"]]
        rows = data.get("rows") or []
        results.append({"benchmark": data["benchmark"], "title": title, "hardware": data["hardware"],
                        "date": str(data["date"]), "command": data["command"], "notes": data.get("notes", ""),
                        "plots": figures, "legend": legend, "rows": rows,
                        "columns": list(dict.fromkeys(k for r in rows for k in r)), "source": source})
    return results, unplotted
