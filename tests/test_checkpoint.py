"""The .tinygpt reader and writer: round trips, the legacy layout, every rejection, fuzzing."""
import json
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tinygpt import checkpoint, model
from tinygpt.checkpoint import CheckpointError
from tinygpt.facts import FACTS
from tinygpt.train import Trainer, TrainConfig

CONFIG = model.GPTConfig(vocab_size=256, n_layer=1, n_embd=8, n_head=2, block_size=4)
ALIGN = FACTS["format"]["data_alignment"]


def trained(steps=2, config=CONFIG):
    trainer = Trainer(config, TrainConfig(batch_size=2, lr=1e-2, warmup_steps=1, seed=3))
    rng = np.random.default_rng(0)
    for _ in range(steps):
        x = rng.integers(0, 256, (2, config.block_size))
        out = trainer.train_step(x, np.roll(x, -1, axis=1))
        trainer.history.append({"step": trainer.step, "train": out["loss"]})
    return trainer


def v2_bytes(optimizer=False, dtype="f32"):
    dataset = {"name": "t", "bytes": 3, "sha256": "ab" * 32}
    return checkpoint.to_bytes(checkpoint.from_trainer(trained(), dataset, optimizer, commit="abc123"), dtype)


def split_file(buf):
    header_len = struct.unpack_from("<I", buf, 8)[0]
    header = json.loads(buf[12:12 + header_len])
    data = buf[-(-(12 + header_len) // ALIGN) * ALIGN:]
    return header, data


def join_file(header, data, version=2):
    raw = json.dumps(header).encode()
    start = -(-(12 + len(raw)) // ALIGN) * ALIGN
    return b"TGPT" + struct.pack("<II", version, len(raw)) + raw + bytes(start - 12 - len(raw)) + data


def with_header(buf, mutate):
    header, data = split_file(buf)
    mutate(header)
    return join_file(header, data)


# ---------------------------------------------------------------------------
# Round trips.

def test_v2_round_trip_is_exact_and_keeps_metadata():
    trainer = trained()
    buf = v2_bytes()
    ckpt = checkpoint.load(buf)
    assert ckpt.version == 2 and ckpt.dtype == "f32" and ckpt.config == CONFIG
    assert list(ckpt.params) == [name for name, _, _ in model.tensor_specs(CONFIG)]
    for name, p in trainer.params.items():
        np.testing.assert_array_equal(ckpt.params[name], p)
    assert ckpt.m is None and ckpt.v is None
    assert ckpt.trainer == {"step": 2, "config": trainer.tc.to_dict()}
    assert ckpt.history == trainer.history
    assert ckpt.dataset == {"name": "t", "bytes": 3, "sha256": "ab" * 32}
    assert ckpt.provenance["producer"].startswith("tinygpt-python") and ckpt.provenance["commit"] == "abc123"
    assert ckpt.provenance["corpus_sha256"] == "ab" * 32
    assert checkpoint.to_bytes(ckpt) == buf


def test_layout_is_aligned_and_in_canonical_order():
    buf = v2_bytes(optimizer=True)
    header, _ = split_file(buf)
    names = [name for name, _, _ in model.tensor_specs(CONFIG)]
    assert [t["name"] for t in header["tensors"]] == names + ["opt.m." + n for n in names] + ["opt.v." + n for n in names]
    assert all(t["offset"] % ALIGN == 0 for t in header["tensors"])
    assert header["format"] == "tinygpt" and header["tokenizer"] == {"type": "bytes", "vocab_size": 256}
    header_len = struct.unpack_from("<I", buf, 8)[0]
    start = -(-(12 + header_len) // ALIGN) * ALIGN
    last = header["tensors"][-1]
    assert len(buf) == start + last["offset"] + last["nbytes"]
    first = header["tensors"][0]
    np.testing.assert_array_equal(np.frombuffer(buf, "<f4", 8, start + first["offset"]),
                                  checkpoint.load(buf).params[names[0]].ravel()[:8])


def test_optimizer_state_round_trips(tmp_path):
    trainer = trained()
    path = tmp_path / "x.tinygpt"
    checkpoint.save(path, checkpoint.from_trainer(trainer, include_optimizer=True))
    ckpt = checkpoint.load(path)
    for name in trainer.params:
        np.testing.assert_array_equal(ckpt.m[name], trainer.m[name])
        np.testing.assert_array_equal(ckpt.v[name], trainer.v[name])


def test_f16_weights_round_to_half_precision_and_moments_stay_f32():
    trainer = trained()
    ckpt = checkpoint.load(v2_bytes(optimizer=True, dtype="f16"))
    assert ckpt.dtype == "f16"
    header, _ = split_file(v2_bytes(optimizer=True, dtype="f16"))
    assert {t["dtype"] for t in header["tensors"] if not t["name"].startswith("opt.")} == {"f16"}
    assert {t["dtype"] for t in header["tensors"] if t["name"].startswith("opt.")} == {"f32"}
    for name, p in trainer.params.items():
        np.testing.assert_array_equal(ckpt.params[name], p.astype(np.float16).astype(np.float32))
        np.testing.assert_array_equal(ckpt.m[name], trainer.m[name])


def test_writer_refuses_bad_input():
    ckpt = checkpoint.from_trainer(trained())
    with pytest.raises(CheckpointError, match="dtype"):
        checkpoint.to_bytes(ckpt, "bf16")
    ckpt.history.append({"step": 3, "train": float("nan")})
    with pytest.raises(CheckpointError, match="non-finite"):
        checkpoint.to_bytes(ckpt)


# ---------------------------------------------------------------------------
# Legacy version 1, written here by a small writer that follows the documented
# layout independently of the reader.

def legacy_bytes(params, step=7, m=None, v=None, fp16=False, header_extra=None, version=1, config=CONFIG):
    C, L = config.n_embd, config.n_layer
    manifest, offset = [], 0
    for name, shape, _ in model.tensor_specs(config):
        listed = [4 * C, C] if name.endswith("fc_in.weight") else [C, 4 * C] if name.endswith("fc_out.weight") else list(shape)
        manifest.append({"name": name, "shape": listed, "floatOffset": offset})
        offset += int(np.prod(shape))
    header = {"version": version, "savedAt": "2025-01-01T00:00:00Z",
              "config": {"layers": L, "dModel": C, "ctx": config.block_size, "heads": config.n_head,
                         "dMlp": 4 * C, "batchSize": 2, "backend": "webgpu"},
              "manifest": manifest, "includesOptimizerState": m is not None,
              "weightDtype": "fp16" if fp16 else "fp32",
              "lossHistory": [{"step": 1, "train": 5.5, "val": None}, {"step": 2, "train": 5.0, "val": 5.1}]}
    header.update(header_extra or {})
    body = [struct.pack("<i", step)]
    for name, _, _ in model.tensor_specs(config):
        if fp16:
            body.append(params[name].astype("<f2").tobytes())
        else:
            body.append(params[name].astype("<f4").tobytes())
            if m is not None:
                body += [m[name].astype("<f4").tobytes(), v[name].astype("<f4").tobytes()]
    raw = json.dumps(header).encode()
    return b"TGPT" + struct.pack("<II", version, len(raw)) + raw + b"".join(body)


def test_legacy_training_layout_with_optimizer_state_loads():
    trainer = trained()
    ckpt = checkpoint.load(legacy_bytes(trainer.params, m=trainer.m, v=trainer.v))
    assert ckpt.version == 1 and ckpt.config == CONFIG and ckpt.trainer == {"step": 7, "config": None}
    for name in trainer.params:
        np.testing.assert_array_equal(ckpt.params[name], trainer.params[name])
        np.testing.assert_array_equal(ckpt.m[name], trainer.m[name])
        np.testing.assert_array_equal(ckpt.v[name], trainer.v[name])
    assert ckpt.history == [{"step": 1, "train": 5.5}, {"step": 2, "train": 5.0, "val": 5.1}]
    # Same maths: the legacy weights give the same logits as the originals.
    idx = np.array([[1, 2, 3, 4]])
    np.testing.assert_array_equal(model.forward(CONFIG, ckpt.params, idx)[0], model.forward(CONFIG, trainer.params, idx)[0])
    # And they re-save as version 2, without a trainer: its settings were never recorded.
    again = checkpoint.load(checkpoint.to_bytes(ckpt))
    assert again.version == 2 and again.trainer is None and again.m is not None


def test_legacy_weights_only_layouts_load():
    params = trained().params
    f32 = checkpoint.load(legacy_bytes(params))
    assert f32.m is None and all(np.array_equal(f32.params[k], params[k]) for k in params)
    f16 = checkpoint.load(legacy_bytes(params, fp16=True, version=2))  # the playground's gallery files say version 2
    assert f16.dtype == "f16"
    assert all(np.array_equal(f16.params[k], params[k].astype(np.float16).astype(np.float32)) for k in params)


# ---------------------------------------------------------------------------
# Rejections: each with a message naming the problem.

def set_path(header, path, value):
    target = header
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def v2_rejections():
    good = v2_bytes(optimizer=True)
    h, _ = split_file(good)
    second = h["tensors"][1]
    cases = {
        "empty file": (b"", "shorter than the 12-byte preamble"),
        "bad magic": (b"GGUF" + good[4:], "bad magic"),
        "unknown version": (good[:4] + struct.pack("<I", 9) + good[8:], "unsupported version 9"),
        "absurd header length": (good[:8] + struct.pack("<I", 2**31) + good[12:], "exceeds max_header_bytes"),
        "header beyond file": (good[:200], "header claims"),
        "truncated data": (good[:-1], "beyond the end"),
        "not json": (good[:8] + struct.pack("<I", 3) + b"{x}" + good[15:], "not valid JSON"),
        "json not object": (good[:8] + struct.pack("<I", 2) + b"[]" + good[14:], "must be a JSON object"),
        "NaN constant": (good[:8] + struct.pack("<I", 3) + b"NaN" + good[15:], "not valid JSON"),
    }
    edits = {
        "wrong format": (["format"], "gguf", "format"),
        "unknown dtype": (["tensors", 1, "dtype"], "bf16", "unknown dtype 'bf16'"),
        "moments in f16": (["tensors", len(h["tensors"]) - 1, "dtype"], "f16", "not allowed"),
        "shape disagrees with config": (["tensors", 0, "shape"], [256, 9], "the config implies [256, 8]"),
        "config disagrees with shapes": (["config", "n_embd"], 16, "the config implies"),
        "nbytes wrong": (["tensors", 1, "nbytes"], second["nbytes"] + 4, "nbytes"),
        "offset misaligned": (["tensors", 1, "offset"], second["offset"] + 4, "multiple of 64"),
        "offset beyond file": (["tensors", 1, "offset"], 2**40, "beyond the end"),
        "negative offset": (["tensors", 1, "offset"], -64, "non-negative"),
        "overlap": (["tensors", 1, "offset"], 0, "overlap"),
        "duplicate tensor": (["tensors", 1, "name"], h["tensors"][0]["name"], "listed twice"),
        "unknown tensor": (["tensors", 1, "name"], "output.weight", "unknown or unexpected tensor"),
        "absurd n_layer": (["config", "n_layer"], 10**12, "tensor entries"),
        "absurd n_embd": (["config", "n_embd"], 2**40, "the config implies"),
        "vocab not bytes": (["config", "vocab_size"], 50257, "vocab_size"),
        "bad tokenizer": (["tokenizer", "type"], "bpe", "tokenizer"),
        "n_head not dividing": (["config", "n_head"], 3, "multiple of n_head"),
        "bool as int": (["config", "n_layer"], True, "positive integer"),
        "bad trainer": (["trainer", "step"], -1, "trainer"),
        "bad trainer config": (["trainer", "config", "lr"], "fast", "TrainConfig"),
        "adam_step beyond step": (["trainer", "adam_step"], 10**6, "adam_step"),
        "adam_step not int": (["trainer", "adam_step"], 1.5, "adam_step"),
        "trainer without config": (["trainer", "config"], None, "TrainConfig"),
        "bad history": (["history"], [{"step": 1}], "history[0]"),
        "bad dataset": (["dataset"], {"name": 1}, "dataset"),
        "missing provenance": (["provenance"], None, "provenance"),
        "tensors not list": (["tensors"], {}, "must be a list"),
        "tensor not object": (["tensors", 3], "x", "must be an object"),
        "name not string": (["tensors", 3, "name"], ["x"], "unknown or unexpected"),
    }
    for label, (path, value, message) in edits.items():
        cases[label] = (with_header(good, lambda hd, p=path, v=value: set_path(hd, p, v)), message)
    cases["adam_step without moments"] = (with_header(v2_bytes(), lambda hd: set_path(hd, ["trainer", "adam_step"], 0)),
                                          "no Adam moments")
    cases["missing tensor"] = (with_header(good, lambda hd: hd["tensors"].pop()), "tensor entries")
    cases["weights mixed f16/f32"] = (with_header(v2_bytes(dtype="f16"), lambda hd: set_path(hd, ["tensors", 0, "dtype"], "f32")),
                                      "nbytes")
    return cases


def test_adam_step_beside_moments_is_kept():
    buf = with_header(v2_bytes(optimizer=True), lambda hd: set_path(hd, ["trainer", "adam_step"], 1))
    assert checkpoint.load(buf).trainer["adam_step"] == 1


@pytest.mark.parametrize("label", list(v2_rejections()))
def test_v2_rejections_name_the_problem(label):
    buf, message = v2_rejections()[label]
    with pytest.raises(CheckpointError, match=message.replace("[", r"\[").replace("]", r"\]")):
        checkpoint.load(buf)


def test_header_that_is_not_utf8_is_rejected():
    raw = b'{"a": "\xff"}'
    buf = b"TGPT" + struct.pack("<II", 2, len(raw)) + raw
    with pytest.raises(CheckpointError, match="not UTF-8"):
        checkpoint.load(buf)


def test_deeply_nested_header_is_rejected():
    raw = b"[" * 100000 + b"]" * 100000
    with pytest.raises(CheckpointError, match="nested too deeply|JSON object"):
        checkpoint.load(b"TGPT" + struct.pack("<II", 2, len(raw)) + raw)


def legacy_rejections():
    params = trained().params
    good = legacy_bytes(params)
    renamed = legacy_bytes(params)
    return {
        "truncated": (good[:-2], "imply"),
        "trailing bytes": (good + b"\0\0\0\0", "imply"),
        "wrong dMlp": (legacy_bytes(params, header_extra={"config": {"layers": 1, "dModel": 8, "ctx": 4, "heads": 2, "dMlp": 24}}), "dMlp"),
        "missing heads": (legacy_bytes(params, header_extra={"config": {"layers": 1, "dModel": 8, "ctx": 4}}), "heads"),
        "unknown weight dtype": (legacy_bytes(params, header_extra={"weightDtype": "int8"}), "weightDtype"),
        "manifest out of order": (renamed.replace(b'"ln_final.weight"', b'"ln_final.wxight"', 1), "expected tensor ln_final.weight"),
        "manifest not list": (legacy_bytes(params, header_extra={"manifest": 3}), "manifest must be a list"),
        "wrong floatOffset": (legacy_bytes(params).replace(b'"floatOffset": 2048', b'"floatOffset": 2049', 1), "floatOffset"),
        "negative step": (good[:len(good) - 4 * model.param_count(CONFIG) - 4] + struct.pack("<i", -5)
                          + good[len(good) - 4 * model.param_count(CONFIG):], "negative"),
    }


@pytest.mark.parametrize("label", list(legacy_rejections()))
def test_legacy_rejections_name_the_problem(label):
    buf, message = legacy_rejections()[label]
    with pytest.raises(CheckpointError, match=message):
        checkpoint.load(buf)


# ---------------------------------------------------------------------------
# Fuzzing: whatever the bytes, the reader returns a checkpoint or raises
# CheckpointError, and never allocates much more than the file itself.

GOOD = v2_bytes(optimizer=True)
LEGACY = legacy_bytes(trained().params)


def load_within_memory(buf):
    tracemalloc.start()
    try:
        checkpoint.load(buf)
    except CheckpointError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 20 * len(buf) + 4_000_000, f"peak {peak} bytes for a {len(buf)}-byte file"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from([GOOD, LEGACY]), data=st.data())
def test_fuzz_mutated_and_truncated_bytes(base, data):
    buf = bytearray(base)
    for _ in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(["flip", "truncate", "insert", "u32"]))
        pos = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "truncate":
            del buf[pos:]
        elif kind == "insert":
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=16))
        elif kind == "u32" and pos + 4 <= len(buf):
            buf[pos:pos + 4] = struct.pack("<I", data.draw(st.integers(0, 2**32 - 1)))
    load_within_memory(bytes(buf))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                           | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


def header_paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from header_paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:6]):
            yield from header_paths(v, prefix + (i,))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from([GOOD, LEGACY]), data=st.data())
def test_fuzz_header_fields_replaced_by_arbitrary_json(base, data):
    header_len = struct.unpack_from("<I", base, 8)[0]
    header = json.loads(base[12:12 + header_len])
    paths = [p for p in header_paths(header) if p]
    path = data.draw(st.sampled_from(paths))
    set_path(header, list(path), data.draw(JSON_VALUES))
    raw = json.dumps(header).encode()
    if base is LEGACY:
        buf = b"TGPT" + struct.pack("<II", 1, len(raw)) + raw + base[12 + header_len:]
    else:
        buf = join_file(header, split_file(base)[1])
    load_within_memory(buf)
