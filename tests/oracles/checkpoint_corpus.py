"""The checkpoint corpus: good and bad .tinygpt files with the verdict each reader must reach.

    python -m tests.oracles.checkpoint_corpus      # rewrites tests/fixtures/checkpoints/

Every file is built here from known tensors and a known header, then broken in
one way (or bent in a way the spec allows). index.json lists each file with what
reading it must give: for a good file the summary `tinygpt.checkpoint.summary`
prints (computed here from what was written, not by a reader); for a bad one
the rule of facts.json format.errors it breaks and the message (for
header_json, the message's fixed start: parsers word their details
differently). tests/test_checkpoint.py checks the committed folder equals what
this writes and that the Python reader agrees with every entry;
webapp/engine/test/checkpoint.test.ts holds the TypeScript reader to the same
entries, so a file the two readers disagree on fails CI.

Tensor values are small multiples of 1/256, exact in f16 and repetitive, so the
files stay small in git.
"""
import copy
import hashlib
import json
import shutil
import struct
from pathlib import Path

import numpy as np

from tinygpt import checkpoint, lora, model
from tinygpt.facts import FACTS

DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "checkpoints"
FORMAT = FACTS["format"]
ERRORS = FORMAT["errors"]
CONFIG = model.GPTConfig(vocab_size=256, n_layer=1, n_embd=4, n_head=1, block_size=2)
TRAIN = {"batch_size": 2, "lr": 0.01, "beta1": 0.9, "beta2": 0.95, "eps": 1e-08, "weight_decay": 0.1,
         "grad_clip": 1.0, "warmup_steps": 10, "seed": 7}
RUN = {"target_steps": 400, "eval_every": 50, "save_every": 25, "elapsed_ms": 1234.5}
HISTORY = [{"step": 1, "train": 5.5}, {"step": 2, "train": 5.25, "val": 5.5}, {"step": 3, "train": 5.0}]
DATASET = {"name": "sonnets.txt", "bytes": 1234, "sha256": "ab" * 32}
PROVENANCE = {"created": "2026-12-01T00:00:00+00:00", "producer": "tinygpt corpus"}
M, V = FORMAT["optimizer_prefixes"]["m"], FORMAT["optimizer_prefixes"]["v"]


def tensors(kind: str, specs=tuple((n, s) for n, s, _ in model.tensor_specs(CONFIG))) -> dict[str, np.ndarray]:
    """Deterministic float32 tensors: weights, Adam m, or Adam v (v is never negative)."""
    out, start = {}, {"w": 0, "m": 1, "v": 2}[kind]
    for name, shape in specs:
        i = np.arange(start, start + int(np.prod(shape)))
        a = ((i * 37) % 101 - 50) / 256 if kind != "v" else ((i * 13) % 29) / 256
        out[name] = a.astype(np.float32).reshape(shape)
        start += 7
    return out


W, MOM, VAR = tensors("w"), tensors("m"), tensors("v")
NAMES = [n for n, _, _ in model.tensor_specs(CONFIG)]


def digest(ts: dict | None, dtype: str = "f4", names: list[str] = NAMES) -> str | None:
    if ts is None:
        return None
    flat = np.concatenate([ts[n].ravel() for n in names])
    return hashlib.sha256(flat.astype(dtype).astype("<f4").tobytes()).hexdigest()


# An adapter for W: rank 2 on q and fc_out (one square projection, one that narrows), its base named by W's hash.
ADAPTER = {"rank": 2, "alpha": 3.0, "targets": ["q", "fc_out"], "base_sha256": digest(W)}
ADAPTER_SPECS = lora.adapter_specs(CONFIG, lora.LoraConfig(2, 3.0, ("q", "fc_out")))
ADAPTER_NAMES = [n for n, _ in ADAPTER_SPECS]
A_W, A_MOM, A_VAR = (tensors(kind, ADAPTER_SPECS) for kind in "wmv")


def as_q8(a: np.ndarray) -> np.ndarray:
    """What a q8 reader must give for float32 `a`, from the spec's words (facts.json format.q8):
    per last-axis index, a step of f32(max |value| / levels); each value a whole number of steps,
    ties away from zero."""
    step = (np.abs(a.astype(np.float64)).max(axis=tuple(range(a.ndim - 1))) / FORMAT["q8"]["levels"]).astype(np.float32)
    steps = np.divide(a.astype(np.float64), step, out=np.zeros(a.shape), where=step > 0)
    return (np.trunc(steps + np.copysign(0.5, steps)).astype(np.float32) * step).astype(np.float32)


def ok(*, version=2, dtype="f32", step=3, adam_step=None, train=TRAIN, run=None, history=HISTORY, dataset=DATASET,
       moments=False) -> dict:
    """The summary a reader must print for a file with these contents."""
    params = {n: as_q8(a) for n, a in W.items()} if dtype == "q8" else W
    return {"ok": True, "version": version, "dtype": dtype, "config": CONFIG.to_dict(), "adapter": None, "step": step,
            "adam_step": adam_step, "train": train, "run": run, "history": history, "dataset": dataset,
            "params": digest(params, "f2" if dtype == "f16" else "f4"), "m": digest(MOM) if moments else None,
            "v": digest(VAR) if moments else None}


