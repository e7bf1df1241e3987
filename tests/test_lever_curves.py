"""The GPU levers' release rule (facts.gate, content/docs/numerics-gate.md): a GPU lever that
exists (a folder in webapp/levers/) is shipped or experimental in facts.json, one that does not is
planned, and content/data/gpu_curves.json holds every shipped lever's passing curve_steps-step
loss curve, alone and in the stack, measured on the shaders it has now (bench/lever_curves.py on
a GPU host). A lever's shaders that changed after its curve was
measured fail here until the curve is measured again. CI also runs the check's short version
(Tiny, 50 steps of batches of 2, each lever alone: a software GPU takes minutes a run) here,
where every lever whose feature this adapter has must pass it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tinygpt.facts import FACTS
from tinygpt.site_build import node, wgsl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from lever_curves import GPU_LEVERS, built  # noqa: E402

CURVES = ROOT / "content" / "data" / "gpu_curves.json"
REMEASURE = "python bench/lever_curves.py --dawn-f16-toggle (on a GPU host; commit content/data/gpu_curves.json)"


STATUS = {lever["id"]: lever["status"] for lever in FACTS["levers"]}
SHIPPED = [lever for lever in GPU_LEVERS if STATUS[lever] == "shipped"]


def test_a_gpu_levers_status_says_whether_it_exists():
    for lever in GPU_LEVERS:
        exists = lever in built()
        assert (STATUS[lever] in ("shipped", "experimental")) == exists, \
            f"facts.json says {lever} is {STATUS[lever]}, but webapp/levers/{lever}/ {'exists' if exists else 'does not'}"


@pytest.mark.parametrize("lever", SHIPPED)
def test_each_lever_has_a_passing_release_curve_on_its_current_shaders(lever):
    doc = json.loads(CURVES.read_text())
    assert doc["preset"] == "small" and doc["steps"] == FACTS["gate"]["curve_steps"], \
        f"{CURVES.name} is a short run ({doc['preset']}, {doc['steps']} steps): {REMEASURE}"
    rows = [r for r in doc["rows"] if lever in r["levers"].split(",")]
    assert any(r["levers"] == lever for r in rows), f"no release curve of {lever} alone: {REMEASURE}"
    assert any(set(r["levers"].split(",")) >= set(SHIPPED) for r in doc["rows"]), f"no release curve of a stack of {SHIPPED}: {REMEASURE}"
    for row in rows:
        assert row["verdict"] == "pass", f"{row['levers']}: {row['verdict']} ({row.get('why', row)}): {REMEASURE}"
        assert row["shaders"][lever] == wgsl.lever_digest(ROOT, lever), \
            f"{lever}'s shaders changed after its {doc['steps']}-step curve was measured ({doc['date']}, " \
            f"{doc['hardware']}): {REMEASURE}"


@pytest.mark.parametrize("path", sorted(CURVES.parent.glob("gpu_curves_*.json")), ids=lambda p: p.name)
def test_every_other_committed_curve_passed_on_the_shaders_its_levers_have_now(path):
    # The curves on other presets (bench/lever_curves.py --preset ...), which the speedup page plots too.
    doc = json.loads(path.read_text())
    assert doc["rows"], f"{path.name} has no curve"
    for row in doc["rows"]:
        assert row["verdict"] == "pass", f"{path.name}: {row['levers']}: {row['verdict']}"
        for lever, digest in row["shaders"].items():
            assert digest == wgsl.lever_digest(ROOT, lever), \
                f"{path.name}: {lever}'s shaders changed after this curve was measured ({doc['date']}): run `{doc['command']}` again, or delete the file"


@pytest.mark.skipif(not node.dawn_driver(node.dawn_env()), reason="Dawn has no Vulkan driver here")
def test_the_short_release_check_passes_for_every_lever_this_adapter_runs(tmp_path):
    out = tmp_path / "curves.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "lever_curves.py"), "--preset", "tiny", "--steps", "50", "--batch-size", "2", "--no-stack",
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())["rows"]
    assert {r["levers"] for r in rows} >= set(built()), rows  # the experimental levers too: a regression there is news
    for row in rows:
        # Only a feature this adapter lacks excuses a lever from running here.
        assert row["verdict"] == "pass" or "lacks" in row.get("why", ""), row
