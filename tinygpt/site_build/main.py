"""The orchestrator behind build.py: build, serve and test.

A build runs the steps in order into a temporary folder beside dist/ and swaps
it in only when every step passed; a failure prints its cause first
(file:line where known), exits non-zero and leaves the old dist/ as it was.

A build killed at any moment leaves a complete dist/, old or new: the swap is
one atomic exchange (renameat2), and builds of one folder hold a lock
(.cache/build.lock) for their life, so the next build knows that any .dist-*
folder it finds is a dead build's and removes it. TINYGPT_BUILD_KILL_AT=<point>
makes a build SIGKILL itself at a named point (see _die_at); the kill test
uses it.
"""
import argparse
import contextlib
import ctypes
import errno
import fcntl
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .context import BuildError, Context

ROOT = Path(__file__).resolve().parents[2]
STEPS = ["corpora", "gallery", "static", "bundle", "shaders", "pages", "deploy", "checks"]
WATCHED = ["content", "site", "webapp", "shaders", "gallery", "tinygpt/facts.json"]
LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2  # <fcntl.h>, <linux/fs.h>


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where the system has no such call."""
    renameat2 = getattr(LIBC, "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):  # a kernel before 3.15, or a filesystem without exchange
        return False
    raise OSError(err, os.strerror(err), str(b))


def _die_at(point: str):
    """The kill test's hook: TINYGPT_BUILD_KILL_AT=<point> SIGKILLs the build at that point, one of
    step:<name> (after that step), swap (just before it), renamed (between the fallback's two
    renames) or swapped (the new dist/ in, the old one not yet removed)."""
    if os.environ.get("TINYGPT_BUILD_KILL_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def _one_build_at_a_time(root: Path):
    """An flock on .cache/build.lock for the life of the build. The kernel drops it when the process
    dies (open() files are not inherited, so no compiler outliving us keeps it), so a .dist-* folder
    seen while holding it was left by a build that is gone, whatever its age or pid."""
    path = root / ".cache" / "build.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("waiting for another build of this folder to finish", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(root: Path = ROOT, steps: list[str] = STEPS) -> bool:
    """Build root's site into root/dist; False, with the cause printed, on failure."""
    with _one_build_at_a_time(root):
        return _build(root, steps)


def _build(root: Path, steps: list[str]) -> bool:
    dist, old = root / "dist", root / ".dist-old"
    start = time.perf_counter()
    if old.is_dir() and not dist.exists():  # the two-rename fallback was killed between its renames
        os.rename(old, dist)
    for stale in root.glob(".dist-*"):  # a dead build's (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=".dist-", dir=root))
    tmp.chmod(0o755)  # mkdtemp makes it private; dist/ is for everyone to read
    ctx = Context(root=root, out=tmp, cache=root / ".cache")
    step = None
    try:
        for step in steps:
            t = time.perf_counter()
            summary = importlib.import_module(f"tinygpt.site_build.{step}").run(ctx)
            print(f"{step:8} {time.perf_counter() - t:5.2f}s  {summary}", flush=True)
            _die_at(f"step:{step}")
        for note in ctx.notes:
            print(f"note: {note}")
        _die_at("swap")
        # An exchange, not restore-on-start alone: dist/ is never missing, even for a reader that is not a build.
        if not dist.exists():
            os.rename(tmp, dist)
        elif not exchange(tmp, dist):  # two renames; a kill between them leaves .dist-old, put back above
            os.rename(dist, old)
            _die_at("renamed")
            os.rename(tmp, dist)
            shutil.rmtree(old)
        _die_at("swapped")
    except Exception as e:
        cause = str(e) if isinstance(e, BuildError) else f"{type(e).__name__}: {e}"
        print(f"error: {cause}", file=sys.stderr, flush=True)
        if not isinstance(e, BuildError):  # a bug rather than bad input: show where
            traceback.print_exc()
        print(f"build failed in step {step}; {dist.name}/ left as it was", file=sys.stderr)
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the old dist/ after an exchange, else a failed build's output
    print(f"built dist/ in {time.perf_counter() - start:.2f}s")
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


# Tests run in a second pytest beside the end-to-end tests: the gallery's validation metric is numpy,
# mostly on one core, for a quarter of an hour, while the browser tests wait on pages much of the time.
# The unit tests run first and alone: the engine's suite on SwiftShader wants both cores.
BESIDE = ["tests/test_gallery_metric.py"]


def test(root: Path) -> int:
    if not build(root):
        return 1
    # The web app and the Node tools against DOM and Node types; the live feed's server against Workers' (live/tsconfig.json).
    tsc = subprocess.run(["npx", "tsc", "--noEmit", "-p", "."], cwd=root)
    if tsc.returncode == 0:
        tsc = subprocess.run(["npx", "tsc", "--noEmit", "-p", "live"], cwd=root)
    print("tsc: ok" if tsc.returncode == 0 else "tsc: type errors (above)", flush=True)
    pytest = [sys.executable, "-m", "pytest"]
    units = subprocess.run([*pytest, "tests", *(f"--ignore={t}" for t in BESIDE)], cwd=root)
    with tempfile.TemporaryFile("w+") as log:
        beside = subprocess.Popen([*pytest, "-p", "no:cacheprovider", *BESIDE], cwd=root, stdout=log, stderr=subprocess.STDOUT)
        try:
            e2e = subprocess.run([*pytest, "e2e"], cwd=root)
            beside.wait()
        finally:
            if beside.poll() is None:
                beside.kill()
        log.seek(0)
        print(f"\n{' '.join(BESIDE)}, run beside the end-to-end tests:\n{log.read()}", end="", flush=True)
    return 1 if tsc.returncode or units.returncode or e2e.returncode or beside.returncode else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="build.py", description="Build, serve or test the TinyGPT site.")
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve", help="build, serve dist/ on 127.0.0.1 and rebuild + reload on edits")
    serve_cmd.add_argument("--port", type=int, default=8000)
    sub.add_parser("test", help="build, type-check the TypeScript, run every test")
    sub.add_parser("cli", help="bundle the Node tools into dist-cli/ (node dist-cli/train.js, node dist-cli/inspect.js)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(ROOT, args.port)
    if args.command == "test":
        return test(ROOT)
    if args.command == "cli":
        from .node import build_cli
        try:
            built = build_cli(ROOT)
        except BuildError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        for name, path in built.items():
            print(f"{name:12} {path.relative_to(ROOT)}")
        return 0
    return 0 if build(ROOT) else 1
