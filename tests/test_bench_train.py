"""bench/bench_train.py's view for the speedup page: the committed content/data/train_gpu.json
holds what plot_fields makes of its own results (nothing typed in), and a step's profile is
summed by op family as the page says."""
import json
import sys
from pathlib import Path

from tinygpt.site_build import plots

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import bench_train  # noqa: E402


def test_a_profile_sums_by_op_family():
    profile = [{"op": "matmul_vec4_nn (matmul_nn)", "ms": 2.0}, {"op": "matmul_tn", "ms": 0.5},
               {"op": "attention_forward_64 (attention_forward)", "ms": 1.25}, {"op": "layernorm_forward", "ms": 0.25},
               {"op": "adamw", "ms": 0.125}]
    assert bench_train.families(profile) == {"matmuls": 2.5, "attention": 1.25, "the rest": 0.375}


def test_the_profile_series_follow_each_presets_own_app_path():
    def run(ms):
        return {"tokens_per_s": 1000.0, "ms_per_step": 1.0, "profile": [{"op": "matmul_nn", "ms": ms}]}
    doc = {"gpu": "GPU", "webgpu_adapter": "adapter", "results": [
        {"preset": "tiny", "params": 1, "app": "subgroups", "webgpu": {"none": run(4.0), "subgroups": run(3.0), "a,b": run(9.0)}, "pytorch": {}},
        {"preset": "huge", "params": 2, "app": "none", "webgpu": {"none": run(8.0)}, "pytorch": {}},
    ]}
    series = {s["name"]: s["points"] for s in bench_train.plot_fields(doc)["series"]}
    assert series["plain f32: matmuls"] == [{"x": "tiny", "y": 4.0}, {"x": "huge", "y": 8.0}]
    assert series["the app's path: matmuls"] == [{"x": "tiny", "y": 3.0}, {"x": "huge", "y": 8.0}]
    assert series["the app's path: attention"] == [{"x": "tiny", "y": 0.0}, {"x": "huge", "y": 0.0}]


def test_the_committed_run_shows_what_its_results_say():
    path = ROOT / "content" / "data" / "train_gpu.json"
    doc = json.loads(path.read_text())
    plots._check(doc, lambda *keys: f"{path}: {keys}")
    view = bench_train.plot_fields(doc)
    assert {k: doc[k] for k in view} == view, "content/data/train_gpu.json's plotted fields differ from its results: run bench/bench_train.py again"
