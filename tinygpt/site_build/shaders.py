"""The shaders step: compile every shader module (shaders/*.wgsl composed with what it
includes, tinygpt/site_build/wgsl.py) with real WGSL compilers.

Portable WGSL goes through wgpu-py (naga) on whatever adapter exists (lavapipe on
CPU-only Linux). Every module also goes through Tint, the compiler Chromium
runs, via Dawn in Node (npm `webgpu`, tint_check.mjs), when Dawn finds an
adapter: Tint's uniformity analysis rejects code naga accepts. Modules using
Chromium-only WGSL (`enable subgroups;`, Chromium's experimental extensions),
which naga cannot read, need Tint: without it they fail the build. A module enabling an
extension Dawn's adapter lacks (f16 on SwiftShader) is naga's alone, said so in the summary and
a note; Chromium-only WGSL Tint cannot take either fails the build. An invalid
shader fails the build with `shaders/file.wgsl:line:col: message (compiler)`, at the
line of the file it came from (an included one too). Each module's `struct Params` must
match facts.json's wgsl.params, the table the engine packs params by. Passes are cached
per module, composed text and compiler in .cache/shaders.json, so a warm build does not
start the compilers.
"""
import contextlib
import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from ..facts import FACTS, PATH as FACTS_PATH
from . import wgsl
from .context import BuildError, Context, read_json
from .node import dawn_env

CHROMIUM_ONLY = re.compile(r"^\s*enable\s+[^;]*\b(subgroups|chromium_\w+)\b", re.M)
NAGA_LOCATION = re.compile(r"wgsl:(\d+):(\d+)")


def compiler_for(source: str) -> str:
    return "tint" if CHROMIUM_ONLY.search(source) else "naga"


