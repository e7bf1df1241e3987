"""The bundle step: webapp/ through esbuild (from npm) into content-hashed files
under dist/assets/, and the WebAssembly CPU backend through AssemblyScript (two
builds of one source in one file).

Entry points: webapp/app/main.ts -> assets["app"] (and assets["app_css"] when it
imports CSS), webapp/worker/worker.ts -> assets["worker"], cpu.wasm ->
assets["wasm"]. ESM, minified, source maps, `.wgsl` imported as text (the
engine's shader modules as wgsl.py composes them into .cache/wgsl/, written
first), JSON as data.
"""
import hashlib
import json
import re
import subprocess
import tempfile
from pathlib import Path

from ..facts import FACTS
from . import wgsl
from .context import BuildError, Context

ENTRIES = {"app": "webapp/app/main.ts", "worker": "webapp/worker/worker.ts"}


def hashed_name(stem: str, data: bytes, suffix: str) -> str:
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:10]}{suffix}"


def ensure_node_modules(root: Path):
    """`npm ci` when node_modules is missing or older than package-lock.json."""
    marker = root / "node_modules" / ".package-lock.json"
    lock = root / "package-lock.json"
    if marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime:
        return
    result = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=root,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"npm ci failed:\n{result.stderr.strip()}", "package-lock.json:1")


def esbuild_error(stderr: str) -> BuildError:
    """esbuild's first "[ERROR] message" and the "file:line:col:" under it as the cause."""
    message = re.search(r"\[ERROR\] (.*)", stderr)
    at = re.search(r"^\s+(\S+):(\d+):(\d+):", stderr, re.M)
    if not message:
        return BuildError(f"esbuild failed:\n{stderr.strip()}")
    where = f"{at[1]}:{at[2]}:{int(at[3]) + 1}" if at else None  # esbuild counts columns from 0
    return BuildError(f"{message[1]} (esbuild)\n{stderr.strip()}", where)


def _esbuild(root: Path, assets_dir: Path, entries: dict[str, str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        meta_path = Path(tmp) / "meta.json"
        cmd = [str(root / "node_modules/.bin/esbuild"), *(f"{name}={src}" for name, src in entries.items()),
               "--bundle", "--format=esm", "--minify", "--sourcemap", "--target=es2022",
               "--entry-names=[name]-[hash]", "--asset-names=[name]-[hash]", f"--outdir={assets_dir}",
               "--loader:.wgsl=text", "--loader:.json=json", f"--metafile={meta_path}", "--log-level=error"]
        result = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        if result.returncode != 0:
            raise esbuild_error(result.stderr)
        meta = json.loads(meta_path.read_text())
    urls = {}
    for out_path, info in meta["outputs"].items():
        entry = info.get("entryPoint")
        for name, src in entries.items():
            if entry == src:
                urls[name] = "/assets/" + Path(out_path).name
                if info.get("cssBundle"):
                    urls[f"{name}_css"] = "/assets/" + Path(info["cssBundle"]).name
    return urls


_RELAXED_SECTION = next(lv["wasm_section"] for lv in FACTS["levers"] if lv["id"] == "relaxed-simd")


def _wasm_key(root: Path) -> str:
    """Hash of everything the WebAssembly build reads, so an unchanged backend is not recompiled."""
    h = hashlib.sha256(_RELAXED_SECTION.encode())
    cpu = root / "webapp" / "cpu"
    for path in [cpu / "asconfig.json", root / "package-lock.json", *sorted((cpu / "assembly").rglob("*"))]:
        if path.is_file():
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _leb128(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def compile_cpu_wasm(root: Path, out: Path):
    """cpu.wasm: asconfig's "release" target (plain SIMD) carrying its "relaxed" target (relaxed SIMD,
    from the same source) in a custom section, which engines skip; webapp/cpu/wasm.ts takes it out."""
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for target in ("release", "relaxed"):
            built[target] = Path(tmp) / f"{target}.wasm"
            cmd = [str(root / "node_modules/.bin/asc"), "--config", "webapp/cpu/asconfig.json", "--target", target,
                   "--outFile", str(built[target])]
            result = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
            if result.returncode != 0:
                text = (result.stderr or result.stdout).strip()
                at = re.search(r"(\S+\.ts)\((\d+),(\d+)\)", text)  # asc: "in webapp/cpu/assembly/x.ts(12,3)"
                where = f"{at[1]}:{at[2]}:{at[3]}" if at else "webapp/cpu/asconfig.json:1"
                raise BuildError(f"AssemblyScript failed ({target}):\n{text}", where)
        name = _RELAXED_SECTION.encode()
        body = _leb128(len(name)) + name + built["relaxed"].read_bytes()
        out.write_bytes(built["release"].read_bytes() + b"\0" + _leb128(len(body)) + body)


def _wasm(root: Path, cache: Path, assets_dir: Path) -> tuple[str, bool]:
    """AssemblyScript (slow: seconds) -> hashed cpu-*.wasm; returns (URL, whether it came from the cache)."""
    cached = cache / "wasm" / f"cpu-{_wasm_key(root)}.wasm"
    hit = cached.exists()
    if not hit:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        compile_cpu_wasm(root, tmp)
        tmp.rename(cached)
    data = cached.read_bytes()
    name = hashed_name("cpu", data, ".wasm")
    (assets_dir / name).write_bytes(data)
    return "/assets/" + name, hit


def run(ctx: Context) -> str:
    assets_dir = ctx.out / "assets"
    assets_dir.mkdir(parents=True, exist_ok=True)
    ensure_node_modules(ctx.root)
    wgsl.write_modules(ctx.root)
    ctx.assets.update(_esbuild(ctx.root, assets_dir, ENTRIES))
    ctx.assets["wasm"], hit = _wasm(ctx.root, ctx.cache, assets_dir)
    total = sum((ctx.out / url.lstrip("/")).stat().st_size for name, url in ctx.assets.items() if name != "site_css")
    return f"{', '.join(ENTRIES)}, wasm{' (cached)' if hit else ''}: {total / 1024:.0f} KiB in assets/ (without maps)"
