"""Reading and writing .tinygpt files (content/docs/file-format.md is the spec).

    ckpt = load("run.tinygpt")        # or load(raw_bytes); v2, or a legacy v1 export
    save("out.tinygpt", ckpt, dtype="q8")     # weights as f32, f16 or q8 (int8 + a scale per column)

A file is untrusted input. Reading happens in two phases, as in
webapp/engine/checkpoint.ts, whose checks come in the same order with the same
messages (facts.json format.errors): `plan` checks the preamble and the header
against the file's real size and builds the list of tensor byte ranges without
touching the data; only then is the data read, decoded to float32 and checked
for non-finite values. Every failure is a CheckpointError whose `rule` names
the broken rule. A header that claims gigabytes costs nothing: nothing is
allocated until its bytes are known to be in the file.
"""
import hashlib
import json
import math
import os
import re
import struct
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from tinygpt import lora, model
from tinygpt.facts import FACTS

FORMAT = FACTS["format"]
MAGIC = FORMAT["magic"].encode("ascii")
PREAMBLE = FORMAT["preamble_bytes"]
ALIGN = FORMAT["data_alignment"]
M_PREFIX, V_PREFIX = FORMAT["optimizer_prefixes"]["m"], FORMAT["optimizer_prefixes"]["v"]
NUMPY_DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "q8": np.dtype("i1")}
Q8 = FORMAT["q8"]
LEGACY = FORMAT["legacy"]
PRODUCER = "tinygpt-python 0.1"
MAX_SAFE = 2**53 - 1  # JSON numbers are doubles; the TypeScript reader sees no integer beyond this


class CheckpointError(ValueError):
    """A .tinygpt file that cannot be read (or a checkpoint that cannot be written).
    `rule` is its key in facts.json format.errors."""

    def __init__(self, rule: str, **fields):
        super().__init__(FORMAT["errors"][rule].format(**fields))
        self.rule = rule


@dataclass
class Checkpoint:
    config: model.GPTConfig
    params: dict[str, np.ndarray]  # float32, canonical order and storage shapes
    m: dict[str, np.ndarray] | None = None  # Adam moments, float32, same keys
    v: dict[str, np.ndarray] | None = None
    trainer: dict | None = None  # {"step", "adam_step"?, "config": TrainConfig dict or None for legacy imports, "run"?}
    history: list[dict] = field(default_factory=list)  # [{"step", "train", "val"?}]
    dataset: dict | None = None  # {"name", "bytes", "sha256"}
    provenance: dict = field(default_factory=dict)  # {"created", "producer", "commit"?, "corpus_sha256"?}
    version: int = FORMAT["version"]  # the version the file was read from
    dtype: str = "f32"  # how the weights are stored: what load() read, what to_bytes() writes unless told otherwise
    # A LoRA adapter file: {"rank", "alpha", "targets", "base_sha256"}; params, m and v then hold the
    # adapter's tensors (lora.adapter_specs) and config is its base's.
    adapter: dict | None = None

    def weight_specs(self) -> list[tuple[str, tuple[int, ...]]]:
        return weight_specs(self.config, self.adapter)


