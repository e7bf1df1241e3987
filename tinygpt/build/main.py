"""The orchestrator behind build.py: build, serve and test.

A build runs the steps in order into a temporary folder beside dist/ and swaps
it in only when every step passed; a failure prints its cause first
(file:line where known), exits non-zero and leaves the old dist/ as it was.
"""
import argparse
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .context import BuildError, Context

ROOT = Path(__file__).resolve().parents[2]
STEPS = ["corpora", "gallery", "bundle", "shaders", "pages", "deploy", "links"]
LABELS = {"links": "checks"}  # links.py checks links, inline code and Pages limits
OPTIONAL_STEPS = {"corpora"}  # R's step; the build goes on without it until it exists
STALE_SECONDS = 600
WATCHED = ["content", "site", "webapp", "shaders", "gallery", "tinygpt/facts.json"]


def build(root: Path = ROOT, dist: Path | None = None, steps: list[str] = STEPS) -> bool:
    """Build root's site into dist (default root/dist); False, with the cause printed, on failure."""
    dist = dist or root / "dist"
    start = time.perf_counter()
    for stale in root.glob(".dist-*"):  # left by a build that was killed; builds take seconds, not minutes
        if stale.is_dir() and time.time() - stale.stat().st_mtime > STALE_SECONDS:
            shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=".dist-", dir=root))
    tmp.chmod(0o755)  # mkdtemp makes it private; dist/ is for everyone to read
    ctx = Context(root=root, out=tmp, cache=root / ".cache")
    step = None
    try:
        for step in steps:
            if step in OPTIONAL_STEPS and importlib.util.find_spec(f"tinygpt.build.{step}") is None:
                print(f"{step:8}     -  skipped: tinygpt/build/{step}.py not written yet", flush=True)
                continue
            t = time.perf_counter()
            summary = importlib.import_module(f"tinygpt.build.{step}").run(ctx)
            print(f"{LABELS.get(step, step):8} {time.perf_counter() - t:5.2f}s  {summary}", flush=True)
        for note in ctx.notes:
            print(f"note: {note}")
        old = root / f".dist-old-{os.getpid()}"
        if dist.exists():
            os.rename(dist, old)
        os.rename(tmp, dist)
        shutil.rmtree(old, ignore_errors=True)
    except Exception as e:
        cause = str(e) if isinstance(e, BuildError) else f"{type(e).__name__}: {e}"
        print(f"error: {cause}", file=sys.stderr, flush=True)
        if not isinstance(e, BuildError):  # a bug rather than bad input: show where
            traceback.print_exc()
        print(f"build failed in step {LABELS.get(step, step)}; {dist.name}/ left as it was", file=sys.stderr)
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # already gone when it became dist/; else a failed or interrupted build
    print(f"built {dist.relative_to(root) if dist.is_relative_to(root) else dist}/ "
          f"in {time.perf_counter() - start:.2f}s")
    return True


def snapshot(root: Path) -> dict[str, float]:
    stamps = {}
    for name in WATCHED:
        base = root / name
        for path in [base] if base.is_file() else base.rglob("*") if base.exists() else []:
            if path.is_file():
                stamps[str(path)] = path.stat().st_mtime
    return stamps


def serve(root: Path, port: int) -> int:
    from . import serve as server

    build(root)
    live = server.LiveReload()
    srv, url = server.start_in_thread(root / "dist", port, live)
    print(f"serving dist/ at {url}/ with production headers; rebuilding on edits (Ctrl-C stops)")
    seen = snapshot(root)
    try:
        while True:
            time.sleep(0.5)
            now = snapshot(root)
            if now != seen:
                seen = now
                if build(root):
                    live.bump()
    except KeyboardInterrupt:
        srv.shutdown()
    return 0


def test(root: Path) -> int:
    if not build(root):
        return 1
    tsc = subprocess.run(["npx", "tsc", "--noEmit", "-p", "."], cwd=root)
    print("tsc: ok" if tsc.returncode == 0 else "tsc: type errors (above)", flush=True)
    tests = subprocess.run([sys.executable, "-m", "pytest", "tests", "e2e"], cwd=root)
    return 1 if tsc.returncode or tests.returncode else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="build.py", description="Build, serve or test the TinyGPT site.")
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve", help="build, serve dist/ on 127.0.0.1 and rebuild + reload on edits")
    serve_cmd.add_argument("--port", type=int, default=8000)
    sub.add_parser("test", help="build, type-check the TypeScript, run every test")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(ROOT, args.port)
    if args.command == "test":
        return test(ROOT)
    return 0 if build(ROOT) else 1
