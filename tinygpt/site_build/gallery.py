"""The gallery step: pretrained models from gallery/ into dist/gallery/.

gallery/manifest.json (the app reads the copy at /gallery/manifest.json):

    {"models": [{"id": "shakespeare-tiny", "title": "Shakespeare, Tiny",
                 "file": "shakespeare-tiny.tinygpt", "bytes": 123456, "sha256": "...",
                 "preset": "tiny", "corpus": "shakespeare", "steps": 2000,
                 "trained": "how it was trained: command, hardware, date"}]}

Each file must exist beside the manifest with that size and sha256, start with
the .tinygpt magic, and fit Cloudflare Pages' per-file limit. Errors name
the manifest's line: the offending key's, or the model's where a key is missing.
"""
import hashlib
import shutil

from tinygpt.facts import FACTS

from .context import PAGES_FILE_LIMIT, PAGES_MAX_FILE_BYTES as MAX_FILE_BYTES, BuildError, Context, read_json

REQUIRED = {"id": str, "title": str, "file": str, "bytes": int, "sha256": str}


def run(ctx: Context) -> str:
    out = ctx.out / "gallery"
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = ctx.root / "gallery" / "manifest.json"
    manifest, where = read_json(manifest_path, "gallery/manifest.json")
    models = manifest.get("models") if isinstance(manifest, dict) else None
    if not isinstance(models, list):
        raise BuildError("the manifest needs a 'models' list", where("models"))
    ids = {}
    for i, model in enumerate(models):
        if not isinstance(model, dict):
            raise BuildError(f"models[{i}] is not an object", where("models", i))
        missing = [k for k in REQUIRED if k not in model]
        if missing:
            raise BuildError(f"models[{i}] lacks {', '.join(missing)}", where("models", i))
        wrong = [k for k, kind in REQUIRED.items() if type(model[k]) is not kind]
        if wrong:
            raise BuildError(f"models[{i}].{wrong[0]} must be {REQUIRED[wrong[0]].__name__}",
                             where("models", i, wrong[0]))
        if model["id"] in ids:
            raise BuildError(f"models[{i}]: duplicate id {model['id']!r} (first at {ids[model['id']]})",
                             where("models", i, "id"))
        ids[model["id"]] = where("models", i, "id")
        path = ctx.root / "gallery" / model["file"]
        if "/" in model["file"] or not path.is_file():
            raise BuildError(f"models[{i}]: file {model['file']!r} is not in gallery/", where("models", i, "file"))
        data = path.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        if len(data) != model["bytes"] or sha256 != model["sha256"]:
            raise BuildError(f"models[{i}]: {model['file']} does not match its bytes/sha256 "
                             f"(it has {len(data)} bytes, sha256 {sha256})",
                             where("models", i, "bytes" if len(data) != model["bytes"] else "sha256"))
        if not data.startswith(FACTS["format"]["magic"].encode()):
            raise BuildError(f"models[{i}]: {model['file']} is not a .tinygpt file", where("models", i, "file"))
        if len(data) > MAX_FILE_BYTES:
            raise BuildError(f"models[{i}]: {model['file']} is over {PAGES_FILE_LIMIT}",
                             where("models", i, "bytes"))
        shutil.copyfile(path, out / model["file"])
    shutil.copyfile(manifest_path, out / "manifest.json")
    total = sum(m["bytes"] for m in models)
    return f"{len(models)} models, {total / 2**20:.1f} MiB"
