"""The gallery step: pretrained models from gallery/ into dist/gallery/.

gallery/manifest.json (the app reads the copy at /gallery/manifest.json) is
{"models": [...]}, one object per model. FIELDS below is the one list of its
keys: each key's kind and meaning, checked here and rendered into
content/docs/gallery.md. An entry, shortened:

    {"id": "shakespeare-tiny", "name": "Shakespeare, Tiny", "blurb": "...",
     "corpus": {"id": "shakespeare", "name": "...", "licence": "public domain", "sha256": "..."},
     "preset": "tiny", "config": {"vocab_size": 256, "n_layer": 2, ...},
     "parameters": 120576, "dtype": "f32",
     "file": "shakespeare-tiny.tinygpt", "bytes": 607168, "sha256": "...",
     "training": {"steps": 3000, "wall_time_s": null, "hardware": "...", "date": "2026-11-30",
                  "levers": [], "command": "..."},
     "train_loss": 1.8738, "val_loss": 1.9286, "val_loss_unquantized": null,
     "sample": {"prompt": "ROMEO:", "temperature": 0.8, "top_k": 40, "top_p": 1, "seed": 1,
                "tokens": 200, "text": "..."}}

Beyond the kinds: each file must exist beside the manifest with that size and
sha256, be a .tinygpt the reference reads, and fit Cloudflare Pages' per-file
limit; what the manifest says of the file (preset shape, config, parameters,
dtype, steps, corpus hash) must be what its header says, so a card cannot
describe another model. Errors name the manifest's line: the offending key's,
or its object's where a key is missing.
"""
import hashlib
import re
import shutil

from tinygpt import checkpoint, model
from tinygpt.facts import FACTS

from . import corpora
from .context import PAGES_FILE_LIMIT, PAGES_MAX_FILE_BYTES as MAX_FILE_BYTES, BuildError, Context, read_json


Q8_GATE = FACTS["format"]["q8"]["gate"]
# The whole gallery: what a visitor's cache may be asked to hold, with room for the site under Pages' limits.
MAX_GALLERY_BYTES = 60_000_000


def _number(v) -> bool:
    return type(v) in (int, float)


# Each kind: its test, and how the docs name it.
KINDS = {
    "object": (lambda v: isinstance(v, dict), "object"),
    "text": (lambda v: isinstance(v, str) and v.strip() != "", "non-empty string"),
    "slug": (lambda v: isinstance(v, str) and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", v) is not None,
             "lower-case letters and digits, hyphens between"),
    "file": (lambda v: isinstance(v, str) and re.fullmatch(r"[\w.-]+\.tinygpt", v) is not None and not v.startswith("."),
             f"a file name ending {FACTS['format']['extension']}, no folder"),
    "sha256": (lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) is not None, "64 lower-case hex digits"),
    "count": (lambda v: type(v) is int and v >= 1, "integer, at least 1"),
    "integer": (lambda v: type(v) is int and v >= 0, "integer, at least 0"),
    "number": (_number, "number"),
    "number or null": (lambda v: v is None or _number(v), "number, or null where unknown"),
    "date": (lambda v: isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) is not None, "YYYY-MM-DD"),
    "preset": (lambda v: v in [p["id"] for p in FACTS["presets"]], "a preset id of facts.json"),
    "dtype": (lambda v: v in checkpoint.NUMPY_DTYPES, " or ".join(checkpoint.NUMPY_DTYPES)),
    "levers": (lambda v: isinstance(v, list) and all(x in [lever["id"] for lever in FACTS["levers"]] for x in v),
               "list of lever ids of facts.json"),
}

