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

Series with different units get separate plots, each with its own legend and
at most N_COLOURS series (one colour each). x values are all numbers (a line
plot, on a log axis when each x is at least 1.5 times the one before) or all
strings (grouped bars, in first-seen order). A file with
"series" must match this shape exactly or the build fails; a file without it is
listed on the page as not plotted yet (and noted in the build output), so one
bench script's other format does not stop everyone's build.
"""
import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

from markupsafe import Markup

from .context import BuildError, read_json

N_COLOURS = 10  # .series-0 ... .series-9 in site/site.css
COINCIDE = 0.01  # lines closer than this fraction of the y scale at every x look like one line


@dataclass(frozen=True)
class Layout:
    """One drawing of a plot. The SVG scales to its box, so text is sized for the width it is
    shown at: the wide drawing for desks, the narrow one for phones (site.css picks one)."""
    name: str
    width: int
    plot_height: int  # of the plotting area; the figure adds the room its labels need
    font: float  # px in viewBox units; set on the <svg>, so the label widths below use the same size

    def text_width(self, text: str) -> float:
        return 0.6 * self.font * len(text)  # an upper bound for system-ui at this size


WIDE = Layout("wide", 640, 230, 11)
NARROW = Layout("narrow", 360, 220, 13)
LAYOUTS = (WIDE, NARROW)
GAP = 6  # the least space between two axis labels, in viewBox units


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


def _tick(v: float) -> str:
    """An axis label: short, so it fits a phone (the points' tooltips keep every digit)."""
    for least, div, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if abs(v) >= least:
            return f"{v / div:.3g}{suffix}"
    return _fmt(v)


def _thin(positions: list[float], widths: list[float]) -> list[int]:
    """Indexes of the labels to draw (centred at positions) so that none overlaps the next: the
    first, then each one that clears the last kept; the last label replaces the one before it
    when both do not fit."""
    kept: list[int] = []
    for i, (x, w) in enumerate(zip(positions, widths)):
        if not kept or x - w / 2 >= positions[kept[-1]] + widths[kept[-1]] / 2 + GAP:
            kept.append(i)
    last = len(positions) - 1
    if kept and kept[-1] != last:
        if len(kept) > 1:
            kept.pop()
        kept.append(last)
    return kept


def _wrap(text: str, room: float, layout: Layout) -> list[str]:
    """text in lines no wider than room, broken between words."""
    lines = [""]
    for word in text.split():
        joined = f"{lines[-1]} {word}".strip()
        if lines[-1] and layout.text_width(joined) > room:
            lines.append(word)
        else:
            lines[-1] = joined
    return lines


def _linear_ticks(lo: float, hi: float, room: float, layout: Layout) -> list[float]:
    """Round values within [lo, hi], as many as fit in room (viewBox units) side by side."""
    if hi == lo:
        return [lo]
    for exp in range(math.floor(math.log10(hi - lo)) - 2, math.floor(math.log10(hi - lo)) + 2):
        for m in (1, 2, 5):
            step = m * 10 ** exp
            ticks = [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
            if len(ticks) < 2:
                continue
            widest = max(layout.text_width(_tick(t)) for t in ticks)
            if room * step / (hi - lo) >= widest + GAP:
                return ticks
    return [lo, hi]


def _coincides(a: dict, b: dict, ymax: float) -> bool:
    pa = {p["x"]: p["y"] for p in a["points"]}
    pb = {p["x"]: p["y"] for p in b["points"]}
    return pa.keys() == pb.keys() and all(abs(pa[x] - pb[x]) <= COINCIDE * ymax for x in pa)


def coinciding(series: list[dict]) -> dict[int, int]:
    """For line series drawn exactly over an earlier one: their index -> that earlier one's."""
    if isinstance(series[0]["points"][0]["x"], str):
        return {}  # bars stand side by side
    ymax = _nice_max(max(p["y"] for s in series for p in s["points"]))
    found = {}
    for k, s in enumerate(series):
        earlier = next((j for j in range(k) if j not in found and _coincides(series[j], s, ymax)), None)
        if earlier is not None:
            found[k] = earlier
    return found


def svg(series: list[dict], x_label: str, title: str, layout: Layout, over: dict[int, int]) -> Markup:
    """One drawing of series sharing a unit, series k in colour class series-k; styled by site.css
    (no inline style). The series in `over` (see coinciding) are drawn dashed over the earlier one."""
    unit = series[0]["unit"]
    xs = [p["x"] for s in series for p in s["points"]]
    categorical = isinstance(xs[0], str)
    ymax = _nice_max(max(p["y"] for s in series for p in s["points"]))
    W, ph, font = layout.width, layout.plot_height, layout.font
    y_ticks = [ymax * i / 5 for i in range(6)]
    left = font * 1.6 + max(layout.text_width(_tick(v)) for v in y_ticks) + 6  # the unit, rotated, then the ticks
    right, top = 12, 12

    label_depth = font  # how far the x labels reach below the axis
    if categorical:
        cats = list(dict.fromkeys(xs))
        widest = max(layout.text_width(c) for c in cats)
        # Names that do not fit side by side are slanted at 45 degrees (then the first one, reaching
        # down to the left, must stay inside the figure); slanted names need ~1.7 font heights apart.
        slanted = widest + GAP > (W - left - right) / len(cats)
        if slanted:
            left = max(left, layout.text_width(cats[0]) * math.sqrt(0.5) - (W - left - right) / len(cats) / 2 + 4)
            label_depth = widest * math.sqrt(0.5) + font
        group = (W - left - right) / len(cats)
        step = math.ceil(1.7 * font / group) if slanted else 1  # draws every step-th name
    axis_lines = _wrap(x_label, W - 2 * font, layout) if x_label else []
    bottom = label_depth + 10 + font * 1.3 * len(axis_lines) + (font * 0.5 if axis_lines else 0)
    pw, H = W - left - right, top + ph + bottom

    def y_at(v):
        return top + ph - ph * v / ymax

    parts = [f'<svg class="plot plot-{layout.name}" viewBox="0 0 {W} {H}" font-size="{font:g}" role="img" '
             f'aria-label="{escape(title)}">', f"<title>{escape(title)}</title>"]
    for v in y_ticks:
        y = y_at(v)
        parts.append(f'<line class="grid" x1="{left:.1f}" x2="{W - right}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(f'<text class="tick tick-y" x="{left - 6:.1f}" y="{y + font / 3:.1f}" text-anchor="end">{_tick(v)}</text>')
    parts.append(f'<text class="axis-label" x="{font:g}" y="{top + ph / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 {font:g} {top + ph / 2:.0f})">{escape(unit)}</text>')
    base = top + ph + font + 4  # the baseline of the x labels
    if categorical:
        present = {cat: [k for k, s in enumerate(series) if any(p["x"] == cat for p in s["points"])] for cat in cats}
        bar = min(56, group * 0.8 / max(len(ks) for ks in present.values()))
        for c, cat in enumerate(cats):
            cx = left + group * (c + 0.5)
            if c % step == 0 and not slanted:
                parts.append(f'<text class="tick tick-x" x="{cx:.1f}" y="{base:.1f}" text-anchor="middle">{escape(cat)}</text>')
            elif c % step == 0:
                parts.append(f'<text class="tick tick-x" x="{cx:.1f}" y="{base:.1f}" text-anchor="end" '
                             f'transform="rotate(-45 {cx:.1f} {base:.1f})">{escape(cat)}</text>')
            for slot, k in enumerate(present[cat]):  # bars of one category sit side by side, centred
                s = series[k]
                y = next(p["y"] for p in s["points"] if p["x"] == cat)
                x0 = cx - bar * len(present[cat]) / 2 + bar * slot
                parts.append(f'<rect class="series-{k}" x="{x0:.1f}" y="{y_at(y):.1f}" '
                             f'width="{bar:.1f}" height="{top + ph - y_at(y):.1f}">'
                             f'<title>{escape(s["name"])}: {_fmt(y)} {escape(unit)}</title></rect>')
    else:
        lo, hi = min(xs), max(xs)
        distinct = sorted(set(xs))
        # Sizes that grow by a factor (1024, 2048, 4096) are spread evenly on a log axis.
        log = lo > 0 and len(distinct) > 2 and all(b >= 1.5 * a for a, b in zip(distinct, distinct[1:]))
        f = math.log if log else (lambda v: v)
        span = (f(hi) - f(lo)) or 1
        inset = layout.text_width(_tick(hi)) / 2  # keeps the first and last labels inside the figure

        def x_at(v):
            return left + inset + (pw - 2 * inset) * (f(v) - f(lo)) / span

        ticks = distinct if log else _linear_ticks(lo, hi, pw - 2 * inset, layout)
        shown = _thin([x_at(v) for v in ticks], [layout.text_width(_tick(v)) for v in ticks])
        for i in shown:
            parts.append(f'<text class="tick tick-x" x="{x_at(ticks[i]):.1f}" y="{base:.1f}" text-anchor="middle">'
                         f"{_tick(ticks[i])}</text>")
        for k, s in enumerate(series):
            pts = sorted(s["points"], key=lambda p: p["x"])
            path = " ".join(f"{x_at(p['x']):.1f},{y_at(p['y']):.1f}" for p in pts)
            dashed = " dashed" if k in over else ""
            parts.append(f'<polyline class="line series-{k}{dashed}" points="{path}"/>')
            if len(pts) > 20:
                continue  # a dense curve reads as a line; a marker per point would hide it
            for p in pts:
                marker = f'class="ring series-{k}" r="5"' if k in over else f'class="series-{k}" r="3"'
                parts.append(f'<circle {marker} cx="{x_at(p["x"]):.1f}" cy="{y_at(p["y"]):.1f}">'
                             f'<title>{escape(s["name"])}: {_fmt(p["y"])} {escape(unit)} at {_fmt(p["x"])}</title></circle>')
    for i, line in enumerate(axis_lines):
        y = H - font / 2 - font * 1.3 * (len(axis_lines) - 1 - i)
        parts.append(f'<text class="axis-label" x="{W / 2:.0f}" y="{y:.0f}" text-anchor="middle">{escape(line)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def figure(series: list[dict], x_label: str, title: str) -> dict:
    """A plot of series sharing a unit: {drawings: an SVG per layout, legend: [{name, cls, note}]}."""
    over = coinciding(series)
    legend = [{"name": s["name"], "cls": f"series-{k}",
               "note": f"the same as {series[over[k]]['name']}, drawn dashed over it" if k in over else ""}
              for k, s in enumerate(series)]
    return {"drawings": [svg(series, x_label, title, layout, over) for layout in LAYOUTS], "legend": legend}


def _check(data, where) -> dict:
    if not isinstance(data, dict):
        raise BuildError("measured results must be a JSON object", where())
    for key in ("benchmark", "hardware", "date", "command", "series"):
        if key not in data:
            raise BuildError(f"missing key {key!r} (see tinygpt/site_build/plots.py for the shape)", where())
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


def load(root: Path) -> tuple[list[dict], list[dict]]:
    """content/data/*.json -> (plotted, unplotted). Plotted: {id (the file's stem), benchmark, title,
    hardware, date, command, notes, figures (see figure()), rows, columns, source}; unplotted:
    {source, date, command}."""
    results, unplotted = [], []
    for path in sorted((root / "content" / "data").glob("*.json")):
        source = str(path.relative_to(root))
        data, where = read_json(path, source)
        if isinstance(data, dict) and "series" not in data:
            unplotted.append({"source": source, "date": str(data.get("date", "")), "command": data.get("command", "")})
            continue
        data = _check(data, where)
        title = data.get("title") or data["benchmark"]
        units = list(dict.fromkeys(s["unit"] for s in data["series"]))
        figures = []
        for u in units:
            same = [s for s in data["series"] if s["unit"] == u]
            if len(same) > N_COLOURS:
                first = data["series"].index(same[N_COLOURS])
                raise BuildError(f"{len(same)} series in {u}: one plot tells at most {N_COLOURS} apart by colour",
                                 where("series", first))
            figures.append(figure(same, data.get("x_label", ""), f"{title} ({u})"))
        rows = data.get("rows") or []
        results.append({"id": path.stem, "benchmark": data["benchmark"], "title": title, "hardware": data["hardware"],
                        "date": str(data["date"]), "command": data["command"], "notes": data.get("notes", ""),
                        "figures": figures, "rows": rows,
                        "columns": list(dict.fromkeys(k for r in rows for k in r)), "source": source})
    return results, unplotted
