"""Driving the app page (/app/) from the e2e tests: open it, pick a model and
run settings, train, read the loss table, sample. Waits poll the page from
Python (the site's CSP forbids the eval that Playwright's wait_for_function
needs)."""
import base64
import math
import time
import urllib.parse

from playwright.sync_api import expect

from tinygpt import checkpoint
from tinygpt.facts import FACTS

LN_VOCAB = math.log(256)
# Gating a GPU lever on SwiftShader trains small models for a while on both kernel tables: the
# tests that are not about levers force those gates off (never stored), and the plain kernels run.
GPU_LEVERS = [lever["id"] for lever in FACTS["levers"] if lever["backend"] == "webgpu"]


# mulberry32: the page's only random choice is the training seed it draws with Math.random.
SEEDED_RANDOM = """(() => {
    let s = %d >>> 0;
    Math.random = () => {
        s = (s + 0x6D2B79F5) >>> 0;
        let t = Math.imul(s ^ (s >>> 15), s | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
})();"""


def open_app(open_page, browser, path: str = "/app/", seed: int | None = None, gpu_levers: bool = False):
    """The app, ready; with `seed`, every run it starts draws the same training seed; without
    `gpu_levers`, the GPU levers' gates are forced to fail (?gate-fail=), so they run no check."""
    if not gpu_levers:
        url = urllib.parse.urlsplit(path)
        query = urllib.parse.parse_qs(url.query)
        forced = [lever for v in query.get("gate-fail", []) for lever in v.split(",")] + GPU_LEVERS
        query["gate-fail"] = [",".join(dict.fromkeys(forced))]
        path = url._replace(query=urllib.parse.urlencode(query, doseq=True, safe=",")).geturl()
    visit = open_page(browser, path, init_script=None if seed is None else SEEDED_RANDOM % seed)
    assert visit.response.status == 200
    wait_ready(visit.page)
    return visit


def wait_ready(page):
    """Until the worker is ready and the page has shown what this browser offers (a load or a reload)."""
    expect(page.locator("#worker-status[data-ready=yes]")).to_be_visible(timeout=30_000)
    expect(page.locator("#caps[data-webgpu=yes], #caps[data-webgpu=no]")).to_have_count(1, timeout=30_000)


def wait_for(predicate, timeout: float, what: str, page=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    messages = page.locator("#messages").inner_text() if page else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; page messages: {messages!r}")


def configure(page, *, steps: int, eval_every: int, save_every: int, backend: str = "auto",
              batch: int | None = None, block: int | None = None, preset: str = "tiny"):
    """The preset's shape; with batch/block the custom preset holding Tiny's shape at that batch and context."""
    if batch is not None or block is not None:
        page.check("input[name=preset][value=custom]")
        if batch is not None:
            advanced(page, batch=batch)
        if block is not None:
            page.fill("#c-block_size", str(block))
    else:
        page.check(f"input[name=preset][value={preset}]")
    page.fill("#steps", str(steps))
    page.fill("#eval-every", str(eval_every))
    page.fill("#save-every", str(save_every))
    page.select_option("#backend", backend)


def start_on_cpu(open_page, browser, seed: int, **settings):
    """A seeded app page that has started a Tiny run on WebAssembly with `settings` (configure's)."""
    visit = open_app(open_page, browser, seed=seed)
    configure(visit.page, backend="wasm", **settings)
    visit.page.click("#btn-start")
    return visit


def advanced(page, **fields):
    """Opens Advanced and fills its fields: seed, lr, warmup, batch."""
    box = page.locator("#advanced")
    if box.get_attribute("open") is None:
        box.locator("summary").click()
    for name, value in fields.items():
        page.fill(f"#{name}", str(value))


def state(page) -> str:
    return page.locator("#app").get_attribute("data-state")


def step(page) -> int:
    text = page.locator("#stat-step").inner_text()
    return int(text.split("/")[0]) if text.strip()[:1].isdigit() else 0


def wait_state(page, wanted: str, timeout: float):
    wait_for(lambda: state(page) == wanted, timeout, f"state {wanted!r}", page)


def wait_step(page, n: int, timeout: float):
    wait_for(lambda: step(page) >= n, timeout, f"step {n}", page)


def wait_finished(page, steps: int, timeout: float = 120, runs: int = 1):
    """Until the worker has said `runs` times that training finished at `steps`, and the app is ready."""
    finished = page.locator("#messages .message-info", has_text=f"Training finished at step {steps}.")
    wait_for(lambda: finished.count() >= runs, timeout, f"training to finish at step {steps}", page)
    wait_state(page, "ready", 30)


def loss_table(page) -> list[tuple[int, float, float | None]]:
    """(step, train, val or None) for every point the page holds."""
    box = page.locator("#loss-table-box")
    if box.get_attribute("open") is None:
        page.locator("#loss-table-box summary").click()
    rows = page.locator("#loss-table tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    return [(int(s), float(t), float(v) if v else None) for s, t, v in rows]


def sample(page, prompt: str, *, temperature: float, top_k: int, length: int, timeout: float,
           top_p: float = 1.0, seed: int | None = None) -> tuple[str, int]:
    """The sampled text, and how many times the output changed while it streamed; seed None
    leaves the field blank (the app draws one)."""
    page.fill("#prompt", prompt)
    page.fill("#temperature", str(temperature))
    page.fill("#top-k", str(top_k))
    page.fill("#top-p", str(top_p))
    page.fill("#sample-seed", "" if seed is None else str(seed))
    page.fill("#length", str(length))
    # Counts DOM updates of the output: the prompt's, then a streamed sample's first byte alone and
    # the rest as it comes (the worker sends 30 ms of bytes at a time); a buffered one, once more.
    page.evaluate("""() => {
        const out = document.querySelector('#sample-out');
        window.sampleUpdates = 0;
        window.sampleObserver?.disconnect();
        window.sampleObserver = new MutationObserver(() => window.sampleUpdates++);
        window.sampleObserver.observe(out, {childList: true, characterData: true, subtree: true});
    }""")
    page.click("#btn-sample")
    out = page.locator("#sample-out")  # the click set data-done="no" before any token could arrive
    wait_for(lambda: out.get_attribute("data-done") == "yes", timeout, "the sample to finish", page)
    wait_state(page, "ready", 10)
    return out.inner_text(), page.evaluate("window.sampleUpdates")


SAVED_CHECKPOINT = """async () => {
    const runs = await (await navigator.storage.getDirectory()).getDirectoryHandle('runs');
    for await (const [name, handle] of runs) {
        if (!name.endsWith('.tinygpt')) continue;
        const bytes = new Uint8Array(await (await handle.getFile()).arrayBuffer());
        let s = '';
        for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
        return btoa(s);
    }
}"""


def saved_checkpoint(page) -> checkpoint.Checkpoint:
    """The one run's checkpoint in OPFS, read by the Python reader."""
    return checkpoint.load(base64.b64decode(page.evaluate(SAVED_CHECKPOINT)))


def saved_step(page) -> int:
    """The step of the last checkpoint the page says it saved; -1 before the first."""
    return int(page.locator("#save-status").get_attribute("data-step") or -1)


def usage(page) -> int:
    return page.evaluate("async () => (await navigator.storage.estimate()).usage")


def set_quota(page, quota: int):
    """The origin's quota, until the page's context closes (detaching DevTools would lift it)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Storage.overrideQuotaForOrigin", {"origin": page.evaluate("location.origin"), "quotaSize": quota})
