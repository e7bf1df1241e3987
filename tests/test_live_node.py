"""The live feed's server modules in Node (live/live.test.ts, bundled with esbuild: the schema's
refusals, the server's words, the rate limit's bucket), and the Functions' routes where facts.json
says the page looks for them. The room itself runs under workerd in e2e/test_live.py."""
import subprocess
from pathlib import Path

from tinygpt.facts import FACTS
from tinygpt.site_build.node import node_bundle

ROOT = Path(__file__).resolve().parent.parent


def test_live_modules_in_node(tmp_path):
    [bundle] = node_bundle(ROOT, ["live/live.test.ts"], tmp_path)
    out = subprocess.run(["node", "--test", str(bundle)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# fail 0" in out.stdout and "# pass 5" in out.stdout, out.stdout


def test_the_functions_answer_where_the_page_asks():
    # Pages routes functions/<path>.ts to /<path>: the socket and the status the page and the build use.
    for path in (FACTS["live"]["socket"], FACTS["live"]["status"]):
        assert (ROOT / "functions" / (path.lstrip("/") + ".ts")).is_file(), path
