"""The release rule's comparison of two loss curves (facts.gate), one implementation for every
lever's release check (bench/lever_curves.py, webapp/levers/relaxed-simd/curve.py): each curve
is its running mean over facts.gate.curve_window steps, and the two must stay within
facts.gate.curve_rel_tolerance of each other at every step. One step's training loss is that of
one batch: two runs whose weights differ by rounding part by more than that from batch to batch
without either learning worse, which the running mean averages out. The largest per-step gap is
reported beside it."""
import json
import sys

from tinygpt.facts import FACTS


def running_mean(values: list[float], window: int) -> list[float]:
    """Mean of the last `window` values at each step (fewer at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def gap(got: list[float], want: list[float]) -> dict:
    """How far curve `got` strays from `want`: the largest relative gap of their running means (the
    rule), its step, whether it is within the tolerance, and the largest per-step gap."""
    window = FACTS["gate"]["curve_window"]
    smooth = [abs(a - b) / b for a, b in zip(running_mean(got, window), running_mean(want, window))]
    raw = [abs(a - b) / b for a, b in zip(got, want)]
    worst = max(range(len(smooth)), key=smooth.__getitem__)
    return {"largest relative difference": smooth[worst], "at step": worst + 1, "window": window,
            "largest per-step difference": max(raw), "pass": smooth[worst] <= FACTS["gate"]["curve_rel_tolerance"]}


def points(losses: list[float]) -> list[dict]:
    """A curve for the speedup page: about a hundred points, the last step always among them."""
    every = max(1, len(losses) // 100)
    return [{"x": i + 1, "y": round(v, 5)} for i, v in enumerate(losses) if i % every == 0 or i == len(losses) - 1]


def finish(doc: dict, out, ok: bool):
    """Writes the release check's JSON to `out` and exits 1 when a curve strayed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")
    sys.exit(0 if ok else 1)
