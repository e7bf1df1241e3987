"""bench/bench_lora.py end to end on Tiny: both modes train, fine-tuning holds less memory than full
training, the adapter's size is the layout's, and what it writes is a file the speedup page can plot;
and each committed content/data/lora_*.json (WebAssembly here, WebGPU on a data-centre GPU) shows what its own results say."""
import json
import sys
from pathlib import Path

import pytest

from tinygpt import model
from tinygpt.lora import LoraConfig, adapter_specs
from tinygpt.site_build import plots

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import bench_lora  # noqa: E402


def layout_bytes(preset_id: str) -> int:
    return 4 * sum(r * c for _, (r, c) in adapter_specs(model.GPTConfig.from_preset(preset_id), LoraConfig()))


def check_sizes(doc: dict):
    """The engine's adapter (webapp/engine/lora.ts) is the reference's, and Huge's size is always there."""
    for r in doc["results"]:
        assert r["adapter_bytes"] == 4 * r["adapter_params"] == layout_bytes(r["preset"]), r["preset"]
    sizes = {a["preset"]: a["bytes"] for a in doc["adapters"]}
    assert sizes == {p: layout_bytes(p) for p in sizes} and bench_lora.TARGET_PRESET in sizes


def test_lora_benchmark_writes_a_plottable_result(tmp_path):
    out = tmp_path / "lora_cpu.json"
    bench_lora.main(["--presets", "tiny", "--threads", "1", "--seconds", "0.5", "--rounds", "2", "--out", str(out)])
    doc = json.loads(out.read_text())
    [r] = doc["results"]
    for mode in ("full", "finetune"):
        assert r[mode]["steps"] >= 2 and r[mode]["tokens_per_s"] > 0 and len(r[mode]["rounds_tokens_per_s"]) == 2, mode
    assert r["finetune"]["resident_bytes"] < r["full"]["resident_bytes"]
    check_sizes(doc)
    assert [a["preset"] for a in doc["adapters"]] == ["tiny", "huge"]
    plots._check(doc, lambda *keys: f"{out}: {keys}")
    assert {s["name"] for s in doc["series"]} == {"WebAssembly, full training, 1 thread", "WebAssembly, LoRA fine-tuning, 1 thread"}


@pytest.mark.parametrize("path", sorted((ROOT / "content" / "data").glob("lora_*.json")), ids=lambda p: p.name)
def test_the_committed_runs_show_what_their_results_say(path):
    doc = json.loads(path.read_text())
    plots._check(doc, lambda *keys: f"{path}: {keys}")
    check_sizes(doc)
    view = bench_lora.plot_fields(doc)
    assert {k: doc[k] for k in view} == view, f"{path.name}'s plotted fields differ from its results: run bench/bench_lora.py again"