def adapter_ok(moments=False) -> dict:
    return {**ok(), "adapter": ADAPTER, "params": digest(A_W, names=ADAPTER_NAMES),
            "m": digest(A_MOM, names=ADAPTER_NAMES) if moments else None,
            "v": digest(A_VAR, names=ADAPTER_NAMES) if moments else None}


def bad(rule: str, **fields) -> dict:
    if rule == "header_json":  # the parser's own words follow in brackets
        return {"ok": False, "rule": rule, "error": ERRORS[rule].split("(")[0]}
    return {"ok": False, "rule": rule, "error": ERRORS[rule].format(**fields)}


# ---------------------------------------------------------------------------
# Writers: version 2 through the Python writer, then edited; version 1 by hand, after the spec.

def v2(moments=False, dtype="f32", adam_step=None) -> bytes:
    trainer = {"step": 3, "config": TRAIN} | ({"adam_step": adam_step} if adam_step is not None else {})
    ckpt = checkpoint.Checkpoint(config=CONFIG, params=W, m=MOM if moments else None, v=VAR if moments else None,
                                 trainer=trainer, history=HISTORY, dataset=DATASET, provenance=PROVENANCE)
    return checkpoint.to_bytes(ckpt, dtype)


def adapter_file(moments=False) -> bytes:
    ckpt = checkpoint.Checkpoint(config=CONFIG, params=A_W, m=A_MOM if moments else None, v=A_VAR if moments else None,
                                 trainer={"step": 3, "config": TRAIN}, history=HISTORY, dataset=DATASET,
                                 provenance=PROVENANCE, adapter=ADAPTER)
    return checkpoint.to_bytes(ckpt)


