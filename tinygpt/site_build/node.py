"""Node from Python, one way for everyone (the build, the tests, the benchmarks):
bundling TypeScript for Node with esbuild, `python build.py cli` (the Node tools
in dist-cli/), the flag that turns relaxed SIMD on, and the environment Dawn
(npm `webgpu`) needs to find a Vulkan adapter.

    node_bundle(root, ["webapp/engine/test/x.test.ts"], out_dir)   # -> [out_dir/x.test.mjs]
    build_cli(root)                                                # -> {"train": dist-cli/train.js, ...}
    subprocess.run(["node", *relaxed_simd_flags(), ...], env=dawn_env())
"""
import os
import subprocess
from pathlib import Path

from . import wgsl

# The Node tools, dist-cli/<name>.js: the engine's trainer, sampler and file reader, and the Dawn side of
# bench/bench_matmul.py (dist-cli/ is what a machine without node_modules is given to run them).
CLI = {"train": "webapp/cli/train.ts", "sample": "webapp/cli/sample.ts", "inspect": "webapp/cli/inspect.ts", "matmul_dawn": "bench/matmul_dawn.ts"}
RELAXED_SIMD_FLAG = "--experimental-wasm-relaxed-simd"  # Node 20 has relaxed SIMD behind it
# SwiftShader's Vulkan driver, where the chromium package (Debian) or Playwright (elsewhere) put it.
SWIFTSHADER_ICD = "vk_swiftshader_icd.json"


def node_bundle(root: Path, entries: list, out_dir: Path, extension: str = ".mjs", link_modules: bool = False) -> list[Path]:
    """Bundles each entry (a path from root) for Node into out_dir/<its name><extension>: ESM,
    `.wgsl` as text (the engine's shader modules as wgsl.py composes them into .cache/wgsl/,
    written first), the native `webgpu` package left for Node to load. Bundles that load it from
    a folder outside root find it through a node_modules link there (link_modules)."""
    from .bundle import esbuild_error

    wgsl.write_modules(root)  # the shader modules the engine's kernel table imports
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [Path(e).name.rsplit(".", 1)[0] for e in entries]
    if len(set(names)) < len(names):  # esbuild would refuse two outputs at one path, naming neither entry
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"node_bundle: entries named alike ({', '.join(twice)}) would share one output; bundle them into separate folders")
    # name=entry: each bundle lands in out_dir itself, however far apart the entries lie.
    cmd = [str(root / "node_modules" / ".bin" / "esbuild"), *(f"{n}={e}" for n, e in zip(names, entries)), "--bundle", "--platform=node",
           "--format=esm", "--loader:.wgsl=text", "--external:webgpu", f"--outdir={out_dir}",
           f"--out-extension:.js={extension}", "--log-level=warning"]
    result = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        raise esbuild_error(result.stderr)
    modules = out_dir / "node_modules"
    if link_modules and not out_dir.resolve().is_relative_to(root.resolve()) and not modules.exists():
        modules.symlink_to(root / "node_modules")
    return [out_dir / (n + extension) for n in names]


def build_cli(root: Path, out_dir: Path | None = None) -> dict[str, Path]:
    """`python build.py cli`: the Node tools into out_dir (root/dist-cli), with a package.json that
    makes their .js files ES modules wherever the folder is copied."""
    out_dir = out_dir or root / "dist-cli"
    paths = node_bundle(root, list(CLI.values()), out_dir, ".js", link_modules=True)
    (out_dir / "package.json").write_text('{"type": "module"}\n')
    return dict(zip(CLI, paths))


def relaxed_simd_flags(node: str = "node") -> list[str]:
    """The flag that turns relaxed SIMD on, for a node that has it behind one (Node 20)."""
    options = subprocess.run([node, "--v8-options"], capture_output=True, text=True).stdout
    return [RELAXED_SIMD_FLAG] if RELAXED_SIMD_FLAG in options else []


def swiftshader_icd() -> str | None:
    """SwiftShader's Vulkan driver manifest: Debian's chromium, TINYGPT_CHROMIUM's, Playwright's."""
    candidates = [f"/usr/lib/chromium/{SWIFTSHADER_ICD}"]
    if os.environ.get("TINYGPT_CHROMIUM"):
        candidates.append(str(Path(os.environ["TINYGPT_CHROMIUM"]).parent / SWIFTSHADER_ICD))
    candidates += sorted(str(p) for p in Path.home().glob(f".cache/ms-playwright/chromium-*/chrome-linux*/{SWIFTSHADER_ICD}"))
    return next((c for c in candidates if Path(c).exists()), None)


def dawn_env(env: dict | None = None) -> dict:
    """`env` (os.environ) for a Node process that uses Dawn: where no Vulkan driver is named and no
    NVIDIA GPU is present, SwiftShader's, so Dawn finds an adapter on a machine without a GPU."""
    env = dict(os.environ if env is None else env)
    icd = swiftshader_icd()
    if not dawn_driver(env) and icd:
        env["VK_ICD_FILENAMES"] = icd
    return env


def dawn_driver(env: dict | None = None) -> str | None:
    """The Vulkan driver Dawn gets under `env`: one it names, the NVIDIA GPU's, else None
    (dawn_env adds SwiftShader's where it can: `dawn_driver(dawn_env())` is None only when no
    driver is to be had, and Dawn's tests can only skip)."""
    env = os.environ if env is None else env
    named = env.get("VK_ICD_FILENAMES") or env.get("VK_DRIVER_FILES")
    return named or ("nvidia" if Path("/dev/nvidia0").exists() else None)
