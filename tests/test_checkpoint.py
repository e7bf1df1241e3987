"""The .tinygpt reader and writer: round trips, the legacy layout, the corpus of
good and bad files (every verdict and message), and fuzzing within the time
and memory bounds the spec promises."""
import json
import struct
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.oracles import checkpoint_corpus as corpus
from tinygpt import checkpoint, lora, model
from tinygpt.checkpoint import CheckpointError
from tinygpt.facts import FACTS
from tinygpt.train import Trainer, TrainConfig

CONFIG = model.GPTConfig(vocab_size=256, n_layer=1, n_embd=8, n_head=2, block_size=4)
FORMAT = FACTS["format"]
ALIGN = FORMAT["data_alignment"]
MiB = 2**20
INDEX = json.loads((corpus.DIR / "index.json").read_text())


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


# ---------------------------------------------------------------------------
# Round trips.

def test_v2_round_trip_is_exact_and_keeps_metadata(tmp_path):
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
    (tmp_path / "x.tinygpt").write_bytes(buf)
    assert checkpoint.summary(checkpoint.load(tmp_path / "x.tinygpt")) == checkpoint.summary(ckpt)


def test_layout_is_aligned_and_in_canonical_order():
    buf = v2_bytes(optimizer=True)
    header, data = corpus.split(buf)
    names = [name for name, _, _ in model.tensor_specs(CONFIG)]
    assert [t["name"] for t in header["tensors"]] == names + ["opt.m." + n for n in names] + ["opt.v." + n for n in names]
    assert all(t["offset"] % ALIGN == 0 for t in header["tensors"])
    assert header["format"] == "tinygpt" and header["tokenizer"] == {"type": "bytes", "vocab_size": 256}
    last = header["tensors"][-1]
    assert len(data) == last["offset"] + last["nbytes"]
    np.testing.assert_array_equal(np.frombuffer(data, "<f4", 8), checkpoint.load(buf).params[names[0]].ravel()[:8])


def test_optimizer_state_round_trips(tmp_path):
    trainer = trained()
    path = tmp_path / "x.tinygpt"
    checkpoint.save(path, checkpoint.from_trainer(trainer, include_optimizer=True))
    ckpt = checkpoint.load(path)
    for name in trainer.params:
        np.testing.assert_array_equal(ckpt.m[name], trainer.m[name])
        np.testing.assert_array_equal(ckpt.v[name], trainer.v[name])


def written(dtype: str):
    """A trained model saved with Adam state and its weights as dtype: the trainer, the bytes, what the
    reader makes of them, and their header."""
    trainer, buf = trained(), v2_bytes(optimizer=True, dtype=dtype)
    ckpt = checkpoint.load(buf)
    assert ckpt.dtype == dtype
    return trainer, buf, ckpt, corpus.split(buf)[0]


def test_f16_weights_round_to_half_precision_and_moments_stay_f32():
    trainer, buf, ckpt, header = written("f16")
    assert {t["dtype"] for t in header["tensors"] if not t["name"].startswith("opt.")} == {"f16"}
    assert {t["dtype"] for t in header["tensors"] if t["name"].startswith("opt.")} == {"f32"}
    for name, p in trainer.params.items():
        np.testing.assert_array_equal(ckpt.params[name], p.astype(np.float16).astype(np.float32))
        np.testing.assert_array_equal(ckpt.m[name], trainer.m[name])
    assert checkpoint.to_bytes(ckpt) == buf, "a file read back is written as it was stored, f16 weights included"


def test_q8_weights_are_within_half_a_step_of_their_column_and_stable_when_saved_again():
    trainer, buf, ckpt, header = written("q8")
    entries = {t["name"]: t for t in header["tensors"]}
    for name, p in trainer.params.items():
        cols = p.shape[-1]
        assert entries[name]["dtype"] == "q8" and entries[name]["nbytes"] == p.size + 4 * cols
        step = np.abs(p).reshape(-1, cols).max(axis=0) / FORMAT["q8"]["levels"]
        error = np.abs(ckpt.params[name] - p).reshape(-1, cols)
        assert (error <= 0.5 * step * (1 + 1e-6) + 1e-12).all(), name
        if p.ndim == 1:  # a vector's every element is its own column: kept to f32 rounding
            np.testing.assert_allclose(ckpt.params[name], p, rtol=1e-6)
        np.testing.assert_array_equal(ckpt.m[name], trainer.m[name])
    assert checkpoint.to_bytes(ckpt) == buf, "q8 values quantize to themselves: a file read back is written as it was"
    assert len(v2_bytes(dtype="q8")) < len(v2_bytes(dtype="f16"))


def test_q8_writer_refuses_non_finite_weights():
    ckpt = checkpoint.load(v2_bytes())
    ckpt.params["ln_final.bias"][0] = np.nan
    with pytest.raises(CheckpointError) as e:
        checkpoint.to_bytes(ckpt, "q8")
    assert e.value.rule == "non_finite" and "ln_final.bias" in str(e.value)


