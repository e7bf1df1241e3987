"""The two readers against each other: on thousands of seeded mutations of the
corpus, tinygpt.checkpoint and webapp/engine/checkpoint.ts (through
webapp/cli/inspect.ts) give the same verdict, the same message and, for a
file both accept, the same summary; and the TypeScript reader stays within
the spec's time and memory bounds on the largest inputs the format allows."""
import copy
import json
import random
import struct
import subprocess
from pathlib import Path

import pytest

from tests.oracles import checkpoint_corpus as corpus
from tinygpt import checkpoint
from tinygpt.site_build.node import build_cli
from tinygpt.facts import FACTS

ROOT = Path(__file__).resolve().parent.parent
MUTATIONS = 4000
MiB = 2**20
KEYS = ["format", "version", "config", "tokenizer", "tensors", "trainer", "history", "dataset", "provenance",
        "manifest", "weightDtype", "includesOptimizerState", "lossHistory", "name", "shape", "dtype", "offset",
        "nbytes", "step", "adam_step", "train", "val", "trainLoss", "valLoss", "floatOffset", "type", "vocab_size",
        "n_layer", "n_embd", "n_head", "block_size", "layers", "dModel", "heads", "ctx", "nLayers", "nHeads",
        "contextLength", "vocabSize", "dMlp", "batch_size", "lr", "seed", "eps", "beta1", "grad_clip", "sha256",
        "bytes", "__proto__", "toString", "constructor"]


class Overflow:
    """A number literal too large for a double, written as such (json.dumps cannot)."""

    def __deepcopy__(self, memo):
        return self


VALUES = [None, True, False, 0, 1, -1, 2, 3, 4, 7, 16, 64, 255, 256, 257, 1024, 1.5, -0.0, 0.5, 1e-300, Overflow(),
          2**31, 2**32, 2**53 - 1, 2**53, 2**53 + 1, 2**64, 10**20, "", "f16", "f32", "fp16", "fp32", "bf16",
          "bytes", "tinygpt", "__proto__", "toString", "opt.m.", "opt.v.token_embedding.weight",
          "token_embedding.weight", "blocks.0.ln1.weight", "blocks.00.ln1.weight", "blocks.1.ln1.weight",
          "ab" * 32, "AB" * 32, [], {}, [1], [256, 4], [4], [2, 4], [True], {"type": "bytes", "vocab_size": 256},
          {"step": 1, "train": 1.0}, [{"step": 1, "train": 2}], "\ud800", "\u00e9"]


def dumps(v, rng: random.Random) -> str:
    """JSON text with the freedoms a hand-made file may take: 4 as 4.0 or 4e0, escapes or not, repeated keys."""
    if isinstance(v, Overflow):
        return rng.choice(["1e400", "-1e999", "9" * 400])
    if isinstance(v, int) and not isinstance(v, bool):
        return rng.choices([str(v), f"{v}.0", f"{v}e0", f"{v}0e-1"], [7, 1, 1, 1])[0]
    if isinstance(v, list):
        return "[" + ",".join(dumps(x, rng) for x in v) + "]"
    if isinstance(v, dict):
        items = [f"{json.dumps(k)}:{dumps(x, rng)}" for k, x in v.items()]
        if items and rng.random() < 0.05:
            items.append(f"{json.dumps(rng.choice(list(v)))}:{dumps(copy.deepcopy(rng.choice(VALUES)), rng)}")
        return "{" + ",".join(items) + "}"
    return json.dumps(v, ensure_ascii=rng.random() < 0.5)


def edit_header(header: dict, rng: random.Random) -> None:
    for _ in range(rng.randint(1, 3)):
        path = rng.choice([p for p in corpus.paths(header) if p])
        target = header
        for key in path[:-1]:
            target = target[key]
        old, r = target[path[-1]], rng.random()
        if r < 0.15 and isinstance(target, dict):
            del target[path[-1]]
        elif r < 0.25 and isinstance(target, dict):
            target[rng.choice(KEYS)] = copy.deepcopy(rng.choice(VALUES))
        elif r < 0.35:  # a value from elsewhere in the same header
            source = header
            for key in rng.choice(list(corpus.paths(header))):
                source = source[key]
            target[path[-1]] = copy.deepcopy(source)
        elif r < 0.45 and isinstance(old, (int, float)) and not isinstance(old, bool):
            target[path[-1]] = old + rng.choice([-64, -1, 1, 64, 0.5])
        else:
            target[path[-1]] = copy.deepcopy(rng.choice(VALUES))