def split(buf: bytes) -> tuple[dict, bytes]:
    length = struct.unpack_from("<I", buf, 8)[0]
    start = -(-(12 + length) // 64) * 64
    return json.loads(buf[12:12 + length]), buf[start:]


def join(header, data: bytes, version=2, raw: bytes | None = None) -> bytes:
    """A version-2 file from a header (or its raw bytes) and the data section, re-aligned."""
    raw = json.dumps(header).encode() if raw is None else raw
    start = -(-(12 + len(raw)) // 64) * 64
    return b"TGPT" + struct.pack("<II", version, len(raw)) + raw + bytes(start - 12 - len(raw)) + data


def with_header(buf: bytes, raw: bytes) -> bytes:
    """buf with its header's JSON replaced by raw, the data where its layout puts it (aligned in version 2)."""
    version, length = struct.unpack_from("<II", buf, 4)
    header = json.loads(buf[12:12 + length])
    if version == 1 or ("format" not in header and "manifest" in header):
        return b"TGPT" + struct.pack("<II", version, len(raw)) + raw + buf[12 + length:]
    return join(None, buf[-(-(12 + length) // 64) * 64:], version, raw=raw)


def header_of(buf: bytes) -> dict:
    return json.loads(buf[12:12 + struct.unpack_from("<I", buf, 8)[0]])


def paths(value, prefix=()):
    """Every path into a JSON value (lists: their first 40 items), for the fuzzers to pick from."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:40]):
            yield from paths(v, prefix + (i,))


def members(header: dict, extra: bytes) -> bytes:
    """The header's JSON text with more members written at its end (JSON the json module would not write)."""
    return json.dumps(header)[:-1].encode() + b", " + extra + b"}"


def edit(buf: bytes, change) -> bytes:
    header, data = split(buf)
    header = copy.deepcopy(header)
    change(header)
    return join(header, data)


def put(path: list, value):
    def change(header):
        target = header
        for key in path[:-1]:
            target = target[key]
        if value is DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return change


DELETE = object()


def poke(buf: bytes, header_tensor: int, index: int, value: float, dtype="<f4") -> bytes:
    """The file with element `index` of the header_tensor-th tensor entry set to value."""
    header, _ = split(buf)
    length = struct.unpack_from("<I", buf, 8)[0]
    t = header["tensors"][header_tensor]
    at = -(-(12 + length) // 64) * 64 + t["offset"] + index * np.dtype(dtype).itemsize
    return buf[:at] + np.array([value], dtype).tobytes() + buf[at + np.dtype(dtype).itemsize:]


def legacy_header(moments=True, fp16=False) -> dict:
    manifest, offset = [], 0
    C = CONFIG.n_embd
    for name, shape, _ in model.tensor_specs(CONFIG):
        listed = [4 * C, C] if name.endswith("fc_in.weight") else [C, 4 * C] if name.endswith("fc_out.weight") else list(shape)
        manifest.append({"name": name, "shape": listed, "floatOffset": offset})
        offset += int(np.prod(shape))
    return {"version": 1, "savedAt": "2025-01-01T00:00:00Z",
            "config": {"layers": CONFIG.n_layer, "dModel": C, "ctx": CONFIG.block_size, "heads": CONFIG.n_head,
                       "dMlp": 4 * C, "vocabSize": 256, "batchSize": 2, "backend": "webgpu"},
            "manifest": manifest, "includesOptimizerState": moments, "weightDtype": "fp16" if fp16 else "fp32",
            "lossHistory": [{"step": 1, "train": 5.5, "val": None}, {"step": 2, "train": 5.0, "val": 5.1}]}


LEGACY_HISTORY = [{"step": 1, "train": 5.5}, {"step": 2, "train": 5.0, "val": 5.1}]


def legacy(header=None, moments=True, fp16=False, version=1, step=7) -> bytes:
    header = legacy_header(moments, fp16) if header is None else header
    body = [struct.pack("<i", step)]
    for name, _, _ in model.tensor_specs(CONFIG):
        if fp16:
            body.append(W[name].astype("<f2").tobytes())
        else:
            body.append(W[name].astype("<f4").tobytes())
            if moments:
                body += [MOM[name].astype("<f4").tobytes(), VAR[name].astype("<f4").tobytes()]
    raw = json.dumps(header).encode()
    return b"TGPT" + struct.pack("<II", version, len(raw)) + raw + b"".join(body)


def legacy_edit(change, **kw) -> bytes:
    header = legacy_header(kw.get("moments", True), kw.get("fp16", False))
    change(header)
    return legacy(header, **kw)


def legacy_ok(moments=True, fp16=False, step=7, history=LEGACY_HISTORY) -> dict:
    return ok(version=1, dtype="f16" if fp16 else "f32", step=step, train=None, history=history, dataset=None,
              moments=moments and not fp16)


# ---------------------------------------------------------------------------
# The cases: label -> (bytes, expected).

def cases() -> dict[str, tuple[bytes, dict]]:
    good, full, half = v2(), v2(moments=True, adam_step=2), v2(moments=True, dtype="f16")
    q8, q8_full = v2(dtype="q8"), v2(moments=True, dtype="q8")
    header, data = split(good)
    n = len(header["tensors"])
    weights = len(FACTS["tensors"]["head"]) + len(FACTS["tensors"]["block"])
    size = len(good)
    first = header["tensors"][0]["name"]
    second = header["tensors"][1]
    data_start = len(good) - len(data)
    huge = {"format": "tinygpt", "version": 2, "config": {"vocab_size": 256, "n_layer": 1048576, "n_embd": 1,
            "n_head": 1, "block_size": 1}, "tokenizer": {"type": "bytes", "vocab_size": 256}, "tensors": []}
    deep = "[" * 33 + "]" * 33
    c = {}

    # Good files, and files the spec allows to differ from what the writers make.
    c["v2-f32"] = good, ok()
    c["v2-f32-adam"] = full, ok(adam_step=2, moments=True)
    c["v2-f16-adam"] = half, ok(dtype="f16", moments=True)
    c["v2-q8"] = q8, ok(dtype="q8")
    c["v2-q8-adam"] = q8_full, ok(dtype="q8", moments=True)
    c["v2-minimal"] = edit(good, lambda h: [h.pop(k) for k in ("trainer", "history", "dataset", "provenance")]), \
        ok(step=0, train=None, history=[], dataset=None)
    c["v2-optional-nulls"] = edit(full, lambda h: h.update(history=None, dataset=None, provenance=None)
                                  or h["trainer"].update(adam_step=None)), ok(moments=True, history=[], dataset=None)
    c["v2-whole-floats"] = edit(good, lambda h: [h["config"].update(n_embd=4.0, vocab_size=2.56e2),
                                                 h["tensors"][1].update(offset=float(second["offset"])),
                                                 h["trainer"].update(step=3.0), h["trainer"]["config"].update(batch_size=2.0),
                                                 h.update(version=2.0)]), ok()
    c["v2-any-order-and-unknown-keys"] = edit(good, lambda h: [h["tensors"].reverse(), h.update(future={"x": [1, 2]}),
                                                               h["tensors"][0].update(note="kept"),
                                                               h["tokenizer"].update(merges=None)]), ok()
    c["v2-trailing-bytes"] = good + bytes(100), ok()
    c["v2-run-settings"] = edit(good, put(["trainer", "run"], RUN)), ok(run=RUN)
    c["v2-overwritten-huge-number"] = join(None, data, raw=members(header, b'"x": 1e400, "x": 1')), ok()
    c["v2-prototype-names"] = edit(good, lambda h: h.update({"toString": 1, "__proto__": {"format": "x"}})), ok()
    c["v1-f32-adam"] = legacy(), legacy_ok()
    c["v1-f32"] = legacy(moments=False), legacy_ok(moments=False)
    c["v1-f16-says-version-2"] = legacy(moments=False, fp16=True, version=2), legacy_ok(fp16=True)
    c["v1-defaults"] = legacy_edit(lambda h: [h["config"].pop(k) for k in ("dMlp", "vocabSize")]
                                   + [h.pop(k) for k in ("weightDtype", "includesOptimizerState", "lossHistory")]
                                   + [e.pop("floatOffset") for e in h["manifest"]]), legacy_ok(history=[])
    c["v1-aliases"] = legacy_edit(lambda h: h.update(
        config={"nLayers": 1, "dModel": 4, "contextLength": 2, "nHeads": 1, "vocabSize": None, "dMlp": None},
        lossHistory=[{"step": 1, "train": None, "trainLoss": 5.5, "valLoss": 5.6}], weightDtype=None,
        includesOptimizerState=None)), legacy_ok(history=[{"step": 1, "train": 5.5, "val": 5.6}])

    # The preamble.
    c["empty"] = b"", bad("file_too_short", size=0)
    c["eleven-bytes"] = good[:11], bad("file_too_short", size=11)
    c["bad-magic"] = b"GGUF" + good[4:], bad("magic")
    c["version-3"] = good[:4] + struct.pack("<I", 3) + good[8:], bad("version", version=3)
    c["header-over-limit"] = good[:8] + struct.pack("<I", FORMAT["max_header_bytes"] + 1) + good[12:], \
        bad("header_too_long", length=FORMAT["max_header_bytes"] + 1, max=FORMAT["max_header_bytes"])
    c["header-beyond-file"] = good[:200], bad("header_truncated", length=struct.unpack_from("<I", good, 8)[0], left=188)

    # The header's bytes.
    raw = lambda text, version=2: join(None, b"", version, raw=text)  # noqa: E731
    c["header-not-utf8"] = raw(b'{"a": "\xff"}'), bad("header_utf8")
    c["header-overlong-utf8"] = raw(b'{"a": "\xc0\xaf"}'), bad("header_utf8")
    c["header-encoded-surrogate"] = raw(b'{"a": "\xed\xa0\x80"}'), bad("header_utf8")
    c["header-bom"] = join(None, data, raw=b"\xef\xbb\xbf" + json.dumps(header).encode()), bad("header_json")
    c["header-deep"] = raw(('{"x": ' + deep + "}").encode()), bad("header_depth", max=FORMAT["max_json_depth"])
    c["header-deep-and-broken"] = raw(b"[" * 2000 + b" nope"), bad("header_depth", max=FORMAT["max_json_depth"])
    c["header-deep-inside-string"] = join(None, data, raw=json.dumps(header | {"x": deep}).encode()), ok()
    c["header-syntax"] = raw(b'{"format": "tinygpt",}'), bad("header_json")
    c["header-nan"] = raw(b'{"format": NaN}'), bad("header_json")
    c["header-infinity-literal"] = raw(b'{"format": -Infinity}'), bad("header_json")
    c["header-1e400"] = join(None, data, raw=json.dumps(header).replace('"train": 5.5', '"train": 1e400').encode()), \
        bad("header_number")
    c["header-4301-digit-integer"] = join(None, data, raw=members(header, b'"big": ' + b"9" * 4301)), bad("header_number")
    c["header-array"] = raw(b"[]"), bad("header_object")

    # Version 2 header fields.
    c["format-gguf"] = edit(good, put(["format"], "gguf")), bad("format")
    c["format-version-string"] = edit(good, put(["version"], "2")), bad("format")
    c["config-not-object"] = edit(good, put(["config"], [1])), bad("config_object", where="header.config")
    for key, value in (("n_layer", 0), ("n_layer", True), ("n_layer", "1"), ("n_embd", 1.5), ("block_size", None),
                       ("n_embd", FORMAT["max_dim"] * 2), ("n_layer", 10**19)):
        c[f"config-{key}-{json.dumps(value)}"] = edit(good, put(["config", key], value)), \
            bad("config_int", where="header.config", key=key, max=FORMAT["max_dim"])
    c["config-vocab-gpt2"] = edit(good, put(["config", "vocab_size"], 50257)), bad("vocab", where="header.config")
    c["config-heads"] = edit(good, put(["config", "n_head"], 3)), bad("heads", where="header.config", n_embd=4, n_head=3)
    c["tokenizer-missing"] = edit(good, put(["tokenizer"], DELETE)), bad("tokenizer")
    c["tokenizer-null"] = edit(good, put(["tokenizer"], None)), bad("tokenizer")
    c["tokenizer-bpe"] = edit(good, put(["tokenizer", "type"], "bpe")), bad("tokenizer")
    c["tensors-not-list"] = edit(good, put(["tensors"], {})), bad("tensors_list")
    c["tensors-one-missing"] = edit(good, lambda h: h["tensors"].pop()), \
        bad("tensor_count", weights=weights, all=3 * weights, count=weights - 1)
    c["huge-n_layer-192-bytes"] = raw(json.dumps(huge).encode()), \
        bad("tensor_count", weights=4 + 16 * 1048576, all=3 * (4 + 16 * 1048576), count=0)
    c["huge-dims-no-tensors"] = raw(json.dumps(huge | {"config": huge["config"] | {"n_layer": 1, "n_embd": 2**20,
                                                                                     "block_size": 2**20}}).encode()), \
        bad("tensor_count", weights=20, all=60, count=0)
    c["tensor-not-object"] = edit(good, put(["tensors", 3], "x")), bad("tensor_object", index=3)
    c["tensor-name-not-string"] = edit(good, put(["tensors", 3, "name"], ["x"])), bad("tensor_name", index=3)
    c["tensor-name-unknown"] = edit(good, put(["tensors", 3, "name"], "output.weight")), bad("tensor_name", index=3)
    c["tensor-name-prototype"] = edit(good, put(["tensors", 3, "name"], "__proto__")), bad("tensor_name", index=3)
    c["tensor-moment-name-without-moments"] = edit(good, put(["tensors", 3, "name"], M + first)), \
        bad("tensor_name", index=3)
    c["tensor-twice"] = edit(good, put(["tensors", 1, "name"], first)), bad("tensor_twice", name=first)
    c["tensor-shape"] = edit(good, put(["tensors", 0, "shape"], [256, 5])), bad("tensor_shape", name=first, shape=[256, 4])
    c["tensor-shape-bool"] = edit(good, put(["tensors", 2, "shape"], [True])), \
        bad("tensor_shape", name=header["tensors"][2]["name"], shape=[4])
    c["tensor-dtype-bf16"] = edit(good, put(["tensors", 1, "dtype"], "bf16")), \
        bad("tensor_dtype", name=second["name"], allowed=" or ".join(FORMAT["dtypes"]))
    c["tensor-moment-f16"] = edit(full, put(["tensors", n, "dtype"], "f16")), bad("tensor_dtype", name=M + first, allowed="f32")
    c["tensor-mixed-f32-f16"] = edit(good, put(["tensors", 1, "dtype"], "f16")), \
        bad("tensor_mixed", name=second["name"], dtype="f32")
    c["tensor-moment-q8"] = edit(q8_full, put(["tensors", n, "dtype"], "q8")), bad("tensor_dtype", name=M + first, allowed="f32")
    c["tensor-mixed-q8-f32"] = edit(q8, put(["tensors", 1, "dtype"], "f32")), \
        bad("tensor_mixed", name=second["name"], dtype="q8")
    # A q8 tensor's nbytes counts its column scales: one f32 per index of the last axis.
    q8_first = split(q8)[0]["tensors"][0]
    c["tensor-q8-nbytes-without-scales"] = edit(q8, put(["tensors", 0, "nbytes"], 256 * 4)), \
        bad("tensor_nbytes", name=first, nbytes=q8_first["nbytes"])
    for label, value in (("misaligned", second["offset"] + 4), ("negative", -64), ("fraction", 64.5),
                         ("string", "64"), ("beyond-doubles", 2**60)):
        c[f"tensor-offset-{label}"] = edit(good, put(["tensors", 1, "offset"], value)), \
            bad("tensor_offset", name=second["name"])
    c["tensor-nbytes"] = edit(good, put(["tensors", 1, "nbytes"], second["nbytes"] + 4)), \
        bad("tensor_nbytes", name=second["name"], nbytes=second["nbytes"])
    far = edit(good, put(["tensors", 1, "offset"], 2**40))
    at = len(far) - len(data) + 2**40
    c["tensor-beyond-file"] = far, bad("tensor_beyond", name=second["name"], start=at, end=at + second["nbytes"], size=len(far))
    c["truncated-data"] = good[:-1], bad("tensor_beyond", name=header["tensors"][-1]["name"],
                                          start=data_start + header["tensors"][-1]["offset"], end=size, size=size - 1)
    c["tensors-overlap"] = edit(good, put(["tensors", 1, "offset"], 0)), bad("tensor_overlap", a=first, b=second["name"])

    # The trainer, history, dataset and provenance.
    c["trainer-list"] = edit(good, put(["trainer"], [])), bad("trainer")
    c["trainer-step-negative"] = edit(good, put(["trainer", "step"], -1)), bad("trainer")
    c["trainer-step-fraction"] = edit(good, put(["trainer", "step"], 1.5)), bad("trainer")
    c["adam_step-beyond-step"] = edit(full, put(["trainer", "adam_step"], 4)), bad("adam_step", step=3)
    c["adam_step-fraction"] = edit(full, put(["trainer", "adam_step"], 1.5)), bad("adam_step", step=3)
    c["adam_step-without-moments"] = edit(good, put(["trainer", "adam_step"], 0)), bad("adam_step_moments")
    c["trainer-config-missing"] = edit(good, put(["trainer", "config"], None)), bad("train_config")
    for key, value in (("batch_size", 0), ("batch_size", 1.5), ("lr", -1), ("lr", "fast"), ("beta1", 1),
                       ("eps", 0), ("grad_clip", 0), ("seed", 2**32), ("warmup_steps", DELETE)):
        rule = FORMAT["trainer_config"][key]
        c[f"trainer-config-{key}-{'missing' if value is DELETE else json.dumps(value)}"] = \
            edit(good, put(["trainer", "config", key], value)), bad("train_key", key=key, range=checkpoint._rule_text(rule))
    c["trainer-run-list"] = edit(good, put(["trainer", "run"], [])), bad("run_object")
    for key, value in (("target_steps", 1.5), ("eval_every", 0), ("save_every", DELETE), ("elapsed_ms", -1)):
        c[f"trainer-run-{key}-{'missing' if value is DELETE else json.dumps(value)}"] = \
            edit(good, lambda h, k=key, v=value: [h["trainer"].update(run=dict(RUN)), put(["trainer", "run", k], v)(h)]), \
            bad("run_key", key=key, range=checkpoint._rule_text(FORMAT["run_settings"][key]))
    c["history-not-list"] = edit(good, put(["history"], {"step": 1})), bad("history_list", where="header.history")
    c["history-step-fraction"] = edit(good, put(["history", 1, "step"], 1.5)), \
        bad("history_point", where="header.history", index=1)
    c["history-no-train"] = edit(good, put(["history", 2, "train"], DELETE)), \
        bad("history_point", where="header.history", index=2)
    c["history-val-string"] = edit(good, put(["history", 1, "val"], "x")), \
        bad("history_point", where="header.history", index=1)
    c["history-val-null"] = edit(good, put(["history", 1, "val"], None)), \
        ok(history=[HISTORY[0], {"step": 2, "train": 5.25}, HISTORY[2]])
    c["history-point-number"] = edit(good, put(["history", 0], 3)), bad("history_point", where="header.history", index=0)
    for label, value in (("name-number", DATASET | {"name": 1}), ("bytes-negative", DATASET | {"bytes": -1}),
                         ("sha-uppercase", DATASET | {"sha256": "AB" * 32}), ("sha-short", DATASET | {"sha256": "ab"}),
                         ("list", [])):
        c[f"dataset-{label}"] = edit(good, put(["dataset"], value)), bad("dataset")
    c["provenance-string"] = edit(good, put(["provenance"], "me")), bad("provenance")

    # LoRA adapters: the base's config, the adapter's tensors.
    adapter, adapter_full = adapter_file(), adapter_file(moments=True)
    a_header = split(adapter)[0]
    a_first, a_count = ADAPTER_NAMES[0], len(ADAPTER_NAMES)
    names = ", ".join(lora.PROJECTIONS)
    c["adapter"] = adapter, adapter_ok()
    c["adapter-adam"] = adapter_full, adapter_ok(moments=True)
    c["v2-adapter-null"] = edit(good, put(["adapter"], None)), ok()
    c["adapter-not-object"] = edit(adapter, put(["adapter"], [1])), bad("adapter_object")
    for label, value in (("zero", 0), ("65", FACTS["lora"]["max_rank"] + 1), ("half", 2.5), ("string", "2"), ("missing", DELETE)):
        c[f"adapter-rank-{label}"] = edit(adapter, put(["adapter", "rank"], value)), \
            bad("adapter_rank", max=FACTS["lora"]["max_rank"])
    for label, value in (("zero", 0), ("negative", -1), ("string", "3"), ("true", True)):
        c[f"adapter-alpha-{label}"] = edit(adapter, put(["adapter", "alpha"], value)), bad("adapter_alpha")
    for label, value in (("empty", []), ("twice", ["q", "q"]), ("unknown", ["q", "gate"]), ("string", "q"),
                         ("prototype", ["q", "toString"]), ("number", [1])):
        c[f"adapter-targets-{label}"] = edit(adapter, put(["adapter", "targets"], value)), bad("adapter_targets", names=names)
    for label, value in (("upper", ADAPTER["base_sha256"].upper()), ("short", "ab" * 31), ("missing", DELETE)):
        c[f"adapter-base-{label}"] = edit(adapter, put(["adapter", "base_sha256"], value)), bad("adapter_base")
    c["adapter-fewer-targets"] = edit(adapter, put(["adapter", "targets"], ["q"])), \
        bad("adapter_count", weights=a_count // 2, all=3 * a_count // 2, count=a_count)
    # With targets q and o, fc_out's tensors are not this adapter's, though they are a model's.
    c["adapter-other-projection"] = edit(adapter, put(["adapter", "targets"], ["q", "o"])), bad("tensor_name", index=2)
    c["adapter-base-tensor"] = edit(adapter, put(["tensors", 0, "name"], "blocks.0.attn.q_proj.weight")), \
        bad("tensor_name", index=0)
    c["adapter-layer-beyond"] = edit(adapter, put(["tensors", 1, "name"], "blocks.1.attn.q_proj.lora_b")), \
        bad("tensor_name", index=1)
    c["adapter-rank-shape"] = edit(adapter, put(["adapter", "rank"], 3)), \
        bad("tensor_shape", name=a_first, shape=[CONFIG.n_embd, 3])
    c["adapter-f16"] = edit(adapter, put(["tensors", 0, "dtype"], "f16")), bad("tensor_dtype", name=a_first, allowed="f32")
    c["adapter-nan"] = poke(adapter, 3, 1, np.nan), bad("non_finite", name=a_header["tensors"][3]["name"])
    c["model-with-adapter"] = edit(good, put(["adapter"], ADAPTER)), \
        bad("adapter_count", weights=a_count, all=3 * a_count, count=n)

    # The data.
    c["weights-nan"] = poke(good, 5, 3, np.nan), bad("non_finite", name=header["tensors"][5]["name"])
    c["weights-f16-infinity"] = poke(half, 0, 0, np.inf, "<f2"), bad("non_finite", name=first)
    # The scales come first in a q8 tensor: an infinite or NaN one makes its column non-finite.
    c["weights-q8-scale-infinity"] = poke(q8, 0, 1, np.inf), bad("non_finite", name=first)
    c["weights-q8-scale-nan"] = poke(q8, 5, 0, np.nan), bad("non_finite", name=header["tensors"][5]["name"])
    c["moment-nan"] = poke(full, n + 2, 0, np.nan), bad("non_finite", name=M + header["tensors"][2]["name"])
    c["moment-v-negative"] = poke(full, 2 * n + 1, 1, -1.0), bad("negative_moment", name=V + second["name"])
    # Non-finite values are looked for in the whole tensor before negative ones.
    c["moment-v-negative-then-nan"] = poke(poke(full, 2 * n + 1, 1, -1.0), 2 * n + 1, 2, np.nan), \
        bad("non_finite", name=V + second["name"])

    # Version 1.
    c["v1-config-missing"] = legacy_edit(put(["config"], DELETE)), bad("legacy_config")
    c["v1-heads-missing"] = legacy_edit(put(["config", "heads"], DELETE)), \
        bad("config_int", where="legacy header.config", key="heads", max=FORMAT["max_dim"])
    c["v1-layers-false"] = legacy_edit(put(["config", "layers"], False)), \
        bad("config_int", where="legacy header.config", key="layers", max=FORMAT["max_dim"])
    c["v1-vocab"] = legacy_edit(put(["config", "vocabSize"], 50257)), bad("vocab", where="legacy header.config")
    c["v1-dmlp"] = legacy_edit(put(["config", "dMlp"], 17)), bad("legacy_dmlp", d_mlp=16)
    c["v1-dmlp-true"] = legacy_edit(put(["config", "dMlp"], True)), bad("legacy_dmlp", d_mlp=16)
    c["v1-manifest-object"] = legacy_edit(put(["manifest"], {})), bad("legacy_manifest")
    c["v1-manifest-short"] = legacy_edit(lambda h: h["manifest"].pop()), bad("legacy_count", weights=weights, count=weights - 1)
    short = b'{"config":{"layers":1048576,"dModel":1,"heads":1,"ctx":1},"manifest":[]}'
    c["v1-88-bytes"] = b"TGPT" + struct.pack("<II", 1, len(short)) + short + bytes(4), \
        bad("legacy_count", weights=4 + 16 * 1048576, count=0)
    c["v1-dtype-int8"] = legacy_edit(put(["weightDtype"], "int8")), bad("legacy_dtype")
    c["v1-dtype-prototype"] = legacy_edit(put(["weightDtype"], "toString")), bad("legacy_dtype")
    c["v1-flag-string"] = legacy_edit(put(["includesOptimizerState"], "yes")), bad("legacy_flag")
    c["v1-flag-one"] = legacy_edit(put(["includesOptimizerState"], 1)), bad("legacy_flag")
    base = legacy()
    c["v1-trailing-bytes"] = base + bytes(4), bad("legacy_length", size=len(base) + 4, expected=len(base))
    c["v1-truncated"] = base[:-2], bad("legacy_length", size=len(base) - 2, expected=len(base))
    c["v1-entry-renamed"] = legacy_edit(put(["manifest", 2, "name"], "ln_final.wxight")), \
        bad("legacy_entry", index=2, name="ln_final.weight")
    c["v1-entry-not-object"] = legacy_edit(put(["manifest", 0], None)), bad("legacy_entry", index=0, name=first)
    c["v1-shape"] = legacy_edit(put(["manifest", 0, "shape"], [256, 5])), bad("tensor_shape", name=first, shape=[256, 4])
    c["v1-offset"] = legacy_edit(put(["manifest", 1, "floatOffset"], 1025)), \
        bad("legacy_offset", name=second["name"], offset=1024)
    c["v1-offset-false"] = legacy_edit(put(["manifest", 0, "floatOffset"], False)), bad("legacy_offset", name=first, offset=0)
    c["v1-history-point"] = legacy_edit(put(["lossHistory", 0, "step"], "1")), \
        bad("history_point", where="legacy header.lossHistory", index=0)
    c["v1-step-negative"] = legacy(step=-5), bad("legacy_step", step=-5)
    c["v1-weights-nan"] = legacy(moments=False)[:-4] + np.array([np.nan], "<f4").tobytes(), \
        bad("non_finite", name=model.tensor_specs(CONFIG)[-1][0])
    return c


def at_the_limits() -> dict[str, bytes]:
    """Inputs as costly as the format allows (headers near max_header_bytes), made on demand
    because they are too large to commit: the fuzz tests and bench/bench_checkpoint.py hold
    both readers to the time and memory bounds with them."""
    cap = FORMAT["max_header_bytes"]
    out = {}

    def fill(unit: bytes, room: int) -> list[bytes]:
        return [unit] * (room // (len(unit) + 1))

    # Tensor lists as long as the header holds, with an n_layer to match: refused at the first entry.
    n_layer = (cap - 300) // 3 // 16
    stubs = {"format": "tinygpt", "version": 2, "tokenizer": {"type": "bytes", "vocab_size": 256},
             "config": {"vocab_size": 256, "n_layer": n_layer, "n_embd": 1, "n_head": 1, "block_size": 1}}
    out["stubs"] = join(None, b"", raw=members(stubs, b'"tensors": [' + b",".join([b"{}"] * (4 + 16 * n_layer)) + b"]"))
    legacy_stubs = {"config": {"layers": n_layer, "dModel": 1, "heads": 1, "ctx": 1}}
    raw = members(legacy_stubs, b'"manifest": [' + b",".join([b"{}"] * (4 + 16 * n_layer)) + b"]")
    out["v1-stubs"] = b"TGPT" + struct.pack("<II", 1, len(raw)) + raw + bytes(4)
    # A real model with as many tensors as fit: every entry checked, every tensor decoded.
    wide = model.GPTConfig(vocab_size=256, n_layer=340, n_embd=1, n_head=1, block_size=1)
    rng = np.random.default_rng(0)
    params = {name: rng.standard_normal(shape).astype(np.float32) for name, shape, _ in model.tensor_specs(wide)}
    many = checkpoint.to_bytes(checkpoint.Checkpoint(config=wide, params=params, provenance=PROVENANCE))
    out["340-layers"] = many
    out["340-layers-nan"] = many[:-4] + np.array([np.nan], "<f4").tobytes()
    # A loss history as long as the header holds: every point checked.
    header, data = split(v2())
    header, data = split(v2())
    room = cap - len(json.dumps(header)) - 16
    history = b",".join(fill(b'{"step":123456,"train":1.2345678901234567}', room))
    out["history"] = join(None, data, raw=json.dumps({**header, "history": None}).replace(
        '"history": null', '"history": [' + history.decode() + "]").encode())
    # Values a reader ignores but must still parse: small objects, numbers that overflow, escapes, nesting.
    ignored = lambda items: join(None, data, raw=members(header, b'"x": [' + b",".join(items) + b"]"))  # noqa: E731
    out["objects"] = ignored(fill(b"{}", room))
    out["overflows"] = ignored(fill(b"1e999", room))
    out["escapes"] = ignored([b'"' + b"\\u0041" * (room // 6) + b'"'])
    out["nested-lists"] = ignored(fill(b"[" * 30 + b"0" + b"]" * 30, room))
    out["nested-objects"] = ignored(fill(b'{"":' * 30 + b"0" + b"}" * 30, room))
    return out


def index(corpus: dict[str, tuple[bytes, dict]]) -> str:
    entries = [{"file": f"{label}.tinygpt", **expected} for label, (_, expected) in corpus.items()]
    return json.dumps({"format": "tinygpt-checkpoint-corpus", "version": 1,
                       "generator": "python -m tests.oracles.checkpoint_corpus", "cases": entries}, indent=1) + "\n"


def main():
    corpus = cases()
    shutil.rmtree(DIR, ignore_errors=True)
    DIR.mkdir(parents=True)
    for label, (buf, _) in corpus.items():
        (DIR / f"{label}.tinygpt").write_bytes(buf)
    (DIR / "index.json").write_text(index(corpus))
    refused = sum(not expected["ok"] for _, expected in corpus.values())
    print(f"wrote {DIR}: {len(corpus)} files ({len(corpus) - refused} good, {refused} bad), "
          f"{sum(len(b) for b, _ in corpus.values()):,} bytes")


if __name__ == "__main__":
    main()