def test_an_adapter_round_trips_and_names_its_base_by_the_weights_it_reads():
    base = checkpoint.load(corpus.DIR / "v2-f32.tinygpt")
    adapter = lora.Adapter.init(base.config, lora.LoraConfig(rank=3, alpha=6.0, targets=("k", "fc_in")), seed=2)
    info = {"rank": 3, "alpha": 6.0, "targets": ["k", "fc_in"], "base_sha256": checkpoint.weights_sha256(base)}
    saved = checkpoint.Checkpoint(config=base.config, params=adapter.tensors, trainer={"step": 5, "config": corpus.TRAIN},
                                  m=adapter.tensors, v={k: np.abs(t) for k, t in adapter.tensors.items()}, adapter=info)
    back = checkpoint.load(checkpoint.to_bytes(saved))
    assert back.adapter == info and back.config == base.config and back.trainer["step"] == 5
    assert list(back.params) == [n for n, _ in lora.adapter_specs(base.config, adapter.lc)]
    assert all(np.array_equal(back.params[n], t) and np.array_equal(back.m[n], t) for n, t in adapter.tensors.items())
    with pytest.raises(ValueError, match="an adapter's weights are stored as f32, not q8"):
        checkpoint.to_bytes(saved, "q8")
    # The base is named by the values a reader decodes: the same weights stored as f16 are another base.
    assert checkpoint.weights_sha256(checkpoint.load(checkpoint.to_bytes(base))) == info["base_sha256"]
    assert checkpoint.weights_sha256(checkpoint.load(checkpoint.to_bytes(base, "q8"))) != info["base_sha256"]
    assert checkpoint.summary(base)["params"] == info["base_sha256"]


def test_legacy_weights_give_the_same_logits_and_resave_without_a_trainer():
    ckpt = checkpoint.load(corpus.legacy())
    assert ckpt.version == 1 and ckpt.trainer == {"step": 7, "config": None} and ckpt.m is not None
    idx = np.array([[1, 2]])
    np.testing.assert_array_equal(model.forward(corpus.CONFIG, ckpt.params, idx)[0],
                                  model.forward(corpus.CONFIG, corpus.W, idx)[0])
    again = checkpoint.load(checkpoint.to_bytes(ckpt))
    assert again.version == 2 and again.trainer is None and again.m is not None


# ---------------------------------------------------------------------------
# The writer never writes what a reader refuses.

def test_writer_refuses_what_readers_refuse():
    ckpt = checkpoint.from_trainer(trained(), include_optimizer=True)
    with pytest.raises(ValueError, match="dtype"):
        checkpoint.to_bytes(ckpt, "bf16")
    bad = lambda **kw: checkpoint.Checkpoint(**{**vars(ckpt), **kw})  # noqa: E731
    nan = {**ckpt.params, "ln_final.bias": np.full(8, np.nan, np.float32)}
    with pytest.raises(CheckpointError, match="tensor ln_final.bias holds a value that is not a finite number"):
        checkpoint.to_bytes(bad(params=nan))
    big = {**ckpt.params, "ln_final.bias": np.full(8, 70000, np.float32)}
    checkpoint.to_bytes(bad(params=big))  # fine in f32, beyond f16
    with pytest.raises(CheckpointError) as refused:
        checkpoint.to_bytes(bad(params=big), "f16")
    assert refused.value.rule == "non_finite"
    with pytest.raises(CheckpointError) as refused:
        checkpoint.to_bytes(bad(v={**ckpt.v, "ln_final.bias": -np.ones(8, np.float32)}))
    assert refused.value.rule == "negative_moment"
    with pytest.raises(CheckpointError, match="history point 1 has a loss that is not a finite number"):
        checkpoint.to_bytes(bad(history=[{"step": 1, "train": 1.0}, {"step": 2, "train": float("nan")}]))
    with pytest.raises(CheckpointError) as refused:
        checkpoint.to_bytes(bad(dataset={"name": "x" * FORMAT["max_header_bytes"], "bytes": 1, "sha256": "ab" * 32}))
    assert refused.value.rule == "header_too_long"
    with pytest.raises(CheckpointError) as refused:
        checkpoint.to_bytes(bad(dataset={"name": "x", "bytes": 1, "sha256": "not hex"}))
    assert refused.value.rule == "dataset"


def test_writer_thins_a_long_history_to_the_cap_keeping_the_newest():
    cap = FORMAT["max_history_points"]
    history = [{"step": i + 1, "train": 1.0 + i / 10**5} for i in range(3 * cap + 5)]
    kept = checkpoint.load(checkpoint.to_bytes(checkpoint.Checkpoint(config=CONFIG, params=trained().params,
                                                                     history=history))).history
    assert cap // 2 < len(kept) <= cap and kept[-1] == history[-1]
    strides = {b["step"] - a["step"] for a, b in zip(kept, kept[1:])}
    assert strides == {4}  # k = ceil(n / cap), counted back from the newest point
    assert checkpoint.thin_history(history[:cap]) == history[:cap]


