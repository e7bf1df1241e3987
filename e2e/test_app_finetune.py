"""Fine-tuning in the app: what fine-tuning a gallery model holds shown before it starts (less
than full training), the model fine-tuned with a LoRA adapter on a pasted text (its validation
loss on that text falls), sampled with and without the adapter from one seed, the adapter
exported (a file naming its base) and kept across a reload, refused on another model with both
named, and merged into a plain model that samples the same bytes at temperature 0."""
import hashlib
import re

import numpy as np
from playwright.sync_api import expect

from appdriver import loss_table, open_app, sample, wait_finished, wait_for, wait_ready, wait_state
from test_app_gallery import gallery_models, load
from tinygpt import checkpoint

STEPS = 60
# A text unlike Shakespeare's, repeated so that 60 steps can learn it.
TEXT = "".join(f"order {i}: {n} boxes of nails, {n + 3} rolls of tape, shipped to dock {i % 7}.\n"
               for i, n in enumerate(range(11, 400, 9)))
GREEDY = {"temperature": 0, "top_k": 0, "length": 80, "timeout": 120, "seed": 1}


def model(dist, id_: str) -> dict:
    return next(m for m in gallery_models(dist) if m["id"] == id_)


def held(text: str) -> float:
    """The bytes in a figure the app writes (format.ts bytes: "15.7 MiB")."""
    value, unit = re.search(r"([\d.]+) (B|KiB|MiB|GiB)", text).groups()
    return float(value) * 1024 ** ["B", "KiB", "MiB", "GiB"].index(unit)


def download(page, button: str, into):
    with page.expect_download() as d:
        page.click(button)
    path = into / d.value.suggested_filename
    d.value.save_as(path)
    return path


def test_fine_tune_a_gallery_model_compare_keep_refuse_and_merge(open_page, browser_no_webgpu, dist, tmp_path):
    base, other = model(dist, "shakespeare-tiny"), model(dist, "python-tiny")
    visit = open_app(open_page, browser_no_webgpu, seed=3)
    page = visit.page
    load(page, base)
    page.check("input[name=corpus-source][value=paste]")
    page.fill("#corpus-text", TEXT)
    page.fill("#eval-every", "20")
    page.fill("#save-every", "20")
    page.locator("#lora summary").click()
    # Before it starts, what fine-tuning would hold: less than the size's card says full training holds.
    expect(page.locator("#lora-memory")).to_contain_text("Fine-tuning the loaded model holds")
    expect(page.locator('[data-preset-memory="tiny"]')).to_contain_text("while training")
    tuning, full = (held(page.locator(s).inner_text()) for s in ("#lora-memory", '[data-preset-memory="tiny"]'))
    assert 0 < tuning < full, (tuning, full)
    page.fill("#lora-steps", str(STEPS))
    page.fill("#lora-lr", "0.003")
    page.click("#btn-finetune")
    wait_finished(page, STEPS)
    expect(page.locator("#loaded-shape")).to_contain_text(f"rank-8 adapter on q, v at step {STEPS}, fine-tuning {base['name']}")

    vals = [v for _, _, v in loss_table(page) if v is not None]
    assert len(vals) == STEPS // 20 and vals == sorted(vals, reverse=True) and vals[-1] < 0.8 * vals[0], vals

    # The same seed with and without the adapter: the adapter's text is the one Generate gives.
    adapted, _ = sample(page, "order 5", **GREEDY)
    page.click("#btn-sample-compare")
    both = page.locator("#sample-base-out[data-done=yes], #sample-out[data-done=yes]")
    wait_for(lambda: both.count() == 2, 120, "both samples of the comparison", page)
    wait_state(page, "ready", 10)
    assert page.locator("#sample-out").inner_text() == adapted
    alone = page.locator("#sample-base-out").inner_text()
    assert alone.startswith("order 5") and alone != adapted

    # The adapter's file names its base by the sha256 of the gallery file's weights.
    adapter = download(page, "#btn-export", tmp_path)
    read = checkpoint.load(adapter)
    gallery_file = checkpoint.load(dist / "gallery" / base["file"])
    assert read.adapter["base_sha256"] == checkpoint.weights_sha256(gallery_file)
    assert read.adapter["rank"] == 8 and adapter.stat().st_size < gallery_file_bytes(dist, base) / 2
    merged = download(page, "#btn-merge", tmp_path)

    # A reload keeps the run: its adapter and the model under it.
    page.reload()
    wait_ready(page)
    run = page.locator("#checkpoint-list li", has_text=f"adapter on {base['name']}")
    expect(run).to_have_count(1, timeout=30_000)
    run.get_by_role("button", name="Load to sample").click()
    expect(page.locator("#loaded-shape")).to_contain_text("adapter", timeout=60_000)
    wait_state(page, "ready", 60)
    assert sample(page, "order 5", **GREEDY)[0] == adapted

    # The adapter's file imported onto its model, and the merged model, write the same bytes. (Both
    # without a text, so neither samples on the int8 lever, which checks itself on held-out text.)
    load(page, base)
    page.set_input_files("#import-file", str(adapter))
    expect(page.locator("#messages")).to_contain_text(f"Loaded the adapter {adapter.name} onto {base['name']}", timeout=60_000)
    wait_state(page, "ready", 60)
    expect(page.locator("#btn-merge")).to_be_visible()
    imported = sample(page, "order 5", **GREEDY)[0]
    page.set_input_files("#import-file", str(merged))
    expect(page.locator("#messages")).to_contain_text(f"Loaded {merged.name}", timeout=60_000)
    wait_state(page, "ready", 60)
    expect(page.locator("#btn-merge")).to_be_hidden()
    assert sample(page, "order 5", **GREEDY)[0] == imported
    weights = checkpoint.load(merged).params
    assert not np.array_equal(weights["blocks.0.attn.q_proj.weight"], gallery_file.params["blocks.0.attn.q_proj.weight"])

    # Onto another model the adapter is refused, naming both, and that model stays loaded.
    load(page, other)
    page.set_input_files("#import-file", str(adapter))
    error = page.locator("#messages .message-error", has_text=f"{adapter.name} was trained on another base")
    expect(error).to_contain_text(f"not on {other['name']}", timeout=30_000)
    expect(error).to_contain_text("The current model is unchanged")
    wait_state(page, "ready", 30)
    expect(page.locator("#loaded-shape")).not_to_contain_text("rank-8 adapter")
    assert visit.problems() == []


def gallery_file_bytes(dist, m: dict) -> int:
    path = dist / "gallery" / m["file"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == m["sha256"]
    return path.stat().st_size
