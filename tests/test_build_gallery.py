"""The gallery manifest: the schema (FIELDS) and the entry held to its file; every error names the
manifest line of the model or key at fault."""
import copy
import dataclasses
import hashlib
import json
from functools import lru_cache

import pytest

from tinygpt import checkpoint, model
from tinygpt.facts import FACTS
from tinygpt.site_build import gallery
from tinygpt.site_build.context import REPO, BuildError, Context
from tinygpt.train import TrainConfig

MAGIC = FACTS["format"]["magic"].encode()
TINY = FACTS["presets"][0]
SHAPE = {k: TINY[k] for k in ("n_layer", "n_embd", "n_head", "block_size")}
CORPUS_SHA = hashlib.sha256(b"the prepared text").hexdigest()
STEPS = 5


@lru_cache
def saved(seed: int) -> bytes:
    """A real .tinygpt of the tiny preset, f16, at step STEPS, trained (it says) on CORPUS_SHA."""
    config = model.GPTConfig(vocab_size=256, **SHAPE)
    trainer = {"step": STEPS, "config": dataclasses.asdict(TrainConfig(batch_size=2, lr=1e-3))}
    dataset = {"name": "shakespeare.txt", "bytes": 17, "sha256": CORPUS_SHA}
    return checkpoint.to_bytes(checkpoint.Checkpoint(config=config, params=model.init_params(config, seed),
                                                     trainer=trainer, dataset=dataset), "f16")


def entry(tmp_path, name: str, data: bytes) -> dict:
    (tmp_path / "gallery" / f"{name}.tinygpt").write_bytes(data)
    text = "a continuation"
    return {
        "id": name, "name": name.title(), "blurb": "A test model.",
        "corpus": {"id": "shakespeare", "name": "Shakespeare", "licence": "public domain", "sha256": CORPUS_SHA},
        "preset": TINY["id"], "config": {"vocab_size": 256, **SHAPE},
        "parameters": model.param_count(model.GPTConfig(vocab_size=256, **SHAPE)), "dtype": "f16",
        "file": f"{name}.tinygpt", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
        "training": {"steps": STEPS, "wall_time_s": None, "hardware": "a test", "date": "2026-12-06",
                     "levers": [], "command": "pytest"},
        "train_loss": 5.5, "val_loss": 5.6, "val_loss_unquantized": None,
        "sample": {"prompt": "ROMEO:", "temperature": 0, "top_k": 0, "top_p": 1, "seed": 1,
                   "tokens": len(text.encode()), "text": text},
    }


def build(tmp_path, models: list, text: str | None = None) -> str:
    """Runs the step on a manifest of models (or on text); returns the manifest's text."""
    text = text if text is not None else json.dumps({"models": models}, indent=2)
    (tmp_path / "gallery" / "manifest.json").write_text(text)
    gallery.run(Context(root=tmp_path, out=tmp_path / "out", cache=tmp_path / ".cache"))
    return text


def at(text: str, needle: str, nth: int = 0) -> str:
    """The manifest's nth line containing needle, found without the code under test."""
    return "gallery/manifest.json:%d" % [n for n, line in enumerate(text.split("\n"), 1) if needle in line][nth]


def key_line(text: str, path: str, nth: int = -1) -> str:
    """The line of a model's key ("sample.seed"), the last model's unless nth says, found by its
    indentation in json.dumps(indent=2): a model's keys at 6 spaces, an inner object's at 8."""
    depth = 6 + 2 * path.count(".")
    key = path.split(".")[-1]
    return "gallery/manifest.json:%d" % [n for n, line in enumerate(text.split("\n"), 1)
                                         if line.startswith(" " * depth + f'"{key}":')][nth]


@pytest.fixture
def two(tmp_path):
    (tmp_path / "gallery").mkdir()
    return [entry(tmp_path, "a", saved(1)), entry(tmp_path, "b", saved(2))]


def error(tmp_path, models, text=None) -> tuple[BuildError, str]:
    text = text if text is not None else json.dumps({"models": models}, indent=2)
    with pytest.raises(BuildError) as e:
        build(tmp_path, models, text)
    return e.value, text


def test_good_models_are_copied_with_the_manifest(tmp_path, two):
    text = build(tmp_path, two)
    assert (tmp_path / "out/gallery/b.tinygpt").read_bytes() == saved(2)
    assert (tmp_path / "out/gallery/manifest.json").read_text() == text


def test_the_repositorys_manifest_passes(tmp_path):
    manifest = json.loads((REPO / "gallery" / "manifest.json").read_text())
    assert gallery.run(Context(root=REPO, out=tmp_path, cache=tmp_path / ".cache")).startswith(f"{len(manifest['models'])} models")


def q8_model(tmp_path, val_loss, unquantized):
    data = checkpoint.to_bytes(checkpoint.load(saved(3)), "q8")
    return entry(tmp_path, "q", data) | {"dtype": "q8", "val_loss": val_loss, "val_loss_unquantized": unquantized}


def test_a_q8_model_within_the_gate_of_its_unquantized_weights_passes(tmp_path, two):
    build(tmp_path, two + [q8_model(tmp_path, 5.65, 5.6)])
    assert (tmp_path / "out/gallery/q.tinygpt").read_bytes()[:4] == MAGIC


@pytest.mark.parametrize("val_loss, unquantized, key", [(5.7, 5.6, "val_loss"), (5.5, 5.6, "val_loss"),
                                                        (5.6, None, "val_loss_unquantized")])
def test_a_q8_model_needs_its_unquantized_metric_and_the_gate(tmp_path, two, val_loss, unquantized, key):
    e, text = error(tmp_path, two + [q8_model(tmp_path, val_loss, unquantized)])
    assert e.where == key_line(text, key)