# (key, kind, meaning): every key of a model, a dot for a key inside an object. All are required.
FIELDS = [
    ("id", "slug", "unique; names the model in the app and its tests"),
    ("name", "text", "the card's title"),
    ("blurb", "text", "what its text looks like, in a sentence or two"),
    ("corpus", "object", "the text it learned"),
    ("corpus.id", "slug", "the bundled corpus (`tinygpt/site_build/corpora.py`) it was prepared as"),
    ("corpus.name", "text", "the corpus's name for people"),
    ("corpus.licence", "text", "the licence of the text (SPDX id, or public domain)"),
    ("corpus.sha256", "sha256", "of the prepared text (`dist/corpora/<id>.txt`); the file's header must record the same"),
    ("preset", "preset", "the size preset whose shape config is"),
    ("config", "object", "the model's shape, as the file's header gives it"),
    ("config.vocab_size", "count", "256: bytes"),
    ("config.n_layer", "count", "transformer blocks"),
    ("config.n_embd", "count", "width"),
    ("config.n_head", "count", "attention heads"),
    ("config.block_size", "count", "context, in bytes"),
    ("parameters", "count", "weights in the model, as its config implies"),
    ("dtype", "dtype", "how the file stores the weights"),
    ("file", "file", "the model, beside the manifest in `gallery/`"),
    ("bytes", "count", "the file's size"),
    ("sha256", "sha256", "the file's hash; the app checks every download against it and caches the file under it"),
    ("training", "object", "how it was trained"),
    ("training.steps", "count", "optimizer steps; the file's step"),
    ("training.wall_time_s", "number or null", "seconds the run took; null where it was not recorded"),
    ("training.hardware", "text", "the machine, and which engine ran on it"),
    ("training.date", "date", "when"),
    ("training.levers", "levers", "the fast paths the run used; [] for the plain path"),
    ("training.command", "text", "the command line, environment included"),
    ("train_loss", "number or null", "the training loss (one batch) at the step the file holds; null where unknown"),
    ("val_loss", "number", "the validation metric (`python -m tinygpt.validation`), which `tests/test_gallery_metric.py` recomputes"),
    ("val_loss_unquantized", "number or null", "for a q8 file, the metric of the weights before quantization, which val_loss must be "
     "within facts.json format.q8.gate of (1%); null for f32 and f16 files"),
    ("sample", "object", "a continuation the model wrote, which the card shows"),
    ("sample.prompt", "text", "what it continued; the app's prompt once the model is loaded"),
    ("sample.temperature", "number", "0 is greedy"),
    ("sample.top_k", "integer", "0: no cut"),
    ("sample.top_p", "number", "1: no cut"),
    ("sample.seed", "integer", "the sampler's seed"),
    ("sample.tokens", "count", "bytes written after the prompt"),
    ("sample.text", "text", "those bytes, as UTF-8"),
]
KIND = {key: kind for key, kind, _ in FIELDS}


def doc_rows() -> list[dict]:
    """FIELDS for the docs page: key, kind in words, meaning."""
    return [{"key": key, "kind": KINDS[kind][1], "meaning": meaning} for key, kind, meaning in FIELDS]


def check_fields(obj: dict, prefix: str, where, path: tuple, name: str) -> None:
    """obj against the FIELDS under prefix ("" for a model, "corpus." for its corpus, ...)."""
    keys = [k[len(prefix):] for k in KIND if k.startswith(prefix) and "." not in k[len(prefix):]]
    unknown = [k for k in obj if k not in keys]
    if unknown:
        raise BuildError(f"{name}.{unknown[0]} is not a manifest key (content/docs/gallery.md lists them)",
                         where(*path, unknown[0]))
    missing = [k for k in keys if k not in obj]
    if missing:
        raise BuildError(f"{name} lacks {', '.join(missing)}", where(*path))
    for k in keys:
        test, words = KINDS[KIND[prefix + k]]
        if not test(obj[k]):
            raise BuildError(f"{name}.{k} must be {words}, not {obj[k]!r}"[:200], where(*path, k))
        if KIND[prefix + k] == "object":
            check_fields(obj[k], f"{prefix}{k}.", where, path + (k,), f"{name}.{k}")