def mutate(buf: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.3:
        b = bytearray(buf)
        for _ in range(rng.randint(1, 4)):
            kind, at = rng.choice(["flip", "truncate", "insert", "delete", "u32"]), rng.randrange(max(len(b), 1))
            if kind == "flip" and b:
                b[at] ^= 1 << rng.randrange(8)
            elif kind == "truncate":
                del b[at:]
            elif kind == "insert":
                b[at:at] = rng.randbytes(rng.randint(1, 8))
            elif kind == "delete":
                del b[at:at + rng.randint(1, 8)]
            elif at + 4 <= len(b):
                b[at:at + 4] = struct.pack("<I", rng.choice([0, 1, 2, 63, 64, 2**31, 2**32 - 1, len(b), rng.getrandbits(32)]))
        return bytes(b)
    header = corpus.header_of(buf)
    edit_header(header, rng)
    raw = dumps(header, rng).encode("utf-8", "replace")
    if rng.random() < 0.03:
        raw = b"\xef\xbb\xbf" + raw
    out = corpus.with_header(buf, raw)
    if rng.random() < 0.05:  # the other version number in the preamble
        out = out[:4] + struct.pack("<I", 3 - struct.unpack_from("<I", out, 4)[0]) + out[8:]
    return out


@pytest.fixture(scope="module")
def inspect(tmp_path_factory) -> Path:
    return build_cli(ROOT, tmp_path_factory.mktemp("cli"))["inspect"]  # what `python build.py cli` writes


def typescript(inspect: Path, files: list[Path], stats: bool = False) -> list[dict]:
    run = subprocess.run(["node", str(inspect), *(["--stats"] if stats else []), *map(str, files)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    # Numbers as doubles, as both readers read them (JavaScript prints 2**64 as 18446744073709552000).
    return [json.loads(line, parse_int=float) for line in run.stdout.splitlines()]


def same(py: dict, ts: dict) -> bool:
    ts = {k: v for k, v in ts.items() if k not in ("file", "cpu_ms", "peak_bytes")}
    if not py["ok"] and py["rule"] == "header_json":  # the detail in brackets is each parser's own
        return ts.get("rule") == "header_json"
    return py == ts


def test_readers_agree_on_seeded_mutations_of_the_corpus(inspect, tmp_path):
    index = json.loads((corpus.DIR / "index.json").read_text())
    bases = [(corpus.DIR / c["file"]).read_bytes() for c in index["cases"] if c["ok"]]
    rng = random.Random(20261201)
    files = []
    for i in range(MUTATIONS):
        files.append(tmp_path / f"{i}.tinygpt")
        files[-1].write_bytes(mutate(rng.choice(bases), rng))
    ts = [v for k in range(0, len(files), 500) for v in typescript(inspect, files[k:k + 500])]
    verdicts = [checkpoint.verdict(f.read_bytes()) for f in files]
    differ = [f"{f.name}:\n  python     {json.dumps(p)[:300]}\n  typescript {json.dumps(t)[:300]}"
              for f, p, t in zip(files, verdicts, ts) if not same(p, t)]
    assert differ == [], f"{len(differ)} of {len(files)} files read differently:\n" + "\n".join(differ[:10])
    # The mutations reach deep into the format, not only its first checks.
    reached = {v.get("rule", "accepted") for v in verdicts}
    assert len(reached) > 30 and "accepted" in reached, reached


@pytest.mark.parametrize("label", list(corpus.at_the_limits()))
def test_typescript_reader_within_bounds_at_the_format_limits(inspect, tmp_path, label):
    buf = corpus.at_the_limits()[label]
    path = tmp_path / f"{label}.tinygpt"
    path.write_bytes(buf)
    (ts,) = typescript(inspect, [path], stats=True)
    assert same(checkpoint.verdict(buf), ts)
    assert ts["cpu_ms"] < 1000, f"{ts['cpu_ms']:.0f} ms of CPU"
    assert ts["peak_bytes"] < 64 * MiB + 2 * len(buf), f"peak grew by {ts['peak_bytes'] / MiB:.1f} MiB"


def test_typescript_reader_checks_the_header_before_reading_the_data(inspect, tmp_path):
    """A sparse 600 MiB file with a refused header is refused without reading its body; past the size cap,
    without reading anything."""
    path = tmp_path / "sparse.tinygpt"
    with open(path, "wb") as f:
        f.write((corpus.DIR / "huge-n_layer-192-bytes.tinygpt").read_bytes())
        f.truncate(600 * MiB)
    (ts,) = typescript(inspect, [path], stats=True)
    assert ts["rule"] == "tensor_count" and ts["peak_bytes"] < 4 * MiB, ts
    with open(path, "r+b") as f:
        f.truncate(FACTS["format"]["max_file_bytes"] + 1)
    (ts,) = typescript(inspect, [path], stats=True)
    assert ts["rule"] == "file_too_large" and ts["peak_bytes"] < 4 * MiB, ts