def weight_specs(config: model.GPTConfig, adapter: dict | None) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of the weights a file holds, in canonical order: the model's, or an adapter's."""
    if adapter is None:
        return [(name, shape) for name, shape, _ in model.tensor_specs(config)]
    return lora.adapter_specs(config, lora.LoraConfig.from_header(adapter))


def weights_sha256(ckpt: Checkpoint, tensors: dict | None = None) -> str:
    """The sha256 of a checkpoint's weights (or of `tensors` named as they are) as float32 little-endian
    in canonical order: what an adapter's base_sha256 names its base by (facts.json format.adapter)."""
    tensors = ckpt.params if tensors is None else tensors
    h = hashlib.sha256()
    for name, _ in ckpt.weight_specs():
        h.update(np.ascontiguousarray(tensors[name], dtype="<f4").tobytes())
    return h.hexdigest()


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _int(x, lo: int = 0, hi: int = MAX_SAFE) -> int | None:
    """x as an int when it is a whole JSON number within [lo, hi] (JSON has one number type: 4.0 is 4)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    if isinstance(x, float) and not x.is_integer():
        return None
    return int(x) if lo <= x <= hi else None


def _number(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def thin_history(points: list[dict]) -> list[dict]:
    """At most max_history_points: every k-th point counting back from the newest, k as small as fits."""
    n, cap = len(points), FORMAT["max_history_points"]
    k = -(-n // cap)
    return points if k <= 1 else [p for i, p in enumerate(points) if (n - 1 - i) % k == 0]


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
# Writing (version 2 only). What is written is planned again by the reader, so
# a writer can never leave a file that its own readers refuse.

def _check_finite(name: str, a: np.ndarray, moment_v: bool = False) -> None:
    if not np.isfinite(a).all():
        raise CheckpointError("non_finite", name=name)
    if moment_v and (a < 0).any():
        raise CheckpointError("negative_moment", name=name)


def stored_bytes(dtype: str, shape) -> int:
    """A tensor's nbytes in the file: its values, and for q8 the column scales before them."""
    return math.prod(shape) * FORMAT["dtypes"][dtype] + (Q8["scale_bytes"] * shape[-1] if dtype == "q8" else 0)


def quantize_q8(array: np.ndarray) -> bytes:
    """A finite float tensor as q8 bytes (facts.json format.q8): column scales, then the int8 values."""
    columns = np.asarray(array, dtype=np.float64).reshape(-1, array.shape[-1])
    scale = (np.abs(columns).max(axis=0) / Q8["levels"]).astype("<f4")
    ratio = columns / np.where(scale > 0, scale, 1).astype(np.float64)
    q = np.sign(ratio) * np.floor(np.abs(ratio) + 0.5)  # half away from zero, as the TypeScript writer rounds
    return scale.tobytes() + np.clip(q, -Q8["levels"], Q8["levels"]).astype(np.int8).tobytes()


def dequantize_q8(buf, shape, at: int = 0) -> np.ndarray:
    """The float32 values of a q8 tensor whose bytes start at `at` in buf, flat."""
    cols = shape[-1]
    scale = np.frombuffer(buf, "<f4", cols, at)
    q = np.frombuffer(buf, np.int8, math.prod(shape), at + Q8["scale_bytes"] * cols)
    with np.errstate(invalid="ignore"):  # an infinite scale times 0 is NaN, refused by the caller
        return (q.reshape(-1, cols).astype(np.float32) * scale).ravel()