def check_file(m: dict, data: bytes, where, i: int) -> None:
    """What the entry says of its file against the file itself."""
    at = lambda *keys: where("models", i, *keys)  # noqa: E731
    sha256 = hashlib.sha256(data).hexdigest()
    if len(data) != m["bytes"] or sha256 != m["sha256"]:
        raise BuildError(f"models[{i}]: {m['file']} does not match its bytes/sha256 "
                         f"(it has {len(data)} bytes, sha256 {sha256})",
                         at("bytes" if len(data) != m["bytes"] else "sha256"))
    if not data.startswith(FACTS["format"]["magic"].encode()):
        raise BuildError(f"models[{i}]: {m['file']} is not a .tinygpt file", at("file"))
    if len(data) > MAX_FILE_BYTES:
        raise BuildError(f"models[{i}]: {m['file']} is over {PAGES_FILE_LIMIT}", at("bytes"))
    try:
        saved = checkpoint.load(data)
    except checkpoint.CheckpointError as e:
        raise BuildError(f"models[{i}]: {m['file']} cannot be read: {e}", at("file")) from None
    preset = next(p for p in FACTS["presets"] if p["id"] == m["preset"])
    recorded = (saved.dataset or {}).get("sha256") or saved.provenance.get("corpus_sha256")
    truths = [(("config", k), m["config"][k], v) for k, v in saved.config.to_dict().items()] + [
        (("preset",), {k: m["config"][k] for k in ("n_layer", "n_embd", "n_head", "block_size")},
         {k: preset[k] for k in ("n_layer", "n_embd", "n_head", "block_size")}),
        (("parameters",), m["parameters"], model.param_count(saved.config)),
        (("dtype",), m["dtype"], saved.dtype),
        (("training", "steps"), m["training"]["steps"], (saved.trainer or {}).get("step")),
        (("corpus", "sha256"), m["corpus"]["sha256"], recorded or m["corpus"]["sha256"]),
    ]
    for keys, said, true in truths:
        if said != true:
            raise BuildError(f"models[{i}].{'.'.join(keys)} says {said!r}; {m['file']} has {true!r}", at(*keys))


def run(ctx: Context) -> str:
    out = ctx.out / "gallery"
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = ctx.root / "gallery" / "manifest.json"
    manifest, where = read_json(manifest_path, "gallery/manifest.json")
    models = manifest.get("models") if isinstance(manifest, dict) else None
    if not isinstance(models, list):
        raise BuildError("the manifest needs a 'models' list", where("models"))
    bundled = [c["id"] for c in corpora.CORPORA]
    ids = {}
    for i, m in enumerate(models):
        if not isinstance(m, dict):
            raise BuildError(f"models[{i}] is not an object", where("models", i))
        check_fields(m, "", where, ("models", i), f"models[{i}]")
        if m["id"] in ids:
            raise BuildError(f"models[{i}]: duplicate id {m['id']!r} (first at {ids[m['id']]})", where("models", i, "id"))
        ids[m["id"]] = where("models", i, "id")
        if m["corpus"]["id"] not in bundled:
            raise BuildError(f"models[{i}].corpus.id {m['corpus']['id']!r} is not a bundled corpus ({', '.join(bundled)})",
                             where("models", i, "corpus", "id"))
        if len(m["sample"]["text"].encode()) != m["sample"]["tokens"]:
            raise BuildError(f"models[{i}].sample.tokens says {m['sample']['tokens']}; "
                             f"sample.text is {len(m['sample']['text'].encode())} bytes", where("models", i, "sample", "tokens"))
        path = ctx.root / "gallery" / m["file"]
        if not path.is_file():
            raise BuildError(f"models[{i}]: file {m['file']!r} is not in gallery/", where("models", i, "file"))
        if (m["dtype"] == "q8") != (m["val_loss_unquantized"] is not None):
            raise BuildError(f"models[{i}].val_loss_unquantized must be a number for a q8 file and null otherwise",
                             where("models", i, "val_loss_unquantized"))
        if m["dtype"] == "q8" and abs(m["val_loss"] / m["val_loss_unquantized"] - 1) > Q8_GATE:
            raise BuildError(f"models[{i}]: q8 val_loss {m['val_loss']} is more than {Q8_GATE:.0%} from the unquantized "
                             f"weights' {m['val_loss_unquantized']} (facts.json format.q8.gate)", where("models", i, "val_loss"))
        data = path.read_bytes()
        check_file(m, data, where, i)
        shutil.copyfile(path, out / m["file"])
    total = sum(m["bytes"] for m in models)
    if total > MAX_GALLERY_BYTES:
        raise BuildError(f"the gallery's files add up to {total:,} bytes, over its {MAX_GALLERY_BYTES:,}", where("models"))
    shutil.copyfile(manifest_path, out / "manifest.json")
    return f"{len(models)} models, {total / 2**20:.1f} MiB"
