"""Reading and writing .tinygpt files (content/docs/file-format.md is the spec).

    ckpt = load("run.tinygpt")        # or load(raw_bytes); v2, or a legacy v1 export
    save("out.tinygpt", ckpt, dtype="f16")

A file is untrusted input: every field is checked against the real file size
and the model config before anything is sliced out of it, and every failure
is a CheckpointError whose message names the problem. Tensors are views of
the bytes actually present (then converted to float32), so a header that
claims gigabytes costs nothing.
"""
import json
import math
import struct
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from tinygpt import model
from tinygpt.facts import FACTS

FORMAT = FACTS["format"]
MAGIC = FORMAT["magic"].encode("ascii")
PREAMBLE = 12  # magic, u32 version, u32 header length
ALIGN = FORMAT["data_alignment"]
M_PREFIX, V_PREFIX = FORMAT["optimizer_prefixes"]["m"], FORMAT["optimizer_prefixes"]["v"]
DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2")}
PRODUCER = "tinygpt-python 0.1"
TRAIN_CONFIG_FIELDS = ("batch_size", "lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip", "warmup_steps", "seed")


class CheckpointError(ValueError):
    """A .tinygpt file that cannot be read (or a checkpoint that cannot be written)."""


@dataclass
class Checkpoint:
    config: model.GPTConfig
    params: dict[str, np.ndarray]  # float32, canonical order and storage shapes
    m: dict[str, np.ndarray] | None = None  # Adam moments, float32, same keys
    v: dict[str, np.ndarray] | None = None
    trainer: dict | None = None  # {"step", "config": TrainConfig dict, None only for legacy imports}
    history: list[dict] = field(default_factory=list)  # [{"step", "train", "val"?}]
    dataset: dict | None = None  # {"name", "bytes", "sha256"}
    provenance: dict = field(default_factory=dict)  # {"created", "producer", "commit"?, "corpus_sha256"?}
    version: int = FORMAT["version"]  # the version the file was read from
    dtype: str = "f32"  # how the weights were stored


def _fail(message: str):
    raise CheckpointError(message)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return _is_int(x) or (isinstance(x, float) and math.isfinite(x))


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def from_trainer(trainer, dataset: dict | None = None, include_optimizer: bool = False, commit: str | None = None) -> Checkpoint:
    """A Checkpoint of a tinygpt.train.Trainer's current state."""
    as_f32 = lambda d: {k: a.astype(np.float32) for k, a in d.items()}  # noqa: E731
    provenance = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "producer": PRODUCER}
    if commit:
        provenance["commit"] = commit
    if dataset:
        provenance["corpus_sha256"] = dataset["sha256"]
    return Checkpoint(
        config=trainer.config, params=as_f32(trainer.params),
        m=as_f32(trainer.m) if include_optimizer else None, v=as_f32(trainer.v) if include_optimizer else None,
        trainer={"step": trainer.step, "config": trainer.tc.to_dict()},
        history=list(trainer.history), dataset=dataset, provenance=provenance)


# ---------------------------------------------------------------------------
# Writing (version 2 only).