def to_bytes(ckpt: Checkpoint, dtype: str | None = None) -> bytes:
    """The checkpoint as version-2 bytes; weights in `dtype` ("f32", "f16" or "q8", ckpt.dtype by
    default), moments always f32."""
    dtype = dtype or ckpt.dtype
    if dtype not in NUMPY_DTYPES:
        raise ValueError(f"unknown weight dtype {dtype!r}; known: {sorted(NUMPY_DTYPES)}")
    if ckpt.adapter is not None and dtype not in FORMAT["adapter"]["dtypes"]:
        raise ValueError(f"an adapter's weights are stored as {' or '.join(FORMAT['adapter']['dtypes'])}, not {dtype}")
    if (ckpt.m is None) != (ckpt.v is None):
        raise ValueError("optimizer state needs both m and v")
    blobs, tensors, offset = [], [], 0

    def add(name, array, shape, dt, moment_v=False):
        nonlocal offset
        if tuple(array.shape) != shape:
            raise CheckpointError("tensor_shape", name=name, shape=list(shape))
        if dt == "q8":
            _check_finite(name, array)
            data = quantize_q8(array)
        else:
            with np.errstate(over="ignore"):  # beyond f16's range becomes infinity, refused just below
                values = np.ascontiguousarray(array, dtype=NUMPY_DTYPES[dt])
            _check_finite(name, values, moment_v)
            data = values.tobytes()
        tensors.append({"name": name, "shape": list(shape), "dtype": dt, "offset": offset, "nbytes": len(data)})
        blobs.append((offset, data))
        offset = _align(offset + len(data))

    specs = ckpt.weight_specs()
    for name, shape in specs:
        if name not in ckpt.params:
            raise ValueError(f"missing parameter {name}")
        add(name, ckpt.params[name], shape, dtype)
    if ckpt.m is not None:
        for prefix, moments in ((M_PREFIX, ckpt.m), (V_PREFIX, ckpt.v)):
            for name, shape in specs:
                add(prefix + name, moments[name], shape, "f32", prefix == V_PREFIX)
    for i, point in enumerate(ckpt.history):
        if not all(_number(point[k]) for k in ("train", "val") if point.get(k) is not None):
            raise CheckpointError("history_non_finite", index=i)
    header = {
        "format": "tinygpt", "version": FORMAT["version"], "config": ckpt.config.to_dict(),
        "tokenizer": {"type": "bytes", "vocab_size": FACTS["vocab_size"]},
        **({} if ckpt.adapter is None else {"adapter": ckpt.adapter}), "tensors": tensors,
        # A trainer whose settings are unknown (a legacy import) cannot be resumed as such: saved as null.
        "trainer": ckpt.trainer if ckpt.trainer and ckpt.trainer.get("config") else None,
        "history": thin_history(ckpt.history), "dataset": ckpt.dataset,
        "provenance": ckpt.provenance or {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "producer": PRODUCER},
    }
    # ASCII escapes: a lone surrogate in a name would not encode as UTF-8.
    header_bytes = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("ascii")
    data_start = _align(PREAMBLE + len(header_bytes))
    size = data_start + tensors[-1]["offset"] + tensors[-1]["nbytes"]
    if len(header_bytes) > FORMAT["max_header_bytes"]:
        raise CheckpointError("header_too_long", length=len(header_bytes), max=FORMAT["max_header_bytes"])
    if size > FORMAT["max_file_bytes"]:
        raise CheckpointError("file_too_large", size=size, max=FORMAT["max_file_bytes"])
    out = bytearray(size)
    out[:PREAMBLE] = MAGIC + struct.pack("<II", FORMAT["version"], len(header_bytes))
    out[PREAMBLE:PREAMBLE + len(header_bytes)] = header_bytes
    for off, data in blobs:
        out[data_start + off:data_start + off + len(data)] = data
    plan(out[:PREAMBLE + len(header_bytes)], size)
    return bytes(out)


def save(path, ckpt: Checkpoint, dtype: str | None = None) -> None:
    Path(path).write_bytes(to_bytes(ckpt, dtype))


# ---------------------------------------------------------------------------
# Reading, phase 1: the plan, from the preamble, the header and the file size.

@dataclass
class Plan:
    """What a checked header promises: tensors as (name, dtype, byte offset in the file, element count)."""
    version: int
    config: model.GPTConfig
    dtype: str
    tensors: list[tuple[str, str, int, int]]
    moments: bool
    trainer: dict | None
    history: list[dict]
    dataset: dict | None
    provenance: dict
    legacy_step_at: int | None = None  # version 1 keeps its step as an i32 in the data
    body_start: int = 0  # the first byte phase 2 needs
    adapter: dict | None = None


def header_length(preamble: bytes, size: int) -> int:
    """The header's length, once the preamble and the file's size pass their checks."""
    if size < PREAMBLE or len(preamble) < PREAMBLE:
        raise CheckpointError("file_too_short", size=size)
    if size > FORMAT["max_file_bytes"]:
        raise CheckpointError("file_too_large", size=size, max=FORMAT["max_file_bytes"])
    if bytes(preamble[:4]) != MAGIC:
        raise CheckpointError("magic")
    version, length = struct.unpack_from("<II", preamble, 4)
    if version not in (FORMAT["version"], FORMAT["legacy_version"]):
        raise CheckpointError("version", version=version)
    if length > FORMAT["max_header_bytes"]:
        raise CheckpointError("header_too_long", length=length, max=FORMAT["max_header_bytes"])
    if PREAMBLE + length > size:
        raise CheckpointError("header_truncated", length=length, left=size - PREAMBLE)
    return length


# Possessive, so that a megabyte-long string costs no backtracking memory.
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"?', re.S)


def _json_depth(raw: bytes) -> int:
    """Deepest nesting of [ and { outside strings, counted on the raw text whether or not it parses."""
    outside = np.frombuffer(_STRING.sub(b"", raw), np.uint8)
    steps = np.isin(outside, (ord("["), ord("{"))).astype(np.int64) - np.isin(outside, (ord("]"), ord("}")))
    return int(np.cumsum(steps).max(initial=0))


