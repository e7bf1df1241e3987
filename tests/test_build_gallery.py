"""The gallery manifest: every error names the manifest line of the model or key at fault."""
import hashlib
import json

import pytest

from tinygpt.site_build import gallery
from tinygpt.site_build.context import BuildError, Context
from tinygpt.facts import FACTS

MAGIC = FACTS["format"]["magic"].encode()


def model(tmp_path, name: str, data: bytes) -> dict:
    (tmp_path / "gallery" / f"{name}.tinygpt").write_bytes(data)
    return {"id": name, "title": name.title(), "file": f"{name}.tinygpt", "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()}


def build(tmp_path, models: list, text: str | None = None) -> str:
    """Runs the step on a manifest of models (or on text); returns the manifest's text."""
    text = text if text is not None else json.dumps({"models": models}, indent=2)
    (tmp_path / "gallery" / "manifest.json").write_text(text)
    gallery.run(Context(root=tmp_path, out=tmp_path / "out", cache=tmp_path / ".cache"))
    return text


def at(text: str, needle: str, nth: int = 0) -> str:
    """The manifest's nth line containing needle, found without the code under test."""
    return "gallery/manifest.json:%d" % [n for n, line in enumerate(text.split("\n"), 1) if needle in line][nth]


@pytest.fixture
def two(tmp_path):
    (tmp_path / "gallery").mkdir()
    return [model(tmp_path, "a", MAGIC + b"a" * 20), model(tmp_path, "b", MAGIC + b"b" * 30)]


def error(tmp_path, models, text=None) -> tuple[BuildError, str]:
    text = text if text is not None else json.dumps({"models": models}, indent=2)
    with pytest.raises(BuildError) as e:
        build(tmp_path, models, text)
    return e.value, text


def test_good_models_are_copied(tmp_path, two):
    build(tmp_path, two)
    assert (tmp_path / "out/gallery/b.tinygpt").read_bytes() == MAGIC + b"b" * 30


def test_missing_key_names_the_models_line(tmp_path, two):
    del two[1]["sha256"]
    e, text = error(tmp_path, two)
    assert e.where == at(text, "{", 2)  # the document's, a's, then b's
    assert "models[1] lacks sha256" in str(e)


@pytest.mark.parametrize("key, value, message", [
    ("bytes", "30", "must be int"),
    ("file", "c.tinygpt", "not in gallery/"),
    ("file", "../a.tinygpt", "not in gallery/"),
    ("bytes", 31, "does not match"),
    ("sha256", "0" * 64, "does not match"),
    ("id", "a", "duplicate id 'a'"),
])
def test_a_bad_value_names_its_key_line(tmp_path, two, key, value, message):
    two[1][key] = value
    e, text = error(tmp_path, two)
    assert e.where == at(text, json.dumps(key), 1)
    assert message in str(e)
    if key == "id":
        assert "first at " + at(text, '"id"') in str(e)


def test_not_a_checkpoint_and_too_big_name_the_model_line(tmp_path, two, monkeypatch):
    two.append(model(tmp_path, "c", b"PK\x03\x04" + b"c" * 26))
    e, text = error(tmp_path, two)
    assert e.where == at(text, '"file"', 2) and "not a .tinygpt" in str(e)
    monkeypatch.setattr(gallery, "MAX_FILE_BYTES", 30)  # a has 24 bytes, b 34
    e, text = error(tmp_path, two[:2])
    assert e.where == at(text, '"bytes"', 1) and "models[1]" in str(e) and "25 MiB" in str(e)


def test_no_models_list_and_a_model_that_is_not_an_object(tmp_path, two):
    e, _ = error(tmp_path, None, '{\n  "name": "x",\n  "models": {}\n}')
    assert e.where == "gallery/manifest.json:3" and "'models' list" in str(e)
    e, _ = error(tmp_path, None, '{"models": [\n  "a.tinygpt"\n]}')
    assert e.where == "gallery/manifest.json:2" and "not an object" in str(e)


def test_invalid_json_and_bytes_that_are_not_utf8_give_line_and_column(tmp_path, two):
    e, _ = error(tmp_path, None, '{"models": [\n  {"id": "a",}\n]}')
    assert e.where == "gallery/manifest.json:2:14"
    (tmp_path / "gallery").mkdir(exist_ok=True)
    (tmp_path / "gallery/manifest.json").write_bytes(b'{"models": [\n  {"title": "' + "é".encode() + b'\xff"}]}')
    with pytest.raises(BuildError) as e:
        gallery.run(Context(root=tmp_path, out=tmp_path / "out", cache=tmp_path / ".cache"))
    assert e.value.where == "gallery/manifest.json:2:15"