def _naga_message(text: str) -> tuple[str, str | None]:
    """naga's error text -> (message with its caret label, "line:col")."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    headline = next((ln for ln in lines if "error:" in ln), lines[-1] if lines else text)
    message = headline.split("error:", 1)[-1].strip()
    label = next((ln.lstrip("│").strip().lstrip("^").strip() for ln in lines if ln.startswith("│") and "^" in ln), "")
    at = NAGA_LOCATION.search(text)
    return message + (f" ({label})" if label else ""), f"{at[1]}:{at[2]}" if at else None


@contextlib.contextmanager
def _quiet_wayland():
    """libwayland, which the Vulkan drivers under wgpu and Dawn load, prints "error: XDG_RUNTIME_DIR
    is invalid or not set in the environment." twice per adapter where that is unset (CI, containers):
    an empty folder of our own quiets it and holds no display socket for it to find."""
    saved = os.environ.get("XDG_RUNTIME_DIR")
    with tempfile.TemporaryDirectory() as empty:
        os.environ["XDG_RUNTIME_DIR"] = empty
        try:
            yield
        finally:
            if saved is None:
                del os.environ["XDG_RUNTIME_DIR"]
            else:
                os.environ["XDG_RUNTIME_DIR"] = saved


def check_naga(files: dict[str, str]) -> dict[str, tuple[str, str | None] | None]:
    """name -> None if it compiles, else (message, "line:col")."""
    import wgpu

    with _quiet_wayland():
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if adapter is None:
        raise BuildError("wgpu found no adapter to compile shaders on (on Linux: apt-get install mesa-vulkan-drivers)")
    wanted = {"shader-f16", "subgroup"} & set(adapter.features)
    device = adapter.request_device_sync(required_features=sorted(wanted))
    results = {}
    for name, source in files.items():
        try:
            device.create_shader_module(code=source)
            results[name] = None
        except wgpu.GPUValidationError as e:
            results[name] = _naga_message(str(e))
    return results


class NoDawnAdapter(Exception):
    pass


class Lacks(str):
    """Tint's result for a module whose `enable` needs a feature Dawn's adapter lacks: that feature."""


def tint(root: Path, files: dict[str, str], f16_toggle: bool = False) -> tuple[str, dict[str, tuple[str, str | None] | Lacks | None]]:
    """(Dawn's adapter, name -> None if Tint compiles it, Lacks(feature), or (message, "line:col"))."""
    script = Path(__file__).with_name("tint_check.mjs")
    with _quiet_wayland(), tempfile.TemporaryDirectory() as tmp:
        answer = Path(tmp) / "tint.json"
        result = subprocess.run(["node", str(script), "--out", str(answer), *(["--dawn-f16-toggle"] if f16_toggle else [])],
                                input=json.dumps(files), cwd=root, env=dawn_env(), capture_output=True, text=True)
        if result.returncode == 2:
            raise NoDawnAdapter(result.stderr.strip())
        if result.returncode != 0:
            raise BuildError(f"Tint (Dawn via npm webgpu) failed to run: {result.stderr.strip() or result.stdout.strip()}")
        out = json.loads(answer.read_text())
    return out["adapter"], {name: None if r is None else Lacks(r["lacks"]) if "lacks" in r else (r["message"], r["where"])
                            for name, r in out["results"].items()}


def check_tint(root: Path, files: dict[str, str]) -> dict[str, tuple[str, str | None] | Lacks | None]:
    return tint(root, files)[1]


RECORDS = "shaders/validated.json"
# What a record is for: Chromium's experimental hardware extensions, which no build machine here has.
EXPERIMENTAL_HARDWARE = re.compile(r"^\s*enable\s+[^;]*\bchromium_experimental_\w+", re.M)
RECORD_COMMAND = "python -m tinygpt.site_build.shaders --record [--dawn-f16-toggle]"


def read_records(root: Path) -> dict[str, dict]:
    """Module -> the record of a Tint pass on an adapter that has what it enables (RECORDS)."""
    path = root / RECORDS
    return read_json(path, RECORDS)[0]["records"] if path.exists() else {}


def record(root: Path, f16_toggle: bool) -> list[str]:
    """On a machine whose adapter has the features Chromium's experimental extensions need (the H200
    for subgroup matrices): compile each module that enables one with Tint and write RECORDS for those
    that pass; a module Tint refuses fails the run, one whose features are missing here keeps its
    record, if any."""
    import datetime

    modules = {f"shaders/{n}.wgsl": wgsl.compose(root, n) for n in wgsl.names(root)}
    sources = {name: m.text for name, m in modules.items() if EXPERIMENTAL_HARDWARE.search(m.text)}
    adapter, results = tint(root, sources, f16_toggle)
    refused = {n: r for n, r in results.items() if r is not None and not isinstance(r, Lacks)}
    if refused:
        n, (message, at) = next(iter(sorted(refused.items())))
        raise BuildError(f"{message} (tint)", modules[n].where(*map(int, (at or "1:1").split(":"))))
    records = read_records(root)
    date = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    passed = sorted(n for n, r in results.items() if r is None)
    for n in passed:
        records[n] = {"sha256": hashlib.sha256(sources[n].encode()).hexdigest(), "adapter": adapter, "date": date,
                      "dawn_toggles": ["allow_unsafe_apis"] + (["vulkan_enable_f16_on_nvidia"] if f16_toggle else []),
                      "compiler": "Tint via npm webgpu " + _webgpu_version(root)}
    doc = ("Chromium-only shader modules that need hardware this build machine lacks (subgroup matrices), each "
           "compiled by Tint on an adapter that has it: the build accepts a module whose composed text still has "
           f"this sha256, and fails on one that changed. Written by `{RECORD_COMMAND}`.")
    (root / RECORDS).write_text(json.dumps({"_doc": doc, "records": dict(sorted(records.items()))}, indent=1) + "\n")
    return passed


def _webgpu_version(root: Path) -> str:
    package = root / "node_modules" / "webgpu" / "package.json"
    return json.loads(package.read_text())["version"] if package.exists() else "(version unknown)"


def check_params(module: wgsl.Module):
    """The module's struct Params against its row of facts.json's wgsl.params, field by field."""
    found = wgsl.struct_params(module.text)
    table = FACTS["wgsl"]["params"].get(wgsl.params_row(module.name))

    def row() -> str:  # the table row's file:line, for a message (facts.json is re-read only on a failure)
        return read_json(FACTS_PATH, "tinygpt/facts.json")[1]("wgsl", "params", wgsl.params_row(module.name))

    if found is None and table is None:
        return
    if found is None:
        raise BuildError(f"declares no struct Params, but {row()} lists its params",
                         module.where(1))
    struct_line, fields = found
    if table is None:
        raise BuildError("struct Params has no row in tinygpt/facts.json wgsl.params, which the engine packs params by",
                         module.where(struct_line))
    for i in range(max(len(fields), len(table))):
        mine, theirs = (fields[i][0] if i < len(fields) else None), (table[i] if i < len(table) else None)
        if mine != theirs:
            line = fields[i][1] if i < len(fields) else fields[-1][1] + 1 if fields else struct_line  # else: the brace
            raise BuildError(f"struct Params field {i + 1} is {mine or 'missing'}, but "
                             f"{row()} says {theirs or 'nothing'} "
                             "(a u32 field is written as its name, any other type as name:type)", module.where(line))


def run(ctx: Context) -> str:
    """naga checks the portable modules, Tint (the compiler Chromium runs) checks every module
    when Dawn finds an adapter; a Chromium-only module without Tint fails the build."""
    cache_path = ctx.cache / "shaders.json"
    cache: dict[str, list[str]] = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    modules = {f"shaders/{n}.wgsl": wgsl.compose(ctx.root, n) for n in wgsl.names(ctx.root)}
    for module in modules.values():
        check_params(module)
    sources = {name: module.text for name, module in modules.items()}
    digest = {name: hashlib.sha256(src.encode()).hexdigest() for name, src in sources.items()}
    chromium_only = {name for name, src in sources.items() if compiler_for(src) == "tint"}

    def todo(compiler: str, names) -> dict[str, str]:
        return {n: sources[n] for n in names if f"{compiler}:{digest[n]}" not in cache.get(n, [])}

    results: list[tuple[str, str, tuple | None]] = []  # (file, compiler, None or (message, line:col))
    naga_jobs = todo("naga", sorted(set(sources) - chromium_only))
    if naga_jobs:
        results += [(n, "naga", r) for n, r in check_naga(naga_jobs).items()]
    # Modules Tint could not take on this adapter and the feature why, remembered like a pass
    # (cache entry "tint-lacks:<feature>:<digest>") so that a warm build does not start Dawn for them.
    lacking = {n: Lacks(k.split(":")[1]) for n in sources for k in cache.get(n, [])
               if k.startswith("tint-lacks:") and k.endswith(":" + digest[n])}
    tint_jobs = {n: src for n, src in todo("tint", sorted(sources)).items() if n not in lacking}
    tint_ran = True
    if tint_jobs:
        try:
            checked = check_tint(ctx.root, tint_jobs)
            fresh_lacks = {n: r for n, r in checked.items() if isinstance(r, Lacks)}
            for n, feature in fresh_lacks.items():
                cache[n] = [k for k in cache.get(n, []) if not k.startswith("tint")] + [f"tint-lacks:{feature}:{digest[n]}"]
            lacking |= fresh_lacks
            results += [(n, "tint", r) for n, r in checked.items() if n not in lacking]
        except NoDawnAdapter as e:
            missing = sorted(chromium_only & set(tint_jobs))
            if missing:
                line = sources[missing[0]].count("\n", 0, CHROMIUM_ONLY.search(sources[missing[0]]).start(1)) + 1
                raise BuildError(f"only Tint can check {', '.join(missing)} (Chromium-only WGSL), "
                                 f"and Dawn found no adapter: {e}", modules[missing[0]].where(line)) from None  # the enable
            tint_ran = False
            ctx.notes.append(f"shaders: Dawn found no adapter, so Tint did not check the shaders ({e})")
    # Chromium-only modules Tint cannot take here: accepted where RECORDS holds a pass of this very text.
    records = read_records(ctx.root)
    recorded = {n for n in chromium_only & set(lacking) if records.get(n, {}).get("sha256") == digest[n]}
    unchecked = sorted(chromium_only & set(lacking) - recorded)
    if unchecked:
        name = unchecked[0]
        line = sources[name].count("\n", 0, CHROMIUM_ONLY.search(sources[name]).start(1)) + 1
        stale = " (its record there is of an earlier version)" if name in records else ""
        raise BuildError(f"only Tint can check {', '.join(unchecked)} (Chromium-only WGSL), and Dawn's adapter "
                         f"lacks {lacking[name]}; {RECORDS} has no record of this version{stale}: run `{RECORD_COMMAND}` "
                         "on a machine whose adapter has it and commit the file", modules[name].where(line))
    lacking = {n: f for n, f in lacking.items() if n not in recorded}
    if lacking:
        ctx.notes.append("shaders: Dawn's adapter lacks " + ", ".join(sorted(set(lacking.values()))) +
                         f", so only naga checked {', '.join(sorted(lacking))}")
    for name, compiler, r in results:
        if r is None:
            kept = [k for k in cache.get(name, []) if not k.startswith(compiler + ":")]
            cache[name] = kept + [f"{compiler}:{digest[name]}"]
    ctx.cache.mkdir(parents=True, exist_ok=True)
    cache_path.write_text(json.dumps(cache, indent=1, sort_keys=True))
    failures = sorted((name, compiler, r) for name, compiler, r in results if r)
    if failures:
        def located(name, compiler, message, at):
            """(original file:line:col, message naming the module when the error is in an included file)."""
            where = modules[name].where(*map(int, (at or "1:1").split(":")))
            return where, message + (f" (in {name})" if not where.startswith(name + ":") else "") + f" ({compiler})"
        where, message = located(*failures[0][:2], *failures[0][2])
        others = "".join("\n{}: {}".format(*located(n, c, m, w)) for n, c, (m, w) in failures[1:])
        raise BuildError(message + others, where)
    # Cached Tint passes count as Tint's; only the modules Tint refused for want of a feature are naga's alone.
    both = len(sources) - len(chromium_only) - len(lacking) if tint_ran else 0
    summary = (f"{len(sources)} shaders valid: {both} by naga (wgpu) and Tint (Dawn), "
               f"{len(sources) - len(chromium_only) - both} by naga only, {len(chromium_only) - len(recorded)} by Tint only")
    if recorded:
        summary += f", {len(recorded)} by Tint on other hardware ({RECORDS}: " + "; ".join(
            f"{n} on {records[n]['adapter']}, {records[n]['date'][:10]}" for n in sorted(recorded)) + ")"
    fresh = len({n for n, _, _ in results})
    return summary + (f"; {len(sources) - fresh} unchanged since checked" if fresh < len(sources) else "")


if __name__ == "__main__":
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=f"Record Tint passes of the Chromium-only shader modules in {RECORDS}.")
    parser.add_argument("--record", action="store_true", required=True)
    parser.add_argument("--dawn-f16-toggle", action="store_true", help="Dawn's vulkan_enable_f16_on_nvidia (test hosts only)")
    args = parser.parse_args()
    try:
        written = record(Path(__file__).resolve().parents[2], args.dawn_f16_toggle)
    except (BuildError, NoDawnAdapter) as e:
        sys.exit(f"error: {e}")
    print(f"recorded {len(written)} module(s) in {RECORDS}: {', '.join(written) or 'none'}")