# ---------------------------------------------------------------------------
# The corpus: the committed files are what the generator writes, and the
# Python reader reaches every verdict (the TypeScript reader's test reads the
# same index: webapp/engine/test/checkpoint.test.ts).

def test_corpus_is_what_the_generator_writes():
    cases = corpus.cases()
    committed = sorted(p.name for p in corpus.DIR.glob("*.tinygpt"))
    assert committed == sorted(f"{label}.tinygpt" for label in cases), "run `python -m tests.oracles.checkpoint_corpus`"
    for label, (buf, _) in cases.items():
        assert (corpus.DIR / f"{label}.tinygpt").read_bytes() == buf, f"{label}: run `python -m tests.oracles.checkpoint_corpus`"
    assert (corpus.DIR / "index.json").read_text() == corpus.index(cases)


def test_corpus_covers_every_refusal_a_reader_can_give():
    elsewhere = {"history_non_finite",  # only writers refuse this one
                 "file_too_large"}  # a gigabyte: test_load_from_a_path_checks_the_header_before_reading_the_data
    assert {c["rule"] for c in INDEX["cases"] if not c["ok"]} | elsewhere == set(FORMAT["errors"])


def agrees(expected: dict, got: dict) -> bool:
    """A verdict as the corpus states it: exact, except header_json, whose detail is the parser's own."""
    expected = {k: v for k, v in expected.items() if k != "file"}
    if not expected["ok"] and expected["rule"] == "header_json":
        return got.get("rule") == "header_json" and got["error"].startswith(expected["error"])
    return got == expected


@pytest.mark.parametrize("case", INDEX["cases"], ids=[c["file"] for c in INDEX["cases"]])
def test_python_reader_gives_the_corpus_verdict(case):
    path = corpus.DIR / case["file"]
    from_bytes, from_path = checkpoint.verdict(path.read_bytes()), checkpoint.verdict(path)
    assert agrees(case, from_bytes), from_bytes
    assert from_path == from_bytes


# ---------------------------------------------------------------------------
# Cost bounded by the input: any file is accepted or refused within 1 s of CPU
# and 64 MiB beyond the file (and the f32 arrays it decodes to, at most twice
# its size), whatever its header claims.

def within_bounds(buf: bytes):
    """The verdict, after checking the reader's CPU time and (in a second, traced run) its peak memory."""
    start = time.process_time()
    verdict = checkpoint.verdict(buf)  # raises anything but CheckpointError
    seconds = time.process_time() - start
    tracemalloc.start()
    try:
        checkpoint.verdict(buf)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 1.0, f"{seconds:.2f} s of CPU for a {len(buf)}-byte file"
    assert peak < 64 * MiB + 2 * len(buf), f"peak {peak / MiB:.1f} MiB for a {len(buf)}-byte file"
    return verdict


LIMITS = corpus.at_the_limits()


@pytest.mark.parametrize("label", list(LIMITS))
def test_inputs_at_the_format_limits_stay_within_bounds(label):
    verdict = within_bounds(LIMITS[label])
    expected_ok = label in {"340-layers", "history", "objects", "escapes",
                            "nested-lists", "nested-objects"}
    assert verdict["ok"] == expected_ok, verdict


def test_load_from_a_path_checks_the_header_before_reading_the_data(tmp_path):
    """A sparse 600 MiB file with a refused header: refused without reading its body."""
    path = tmp_path / "sparse.tinygpt"
    with open(path, "wb") as f:
        f.write((corpus.DIR / "huge-n_layer-192-bytes.tinygpt").read_bytes())
        f.truncate(600 * MiB)
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError) as refused:
            checkpoint.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.rule == "tensor_count" and peak < 4 * MiB
    with open(path, "r+b") as f:
        f.truncate(FORMAT["max_file_bytes"] + 1)
    with pytest.raises(CheckpointError, match=f"the file is {FORMAT['max_file_bytes'] + 1} bytes, more than"):
        checkpoint.load(path)


GOOD = [(corpus.DIR / c["file"]).read_bytes() for c in INDEX["cases"] if c["ok"]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(GOOD), data=st.data())
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
    within_bounds(bytes(buf))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                           | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(GOOD), data=st.data())
def test_fuzz_header_fields_replaced_by_arbitrary_json(base, data):
    header = corpus.header_of(base)
    paths = [p for p in corpus.paths(header) if p]
    path = data.draw(st.sampled_from(paths))
    corpus.put(list(path), data.draw(JSON_VALUES))(header)
    within_bounds(corpus.with_header(base, json.dumps(header).encode()))