def test_an_unquantized_model_records_no_unquantized_metric(tmp_path, two):
    two[1]["val_loss_unquantized"] = 5.6
    e, text = error(tmp_path, two)
    assert e.where == key_line(text, "val_loss_unquantized")


def test_the_whole_gallery_is_bounded(tmp_path, two, monkeypatch):
    monkeypatch.setattr(gallery, "MAX_GALLERY_BYTES", two[0]["bytes"] + two[1]["bytes"] - 1)
    e, text = error(tmp_path, two)
    assert "add up to" in str(e) and e.where == at(text, '"models"')


def test_every_field_is_documented_and_has_a_kind():
    assert [r["key"] for r in gallery.doc_rows()] == [k for k, _, _ in gallery.FIELDS]
    assert all(kind in gallery.KINDS for _, kind, _ in gallery.FIELDS)


@pytest.mark.parametrize("path", ["sha256", "blurb", "corpus", "corpus.licence", "training.levers", "sample.text"])
def test_a_missing_key_names_its_objects_line(tmp_path, two, path):
    *parents, key = path.split(".")
    obj = two[1]
    for p in parents:
        obj = obj[p]
    del obj[key]
    e, text = error(tmp_path, two)
    # The object's line: b's "{" (the last at a model's depth), or the key that holds the inner object.
    assert e.where == (key_line(text, parents[0]) if parents else at(text, "    {", -1))
    assert f"lacks {key}" in str(e)


@pytest.mark.parametrize("path, value, message", [
    ("bytes", "30", "must be integer"),
    ("id", "Has Space", "must be lower-case"),
    ("file", "../a.tinygpt", "must be a file name"),
    ("file", "c.tinygpt", "not in gallery/"),
    ("bytes", 31, "does not match"),
    ("sha256", "0" * 64, "does not match"),
    ("id", "a", "duplicate id 'a'"),
    ("corpus.sha256", "0" * 63, "64 lower-case hex"),
    ("corpus.sha256", "0" * 64, "corpus.sha256 says"),
    ("corpus.id", "latin", "not a bundled corpus"),
    ("preset", "gigantic", "preset id"),
    ("preset", FACTS["presets"][1]["id"], "preset says"),
    ("config.n_layer", 3, "config.n_layer says 3"),
    ("parameters", 1000, "parameters says"),
    ("dtype", "f32", "dtype says"),
    ("dtype", "bf16", "must be f32 or f16"),
    ("training.steps", STEPS + 1, "training.steps says"),
    ("training.date", "6 December", "YYYY-MM-DD"),
    ("training.levers", ["warp-drive"], "lever ids"),
    ("training.wall_time_s", "34 s", "number, or null"),
    ("train_loss", True, "number, or null"),
    ("sample.tokens", 3, "sample.text is 14 bytes"),
    ("sample.prompt", "", "non-empty string"),
    ("sample.colour", "red", "not a manifest key"),
])
def test_a_bad_value_names_its_key_line(tmp_path, two, path, value, message):
    *parents, key = path.split(".")
    obj = two[1]
    for p in parents:
        obj = obj[p]
    obj[key] = value
    e, text = error(tmp_path, two)
    assert e.where == key_line(text, path)
    assert message in str(e), str(e)
    if path == "id" and value == "a":
        assert "first at " + key_line(text, "id", 0) in str(e)


def test_not_a_checkpoint_a_damaged_one_and_too_big_name_the_key_line(tmp_path, two, monkeypatch):
    two.append(entry(tmp_path, "c", b"PK\x03\x04" + b"c" * 26))
    e, text = error(tmp_path, two)
    assert e.where == key_line(text, "file") and "not a .tinygpt" in str(e)
    two[2] = entry(tmp_path, "c", saved(3)[:-8])
    e, text = error(tmp_path, two)
    assert e.where == key_line(text, "file") and "cannot be read" in str(e)
    monkeypatch.setattr(gallery, "MAX_FILE_BYTES", len(saved(1)) - 1)
    e, text = error(tmp_path, two[:2])
    assert e.where == key_line(text, "bytes", 0) and "models[0]" in str(e) and "MiB" in str(e)


def test_no_models_list_and_a_model_that_is_not_an_object(tmp_path, two):
    e, _ = error(tmp_path, None, '{\n  "name": "x",\n  "models": {}\n}')
    assert e.where == "gallery/manifest.json:3" and "'models' list" in str(e)
    e, _ = error(tmp_path, None, '{"models": [\n  "a.tinygpt"\n]}')
    assert e.where == "gallery/manifest.json:2" and "not an object" in str(e)


def test_invalid_json_and_bytes_that_are_not_utf8_give_line_and_column(tmp_path, two):
    e, _ = error(tmp_path, None, '{"models": [\n  {"id": "a",}\n]}')
    assert e.where == "gallery/manifest.json:2:14"
    (tmp_path / "gallery/manifest.json").write_bytes(b'{"models": [\n  {"name": "' + "é".encode() + b'\xff"}]}')
    with pytest.raises(BuildError) as e:
        gallery.run(Context(root=tmp_path, out=tmp_path / "out", cache=tmp_path / ".cache"))
    assert e.value.where == "gallery/manifest.json:2:14"


def test_an_inner_object_of_the_wrong_kind(tmp_path, two):
    two[1] = copy.deepcopy(two[1])
    two[1]["sample"] = "ROMEO: hello"
    e, text = error(tmp_path, two)
    assert e.where == key_line(text, "sample") and "models[1].sample must be object" in str(e)
