"""The built dist/ with the site's Functions and the live feed's room, as
Cloudflare Pages runs them, on loopback: `wrangler pages dev` (workerd, pinned
in package-lock.json) with both wrangler configs, the Pages project's and the
room Worker's, in one process. The end-to-end live tests and bench/bench_live.py
run against it; it sends nothing anywhere (telemetry off, and wrangler carries
on when its one look-up of the edge's `request.cf` finds no network)."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from tinygpt.facts import FACTS

START_S = 180  # a guard against a hang: it starts in seconds, tens on a loaded machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _live(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + FACTS["live"]["status"], timeout=5) as r:
            return json.load(r).get("live") is True
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def pages_dev(root: Path, dist: Path, log: Path):
    """Yields the base URL once the Function answers that the feed runs; stops wrangler after.
    Its state (the room's ring) lives in a folder of its own, removed after."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "WRANGLER_SEND_METRICS": "false", "WRANGLER_LOG_PATH": str(log.parent)}
    with tempfile.TemporaryDirectory(prefix="tinygpt-wrangler-") as state, open(log, "w") as out:
        cmd = [str(root / "node_modules" / ".bin" / "wrangler"), "pages", "dev", str(dist),
               "-c", "wrangler.toml", "-c", "live/wrangler.toml", "--ip", "127.0.0.1", "--port", str(port),
               "--persist-to", state, "--show-interactive-dev-session=false"]
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + START_S
            while not _live(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text()[-3000:]
                    raise RuntimeError(f"wrangler pages dev did not serve the feed at {url} "
                                       f"({'exited ' + str(proc.returncode) if proc.returncode is not None else f'{START_S} s'}); its log:\n{tail}")
                time.sleep(0.5)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