def _holds_infinity(value) -> bool:
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, float) and math.isinf(x):
            return True
        stack.extend(x.values() if isinstance(x, dict) else x if isinstance(x, list) else ())
    return False


def _parse_header(raw: bytes) -> dict:
    raw = bytes(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError("header_utf8") from None
    if _json_depth(raw) > FORMAT["max_json_depth"]:
        raise CheckpointError("header_depth", max=FORMAT["max_json_depth"])
    infinite = []

    def number(s: str):
        x = float(s)
        if math.isinf(x):
            infinite.append(s)
        return x

    def constant(name):
        raise ValueError(f"{name} is not a JSON value")

    # Every number is read as a double, as JavaScript reads them, so both readers see the same values.
    try:
        header = json.loads(text, parse_float=number, parse_int=number, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise CheckpointError("header_json", detail=f"{e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:
        raise CheckpointError("header_json", detail=str(e)) from None
    if infinite and _holds_infinity(header):  # a later duplicate key may have replaced it, as in JavaScript
        raise CheckpointError("header_number")
    if not isinstance(header, dict):
        raise CheckpointError("header_object")
    return header


def plan(head: bytes, size: int) -> Plan:
    """Checks the preamble and the header (`head`: the file's first bytes, at least preamble and header)
    against the file's size; reads no tensor data."""
    length = header_length(head[:PREAMBLE], size)
    header = _parse_header(head[PREAMBLE:PREAMBLE + length])
    # The original playground also wrote its fp16 gallery files with version 2; their header has a manifest.
    version = struct.unpack_from("<I", head, 4)[0]
    if version == FORMAT["legacy_version"] or (header.get("format") is None and header.get("manifest") is not None):
        return _plan_legacy(header, PREAMBLE + length, size)
    return _plan_v2(header, PREAMBLE + length, size)


def _config(d, where: str, keys: dict[str, str]) -> model.GPTConfig:
    """keys: our field name -> the name the file uses for it (the same in version 2)."""
    values = {}
    for ours, theirs in keys.items():
        values[ours] = _int(d.get(theirs), 1, FORMAT["max_dim"])
        if values[ours] is None:
            raise CheckpointError("config_int", where=where, key=theirs, max=FORMAT["max_dim"])
    if values["vocab_size"] != FACTS["vocab_size"]:
        raise CheckpointError("vocab", where=where)
    if values["n_embd"] % values["n_head"]:
        raise CheckpointError("heads", where=where, n_embd=values["n_embd"], n_head=values["n_head"])
    return model.GPTConfig(**values)


def _weight_count(config: model.GPTConfig) -> int:
    return len(FACTS["tensors"]["head"]) + config.n_layer * len(FACTS["tensors"]["block"])


_HEAD = {t["name"]: t["shape"] for t in FACTS["tensors"]["head"]}
_BLOCK = {t["name"].split("{i}")[1]: t["shape"] for t in FACTS["tensors"]["block"]}
_BLOCK_PREFIX = FACTS["tensors"]["block"][0]["name"].split("{i}")[0]
_LAYER_AND_REST = re.compile(r"(0|[1-9][0-9]{0,15})(.*)", re.S)


def _symbols(name: str, n_layer: int) -> list[str] | None:
    """The facts.tensors shape of a parameter name in a model of n_layer layers (None: no such
    parameter), found without listing the layers, so a long list of bogus entries costs nothing."""
    if name in _HEAD:
        return _HEAD[name]
    m = _LAYER_AND_REST.fullmatch(name[len(_BLOCK_PREFIX):]) if name.startswith(_BLOCK_PREFIX) else None
    return _BLOCK.get(m[2]) if m and int(m[1]) < n_layer else None


_HEX64 = re.compile(r"[0-9a-f]{64}")


def _adapter(raw) -> dict | None:
    """header.adapter checked, in the order of its error rules."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise CheckpointError("adapter_object")
    rank = _int(raw.get("rank"), 1, lora.LORA["max_rank"])
    if rank is None:
        raise CheckpointError("adapter_rank", max=lora.LORA["max_rank"])
    alpha = raw.get("alpha")
    if not (_number(alpha) and alpha > 0):
        raise CheckpointError("adapter_alpha")
    targets = raw.get("targets")
    if not (isinstance(targets, list) and targets and all(isinstance(t, str) and t in lora.PROJECTIONS for t in targets)
            and len(set(targets)) == len(targets)):
        raise CheckpointError("adapter_targets", names=", ".join(lora.PROJECTIONS))
    base = raw.get("base_sha256")
    if not (isinstance(base, str) and _HEX64.fullmatch(base)):
        raise CheckpointError("adapter_base")
    return {"rank": rank, "alpha": alpha, "targets": list(targets), "base_sha256": base}


_LORA_PARTS = {f".{proj}.lora_{part}": (proj, part) for proj in lora.PROJECTIONS.values() for part in "ab"}


def _adapter_shape(name: str, config: model.GPTConfig, adapter: dict) -> tuple[int, ...] | None:
    """The shape of an adapter tensor name in this adapter (None: no such tensor), without listing the layers."""
    m = _LAYER_AND_REST.fullmatch(name[len(_BLOCK_PREFIX):]) if name.startswith(_BLOCK_PREFIX) else None
    found = _LORA_PARTS.get(m[2]) if m and int(m[1]) < config.n_layer else None
    if found is None or found[0] not in (lora.PROJECTIONS[t] for t in adapter["targets"]):
        return None
    return lora.part_shape(config, *found, adapter["rank"])


def _shape_is(raw, shape) -> bool:
    return isinstance(raw, list) and len(raw) == len(shape) and all(_int(a) == b for a, b in zip(raw, shape))


def _plan_v2(header: dict, header_end: int, size: int) -> Plan:
    if header.get("format") != "tinygpt" or _int(header.get("version")) != FORMAT["version"]:
        raise CheckpointError("format")
    config_raw = header.get("config")
    if not isinstance(config_raw, dict):
        raise CheckpointError("config_object", where="header.config")
    config = _config(config_raw, "header.config", {k: k for k in FORMAT["config_keys"]})
    tokenizer = header.get("tokenizer")
    if not (isinstance(tokenizer, dict) and tokenizer.get("type") == "bytes"
            and _int(tokenizer.get("vocab_size")) == FACTS["vocab_size"]):
        raise CheckpointError("tokenizer")
    adapter = _adapter(header.get("adapter"))
    entries = header.get("tensors")
    if not isinstance(entries, list):
        raise CheckpointError("tensors_list")
    weights = _weight_count(config) if adapter is None else 2 * config.n_layer * len(adapter["targets"])
    if len(entries) not in (weights, 3 * weights):
        raise CheckpointError("tensor_count" if adapter is None else "adapter_count", weights=weights, all=3 * weights,
                              count=len(entries))
    moments = len(entries) == 3 * weights
    groups = ("", M_PREFIX, V_PREFIX) if moments else ("",)

    data_start = _align(header_end)
    found, spans, dtype = {}, [], None
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise CheckpointError("tensor_object", index=i)
        name = e.get("name")
        group = next((g for g in groups[1:] if name.startswith(g)), "") if isinstance(name, str) else ""
        if not isinstance(name, str):
            shape = None
        elif adapter is None:
            symbols = _symbols(name[len(group):], config.n_layer)
            shape = None if symbols is None else model.shape_of(symbols, config)
        else:
            shape = _adapter_shape(name[len(group):], config, adapter)
        if shape is None:
            raise CheckpointError("tensor_name", index=i)
        if name in found:
            raise CheckpointError("tensor_twice", name=name)
        weight_dtypes = FORMAT["dtypes"] if adapter is None else FORMAT["adapter"]["dtypes"]
        allowed = tuple(FORMAT["moment_dtypes"]) if group else tuple(weight_dtypes)
        if not _shape_is(e.get("shape"), shape):
            raise CheckpointError("tensor_shape", name=name, shape=list(shape))
        if e.get("dtype") not in allowed:
            raise CheckpointError("tensor_dtype", name=name, allowed=" or ".join(allowed))
        if not name.startswith((M_PREFIX, V_PREFIX)):
            if dtype not in (None, e["dtype"]):
                raise CheckpointError("tensor_mixed", name=name, dtype=dtype)
            dtype = e["dtype"]
        offset = _int(e.get("offset"))
        if offset is None or offset % ALIGN:
            raise CheckpointError("tensor_offset", name=name)
        count = math.prod(shape)
        nbytes = stored_bytes(e["dtype"], shape)
        if _int(e.get("nbytes")) != nbytes:
            raise CheckpointError("tensor_nbytes", name=name, nbytes=nbytes)
        start = data_start + offset
        if start + nbytes > size:
            raise CheckpointError("tensor_beyond", name=name, start=start, end=start + nbytes, size=size)
        found[name] = (name, e["dtype"], start, count)
        spans.append((offset, i, offset + nbytes, name))
    spans.sort()
    for (_, _, end, a), (start, _, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise CheckpointError("tensor_overlap", a=a, b=b)

    # Every entry is now known to hold real bytes of the file, so listing the layers costs what the file does.
    names = [name for name, _ in weight_specs(config, adapter)]
    return Plan(version=FORMAT["version"], config=config, dtype=dtype, tensors=[found[g + n] for g in groups for n in names],
                moments=moments, trainer=_trainer(header.get("trainer"), moments),
                history=_history(header.get("history"), "header.history", {"train": ["train"], "val": ["val"]}),
                dataset=_dataset(header.get("dataset")), provenance=_provenance(header.get("provenance")),
                body_start=data_start, adapter=adapter)


def _rule_text(rule: dict) -> str:
    """A trainer_config range in words, for its error message."""
    bounds = [f"{word} {rule[key]}" for key, word in (("min", "at least"), ("above", "above"),
                                                       ("max", "at most"), ("below", "below")) if key in rule]
    return ("an integer" if rule.get("integer") else "a number") + (" " + " and ".join(bounds) if bounds else "")


def _in_range(x, rule: dict) -> bool:
    if not _number(x) or (rule.get("integer") and _int(x, -MAX_SAFE) is None):
        return False
    return (x >= rule.get("min", -math.inf) and x <= rule.get("max", math.inf)
            and x > rule.get("above", -math.inf) and x < rule.get("below", math.inf))


def _trainer(raw, moments: bool) -> dict | None:
    if raw is None:
        return None
    step = _int(raw.get("step")) if isinstance(raw, dict) else None
    if step is None:
        raise CheckpointError("trainer")
    out = {"step": step}
    if raw.get("adam_step") is not None:
        adam_step = _int(raw["adam_step"], 0, step)
        if adam_step is None:
            raise CheckpointError("adam_step", step=step)
        if not moments:
            raise CheckpointError("adam_step_moments")
        out["adam_step"] = adam_step
    if not isinstance(raw.get("config"), dict):
        raise CheckpointError("train_config")
    out["config"] = _ranged(raw["config"], FORMAT["trainer_config"], "train_key")
    if raw.get("run") is not None:
        if not isinstance(raw["run"], dict):
            raise CheckpointError("run_object")
        out["run"] = _ranged(raw["run"], FORMAT["run_settings"], "run_key")
    return out


def _ranged(raw: dict, table: dict, rule: str) -> dict:
    """The fields of a facts range table (trainer_config, run_settings), each checked in the table's order."""
    out = {}
    for key, bounds in table.items():
        if key.startswith("_"):
            continue
        if not _in_range(raw.get(key), bounds):
            raise CheckpointError(rule, key=key, range=_rule_text(bounds))
        out[key] = int(raw[key]) if bounds.get("integer") else raw[key]
    return out


def _first(d: dict, names: list[str]):
    """The value of the first of these fields that is given (optional fields may be absent or null)."""
    return next((d[k] for k in names if d.get(k) is not None), None)


def _history(points, where: str, aliases: dict[str, list[str]]) -> list[dict]:
    """aliases: the file's names for the train and val losses."""
    if points is None:
        return []
    if not isinstance(points, list):
        raise CheckpointError("history_list", where=where)
    out = []
    for i, p in enumerate(points):
        step = _int(p.get("step")) if isinstance(p, dict) else None
        train, val = (_first(p, aliases["train"]), _first(p, aliases["val"])) if step is not None else (None, None)
        if not (_number(train) and (val is None or _number(val))):
            raise CheckpointError("history_point", where=where, index=i)
        out.append({"step": step, "train": train} | ({} if val is None else {"val": val}))
    return out


def _dataset(d) -> dict | None:
    if d is None:
        return None
    if not (isinstance(d, dict) and isinstance(d.get("name"), str) and _int(d.get("bytes")) is not None
            and isinstance(d.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", d["sha256"])):
        raise CheckpointError("dataset")
    return {"name": d["name"], "bytes": _int(d["bytes"]), "sha256": d["sha256"]}


def _provenance(p) -> dict:
    if p is None:
        return {}
    if not isinstance(p, dict):
        raise CheckpointError("provenance")
    return p


def _plan_legacy(header: dict, header_end: int, size: int) -> Plan:
    cfg = header.get("config")
    if not isinstance(cfg, dict):
        raise CheckpointError("legacy_config")
    keys = {ours: next((k for k in names if cfg.get(k) is not None), names[0])
            for ours, names in LEGACY["config_aliases"].items()}
    if cfg.get(keys["vocab_size"]) is None:  # the playground's models were all byte-level
        cfg = {**cfg, keys["vocab_size"]: FACTS["vocab_size"]}
    config = _config(cfg, "legacy header.config", keys)
    if cfg.get("dMlp") is not None and _int(cfg["dMlp"]) != 4 * config.n_embd:
        raise CheckpointError("legacy_dmlp", d_mlp=4 * config.n_embd)
    manifest = header.get("manifest")
    if not isinstance(manifest, list):
        raise CheckpointError("legacy_manifest")
    weights = _weight_count(config)
    if len(manifest) != weights:
        raise CheckpointError("legacy_count", weights=weights, count=len(manifest))
    named = header.get("weightDtype")
    weight_dtype = "f32" if named is None else LEGACY["weight_dtypes"].get(named) if isinstance(named, str) else None
    if weight_dtype is None:
        raise CheckpointError("legacy_dtype")
    flag = True if header.get("includesOptimizerState") is None else header["includesOptimizerState"]
    if not isinstance(flag, bool):
        raise CheckpointError("legacy_flag")
    triplets = flag and weight_dtype == "f32"  # the fp16 layout never carries Adam state
    body = header_end + 4  # an i32 step, then the tensors
    item = FORMAT["dtypes"][weight_dtype]
    expected = body + model.param_count(config) * (3 * item if triplets else item)
    if size != expected:
        raise CheckpointError("legacy_length", size=size, expected=expected)
    specs = model.tensor_specs(config)  # the file is now known to be as large as the layers

    tensors, moments, offset = [], [], 0
    for i, ((name, shape, _), e) in enumerate(zip(specs, manifest)):
        if not isinstance(e, dict) or e.get("name") != name:
            raise CheckpointError("legacy_entry", index=i, name=name)
        # Its manifest lists fc_in as [d_mlp, C] although the data is [C, d_mlp] (input-major): either order.
        if not (_shape_is(e.get("shape"), shape) or _shape_is(e.get("shape"), shape[::-1])):
            raise CheckpointError("tensor_shape", name=name, shape=list(shape))
        if e.get("floatOffset") is not None and _int(e["floatOffset"]) != offset:
            raise CheckpointError("legacy_offset", name=name, offset=offset)
        n = math.prod(shape)
        if triplets:
            at = body + 3 * 4 * offset
            tensors.append((name, "f32", at, n))
            moments += [(M_PREFIX + name, "f32", at + 4 * n, n), (V_PREFIX + name, "f32", at + 8 * n, n)]
        else:
            tensors.append((name, weight_dtype, body + item * offset, n))
        offset += n
    history = _history(header.get("lossHistory"), "legacy header.lossHistory", LEGACY["history_aliases"])
    provenance = {"producer": LEGACY["producer"]}
    if isinstance(header.get("savedAt"), str):
        provenance["created"] = header["savedAt"]
    return Plan(version=FORMAT["legacy_version"], config=config, dtype=weight_dtype,
                tensors=tensors + moments[0::2] + moments[1::2], moments=triplets, trainer=None, history=history,
                dataset=None, provenance=provenance, legacy_step_at=header_end, body_start=header_end)


# ---------------------------------------------------------------------------
# Reading, phase 2: the data.

def decode(p: Plan, body, body_offset: int) -> Checkpoint:
    """The tensors of a checked plan, from `body` (the file's bytes from `body_offset` on)."""
    trainer = p.trainer
    if p.legacy_step_at is not None:
        (step,) = struct.unpack_from("<i", body, p.legacy_step_at - body_offset)
        if step < 0:
            raise CheckpointError("legacy_step", step=step)
        trainer = {"step": step, "config": None}
    shapes = dict(weight_specs(p.config, p.adapter))
    names = list(shapes)
    arrays = {}
    for name, dtype, at, count in p.tensors:
        if dtype == "q8":
            a = dequantize_q8(body, shapes[name], at - body_offset)
        else:
            a = np.frombuffer(body, NUMPY_DTYPES[dtype], count, at - body_offset).astype(np.float32)
        _check_finite(name, a, name.startswith(V_PREFIX))
        arrays[name] = a
    take = lambda prefix: {n: arrays[prefix + n].reshape(shapes[n]) for n in names}  # noqa: E731
    return Checkpoint(config=p.config, params=take(""), m=take(M_PREFIX) if p.moments else None,
                      v=take(V_PREFIX) if p.moments else None, trainer=trainer, history=p.history,
                      dataset=p.dataset, provenance=p.provenance, version=p.version, dtype=p.dtype, adapter=p.adapter)


def load(source) -> Checkpoint:
    """A Checkpoint from a path or the file's bytes (version 2 or legacy version 1).
    From a path, the header is read and checked before the data is."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = memoryview(source).cast("B")
        return decode(plan(buf[:PREAMBLE + header_length(buf[:PREAMBLE], len(buf))], len(buf)), buf, 0)
    with open(source, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(PREAMBLE)
        head += f.read(header_length(head, size))
        p = plan(head, size)
        f.seek(p.body_start)
        body = f.read(size - p.body_start)
    if len(body) != size - p.body_start:  # the file changed under us
        raise CheckpointError("file_too_short", size=p.body_start + len(body))
    return decode(p, body, p.body_start)


# ---------------------------------------------------------------------------
# `python -m tinygpt.checkpoint FILE...`: what each reader makes of a file, in
# one JSON line each (the cross-reader tests compare this with the TypeScript
# reader's `node dist-cli/inspect.js --json`).
# `python -m tinygpt.checkpoint FILE --dtype q8 --out OUT`: the file's weights
# stored again in another dtype (how the gallery's q8 files are made).

def summary(ckpt: Checkpoint) -> dict:
    digest = lambda tensors: None if tensors is None else weights_sha256(ckpt, tensors)  # noqa: E731
    trainer = ckpt.trainer or {}
    return {"ok": True, "version": ckpt.version, "dtype": ckpt.dtype, "config": ckpt.config.to_dict(),
            "adapter": ckpt.adapter, "step": trainer.get("step", 0), "adam_step": trainer.get("adam_step"),
            "train": trainer.get("config"), "run": trainer.get("run"),
            "history": ckpt.history, "dataset": ckpt.dataset,
            "params": digest(ckpt.params), "m": digest(ckpt.m), "v": digest(ckpt.v)}


def verdict(source) -> dict:
    try:
        return summary(load(source))
    except CheckpointError as e:
        return {"ok": False, "rule": e.rule, "error": str(e)}


def main(argv=None) -> None:
    import argparse
    ap = argparse.ArgumentParser(description="Check .tinygpt files, or store one's weights in another dtype.")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--dtype", choices=list(NUMPY_DTYPES), help="with --out: the weight dtype to write")
    ap.add_argument("--out", help="write the (single) file's checkpoint here, weights in --dtype")
    args = ap.parse_args(argv)
    if args.out:
        if len(args.files) != 1 or not args.dtype:
            ap.error("--out takes one file and --dtype")
        save(args.out, load(args.files[0]), args.dtype)
        args.files.append(args.out)
    for path in args.files:
        print(json.dumps({"file": path, **verdict(path)}))


if __name__ == "__main__":
    main()