def to_bytes(ckpt: Checkpoint, dtype: str = "f32") -> bytes:
    """The checkpoint as version-2 bytes; weights in `dtype` ("f32" or "f16"), moments always f32."""
    if dtype not in DTYPES:
        _fail(f"unknown weight dtype {dtype!r}; known: {sorted(DTYPES)}")
    if (ckpt.m is None) != (ckpt.v is None):
        _fail("optimizer state needs both m and v")
    blobs, tensors, offset = [], [], 0

    def add(name, array, shape, dt):
        nonlocal offset
        if tuple(array.shape) != shape:
            _fail(f"tensor {name}: shape {tuple(array.shape)}, the config implies {shape}")
        data = np.ascontiguousarray(array, dtype=DTYPES[dt]).tobytes()
        tensors.append({"name": name, "shape": list(shape), "dtype": dt, "offset": offset, "nbytes": len(data)})
        blobs.append((offset, data))
        offset = _align(offset + len(data))

    specs = model.tensor_specs(ckpt.config)
    for name, shape, _ in specs:
        if name not in ckpt.params:
            _fail(f"missing parameter {name}")
        add(name, ckpt.params[name], shape, dtype)
    if ckpt.m is not None:
        for prefix, moments in ((M_PREFIX, ckpt.m), (V_PREFIX, ckpt.v)):
            for name, shape, _ in specs:
                add(prefix + name, moments[name], shape, "f32")
    for point in ckpt.history:
        if not all(_is_number(point[k]) for k in ("train", "val") if k in point):
            _fail(f"history point {point} has a non-finite loss, which JSON cannot hold")
    header = {
        "format": "tinygpt", "version": FORMAT["version"], "config": ckpt.config.to_dict(),
        "tokenizer": {"type": "bytes", "vocab_size": FACTS["vocab_size"]}, "tensors": tensors,
        # A trainer whose settings are unknown (a legacy import) cannot be resumed as such: saved as null.
        "trainer": ckpt.trainer if ckpt.trainer and ckpt.trainer.get("config") else None,
        "history": ckpt.history, "dataset": ckpt.dataset,
        "provenance": ckpt.provenance or {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "producer": PRODUCER},
    }
    header_bytes = json.dumps(header, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode("utf-8")
    if len(header_bytes) > FORMAT["max_header_bytes"]:
        _fail(f"header is {len(header_bytes)} bytes, more than max_header_bytes {FORMAT['max_header_bytes']}")
    data_start = _align(PREAMBLE + len(header_bytes))
    out = bytearray(data_start + (tensors[-1]["offset"] + tensors[-1]["nbytes"]))
    out[:PREAMBLE] = MAGIC + struct.pack("<II", FORMAT["version"], len(header_bytes))
    out[PREAMBLE:PREAMBLE + len(header_bytes)] = header_bytes
    for off, data in blobs:
        out[data_start + off:data_start + off + len(data)] = data
    return bytes(out)


def save(path, ckpt: Checkpoint, dtype: str = "f32") -> None:
    Path(path).write_bytes(to_bytes(ckpt, dtype))


# ---------------------------------------------------------------------------
# Reading.

def load(source) -> Checkpoint:
    """A Checkpoint from a path or the file's bytes (version 2 or legacy version 1)."""
    buf = bytes(source) if isinstance(source, (bytes, bytearray, memoryview)) else Path(source).read_bytes()
    if len(buf) < PREAMBLE:
        _fail(f"file is {len(buf)} bytes, shorter than the {PREAMBLE}-byte preamble (truncated?)")
    if buf[:4] != MAGIC:
        _fail(f"bad magic {buf[:4]!r}: not a .tinygpt file (expected {MAGIC!r})")
    version, header_len = struct.unpack_from("<II", buf, 4)
    if version not in (FORMAT["version"], FORMAT["legacy_version"]):
        _fail(f"unsupported version {version} (this reader knows {FORMAT['legacy_version']} and {FORMAT['version']})")
    if header_len > FORMAT["max_header_bytes"]:
        _fail(f"header length {header_len} exceeds max_header_bytes {FORMAT['max_header_bytes']}")
    if PREAMBLE + header_len > len(buf):
        _fail(f"header claims {header_len} bytes but only {len(buf) - PREAMBLE} follow the preamble (truncated?)")
    header = _parse_header(buf[PREAMBLE:PREAMBLE + header_len])
    # The original playground also wrote its fp16 gallery files with version 2; its header has a manifest.
    if version == FORMAT["legacy_version"] or ("manifest" in header and "format" not in header):
        return _read_legacy(buf, header, PREAMBLE + header_len)
    return _read_v2(buf, header, PREAMBLE + header_len)


def _parse_header(raw: bytes) -> dict:
    def no_constants(name):
        _fail(f"header JSON holds {name}, which is not valid JSON")
    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=no_constants)
    except UnicodeDecodeError as e:
        _fail(f"header is not UTF-8 ({e.reason} at byte {e.start})")
    except json.JSONDecodeError as e:
        _fail(f"header is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except RecursionError:
        _fail("header JSON is nested too deeply")
    if not isinstance(header, dict):
        _fail(f"header must be a JSON object, got {type(header).__name__}")
    return header


def _config(d, where: str, n_tensor_entries: int, per_model: int) -> model.GPTConfig:
    """The model config, sanity-checked before any per-layer work so an absurd
    n_layer cannot make us loop: the tensor list must already be that long."""
    if not isinstance(d, dict):
        _fail(f"{where} must be an object")
    for key in ("vocab_size", "n_layer", "n_embd", "n_head", "block_size"):
        if not _is_int(d.get(key)) or d[key] < 1:
            _fail(f"{where}.{key} must be a positive integer, got {d.get(key)!r}")
    if d["vocab_size"] != FACTS["vocab_size"]:
        _fail(f"{where}.vocab_size is {d['vocab_size']}; byte tokenizer models have {FACTS['vocab_size']}")
    if d["n_embd"] % d["n_head"]:
        _fail(f"{where}: n_embd {d['n_embd']} is not a multiple of n_head {d['n_head']}")
    expected = per_model * (len(FACTS["tensors"]["head"]) + d["n_layer"] * len(FACTS["tensors"]["block"]))
    if n_tensor_entries != expected:
        _fail(f"{where} implies {expected} tensor entries, the file lists {n_tensor_entries}")
    return model.GPTConfig.from_dict(d)


def _read_v2(buf: bytes, header: dict, header_end: int) -> Checkpoint:
    if header.get("format") != "tinygpt" or header.get("version") != FORMAT["version"]:
        _fail(f"header says format {header.get('format')!r} version {header.get('version')!r}, expected 'tinygpt' {FORMAT['version']}")
    tokenizer = header.get("tokenizer")
    if tokenizer != {"type": "bytes", "vocab_size": FACTS["vocab_size"]}:
        _fail(f"unsupported tokenizer {tokenizer!r} (expected bytes, vocab_size {FACTS['vocab_size']})")
    entries = header.get("tensors")
    if not isinstance(entries, list):
        _fail("header.tensors must be a list")
    has_moments = any(isinstance(e, dict) and isinstance(e.get("name"), str) and e["name"].startswith(M_PREFIX)
                      for e in entries)
    per_model = 3 if has_moments else 1
    config = _config(header.get("config"), "header.config", len(entries), per_model)

    expected = {}
    for name, shape, _ in model.tensor_specs(config):
        expected[name] = (shape, ("f32", "f16"))
        if per_model == 3:
            expected[M_PREFIX + name] = (shape, ("f32",))
            expected[V_PREFIX + name] = (shape, ("f32",))
    data_start = _align(header_end)
    arrays, spans, dtype = {}, [], None
    for i, e in enumerate(entries):
        where = f"header.tensors[{i}]"
        if not isinstance(e, dict):
            _fail(f"{where} must be an object")
        name = e.get("name")
        if not isinstance(name, str) or name not in expected:
            _fail(f"{where}: unknown or unexpected tensor name {name!r}")
        if name in arrays:
            _fail(f"{where}: tensor {name} listed twice")
        shape, allowed = expected[name]
        if e.get("shape") != list(shape):
            _fail(f"tensor {name}: shape {e.get('shape')!r}, the config implies {list(shape)}")
        if not isinstance(e.get("dtype"), str) or e["dtype"] not in DTYPES:
            _fail(f"tensor {name}: unknown dtype {e.get('dtype')!r} (known: {sorted(DTYPES)})")
        if e["dtype"] not in allowed:
            _fail(f"tensor {name}: dtype {e['dtype']} not allowed here (allowed: {list(allowed)})")
        if not name.startswith((M_PREFIX, V_PREFIX)):
            if dtype not in (None, e["dtype"]):
                _fail(f"tensor {name}: dtype {e['dtype']}, other weights are {dtype}")
            dtype = e["dtype"]
        offset, nbytes = e.get("offset"), e.get("nbytes")
        if not _is_int(offset) or offset < 0 or offset % ALIGN:
            _fail(f"tensor {name}: offset {offset!r} must be a non-negative multiple of {ALIGN}")
        size = math.prod(shape) * DTYPES[e["dtype"]].itemsize
        if nbytes != size:
            _fail(f"tensor {name}: nbytes {nbytes!r}, its shape and dtype imply {size}")
        if data_start + offset + nbytes > len(buf):
            _fail(f"tensor {name}: bytes {data_start + offset}..{data_start + offset + nbytes} lie beyond the end of the "
                  f"{len(buf)}-byte file (truncated?)")
        spans.append((offset, offset + nbytes, name))
        start = data_start + offset
        arrays[name] = np.frombuffer(buf, DTYPES[e["dtype"]], math.prod(shape), start).reshape(shape).astype(np.float32)
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            _fail(f"tensors {a} and {b} overlap")

    names = [n for n, _, _ in model.tensor_specs(config)]
    trainer = header.get("trainer")
    if trainer is not None:
        if not isinstance(trainer, dict) or not _is_int(trainer.get("step")) or trainer["step"] < 0:
            _fail(f"header.trainer must be null or have a non-negative integer step, got {trainer!r}")
        adam_step = trainer.get("adam_step")
        if adam_step is not None:
            if not _is_int(adam_step) or not 0 <= adam_step <= trainer["step"]:
                _fail(f"header.trainer.adam_step must be an integer between 0 and step {trainer['step']}, got {adam_step!r}")
            if per_model != 3:
                _fail("header.trainer.adam_step is set but the file has no Adam moments")
        tc = trainer.get("config")
        if not (isinstance(tc, dict) and all(_is_number(tc.get(k)) for k in TRAIN_CONFIG_FIELDS)):
            _fail(f"header.trainer.config must be a TrainConfig with numbers for {list(TRAIN_CONFIG_FIELDS)}")
    return Checkpoint(
        config=config, params={n: arrays[n] for n in names},
        m={n: arrays[M_PREFIX + n] for n in names} if per_model == 3 else None,
        v={n: arrays[V_PREFIX + n] for n in names} if per_model == 3 else None,
        trainer=trainer, history=_history(header.get("history", []), "header.history"),
        dataset=_dataset(header.get("dataset")), provenance=_provenance(header.get("provenance")),
        version=FORMAT["version"], dtype=dtype)


def _history(points, where: str) -> list[dict]:
    if not isinstance(points, list):
        _fail(f"{where} must be a list")
    for i, p in enumerate(points):
        if not (isinstance(p, dict) and _is_int(p.get("step")) and _is_number(p.get("train"))
                and ("val" not in p or p["val"] is None or _is_number(p["val"]))):
            _fail(f"{where}[{i}] must be {{step: integer, train: number, val?: number}}, got {p!r}")
    return points


def _dataset(d):
    if d is not None and not (isinstance(d, dict) and isinstance(d.get("name"), str)
                              and _is_int(d.get("bytes")) and isinstance(d.get("sha256"), str)):
        _fail(f"header.dataset must be null or {{name, bytes, sha256}}, got {d!r}")
    return d


def _provenance(p):
    if not (isinstance(p, dict) and isinstance(p.get("created"), str) and isinstance(p.get("producer"), str)):
        _fail(f"header.provenance must be an object with created and producer strings, got {p!r}")
    return p


# ---------------------------------------------------------------------------
# Legacy version 1: the original TinyGPT playground's export.

LEGACY_CONFIG = {"n_layer": "layers", "n_embd": "dModel", "n_head": "heads", "block_size": "ctx"}


def _read_legacy(buf: bytes, header: dict, header_end: int) -> Checkpoint:
    cfg, manifest = header.get("config"), header.get("manifest")
    if not isinstance(cfg, dict):
        _fail("legacy header.config must be an object")
    if not isinstance(manifest, list):
        _fail("legacy header.manifest must be a list")
    ours = {"vocab_size": cfg.get("vocabSize", FACTS["vocab_size"]), **{k: cfg.get(v) for k, v in LEGACY_CONFIG.items()}}
    for key, legacy in LEGACY_CONFIG.items():
        if not _is_int(ours[key]) or ours[key] < 1:
            _fail(f"legacy header.config.{legacy} must be a positive integer, got {ours[key]!r}")
    if cfg.get("dMlp", 4 * ours["n_embd"]) != 4 * ours["n_embd"]:
        _fail(f"legacy header.config.dMlp is {cfg.get('dMlp')!r}; this model's MLP is 4 * dModel = {4 * ours['n_embd']}")
    config = _config(ours, "legacy header.config", len(manifest), 1)

    weight_dtype = header.get("weightDtype", "fp32")
    if weight_dtype not in ("fp32", "fp16"):
        _fail(f"legacy header.weightDtype {weight_dtype!r} unknown (known: fp32, fp16)")
    with_optimizer = header.get("includesOptimizerState", True) is True and weight_dtype == "fp32"
    item = DTYPES["f16" if weight_dtype == "fp16" else "f32"]
    specs = model.tensor_specs(config)
    floats = sum(math.prod(shape) for _, shape, _ in specs)
    body = header_end + 4
    expected_len = body + floats * (3 * 4 if with_optimizer else item.itemsize)
    if len(buf) != expected_len:
        _fail(f"legacy file is {len(buf)} bytes; its config and layout ({weight_dtype}"
              f"{', with optimizer state' if with_optimizer else ''}) imply {expected_len}")
    (step,) = struct.unpack_from("<i", buf, header_end)
    if step < 0:
        _fail(f"legacy step {step} is negative")

    params, m, v, weight_offset = {}, {}, {}, 0
    for i, ((name, shape, _), e) in enumerate(zip(specs, manifest)):
        where = f"legacy header.manifest[{i}]"
        if not isinstance(e, dict) or e.get("name") != name:
            _fail(f"{where}: expected tensor {name}, got {e.get('name') if isinstance(e, dict) else e!r}")
        # Its manifest lists fc_in as [d_mlp, C] although the data is [C, d_mlp] (input-major), so either order is fine.
        if e.get("shape") not in (list(shape), list(reversed(shape))):
            _fail(f"tensor {name}: shape {e.get('shape')!r}, the config implies {list(shape)}")
        n = math.prod(shape)
        if "floatOffset" in e and e["floatOffset"] != weight_offset:
            _fail(f"tensor {name}: floatOffset {e['floatOffset']!r}, expected {weight_offset} (weights packed in order)")
        if with_optimizer:
            start = body + 3 * 4 * weight_offset
            w, mm, vv = np.frombuffer(buf, item, 3 * n, start).reshape(3, *shape)
            params[name], m[name], v[name] = w.copy(), mm.copy(), vv.copy()
        else:
            params[name] = np.frombuffer(buf, item, n, body + item.itemsize * weight_offset).reshape(shape).astype(np.float32)
        weight_offset += n

    history, points = [], header.get("lossHistory")
    for p in points if isinstance(points, list) else []:
        if isinstance(p, dict) and _is_int(p.get("step")):
            train, val = p.get("train", p.get("trainLoss")), p.get("val", p.get("valLoss"))
            if _is_number(train):
                history.append({"step": p["step"], "train": train, **({"val": val} if _is_number(val) else {})})
    created = header.get("savedAt") if isinstance(header.get("savedAt"), str) else ""
    return Checkpoint(
        config=config, params=params, m=m if with_optimizer else None, v=v if with_optimizer else None,
        trainer={"step": step, "config": None}, history=history, dataset=None,
        provenance={"created": created, "producer": "tinygpt-playground (legacy v1)"},
        version=FORMAT["legacy_version"], dtype="f16" if weight_dtype == "fp16" else "f32")
