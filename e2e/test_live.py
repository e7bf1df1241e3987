"""The live feed end to end, under `wrangler pages dev` (workerd) serving the built dist/ with its
Functions and the room (tinygpt/site_build/pages_dev.py): two tabs in the feed see each other's run
and the counts change within 2 s; a tab that has not joined opens no WebSocket; leaving takes one
click and is remembered; a host without the Functions hides the panel with no console error; hostile
clients (bad JSON, unknown types, oversize frames, a flood) are refused while the others keep
receiving; one address holds at most its share of sockets; a dropped connection comes back; and the load generator (bench/live_load.mjs) loses nothing at a small load."""
import json
import re
import subprocess

import pytest
from playwright.sync_api import expect

from appdriver import configure, wait_for, wait_ready, wait_state
from conftest import ROOT
from tinygpt.facts import FACTS
from tinygpt.site_build.pages_dev import pages_dev

LIVE = FACTS["live"]
# What the feed shows and sends, with the page's clock: each frame the tab sends, each event added
# to its list and each change of its training count, so a test can read when each happened.
RECORD_FEED = """(() => {
    self.feedLog = [];
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (data) {
        if (typeof data === 'string' && data.startsWith('{')) self.feedLog.push({what: 'sent', at: Date.now(), type: JSON.parse(data).type});
        return send.call(this, data);
    };
    document.addEventListener('DOMContentLoaded', () => {
        const counts = document.querySelector('#live-counts');
        new MutationObserver(() => self.feedLog.push({what: 'train', at: Date.now(), n: Number(counts.dataset.train)}))
            .observe(counts, {attributes: true, attributeFilter: ['data-train']});
        new MutationObserver((records) => {
            for (const r of records) for (const n of r.addedNodes) self.feedLog.push({what: 'event', at: Date.now(), text: n.textContent});
        }).observe(document.querySelector('#live-feed'), {childList: true});
        const box = document.querySelector('#live');
        new MutationObserver(() => self.feedLog.push({what: 'link', at: Date.now(), state: box.dataset.link}))
            .observe(box, {attributes: true, attributeFilter: ['data-link']});
    });
})();"""
JOINED = f"localStorage.setItem({json.dumps(LIVE['storage_key'])}, 'on');"


@pytest.fixture(scope="module")
def live_url(dist, tmp_path_factory):
    with pages_dev(ROOT, dist, tmp_path_factory.mktemp("wrangler") / "wrangler.log") as url:
        yield url


def app(open_page, browser, base: str, init_script: str = RECORD_FEED):
    visit = open_page(browser, base + "/app/", init_script=init_script)
    wait_ready(visit.page)
    expect(visit.page.locator("#live")).to_have_attribute("data-live", "yes")
    return visit


def join(visit):
    """Presses Join and waits until the room has said hello."""
    page = visit.page
    expect(page.locator("#live")).to_be_visible()
    page.click("#live-toggle")
    expect(page.locator("#live")).to_have_attribute("data-link", "open")
    expect(page.locator("#live-counts")).not_to_have_attribute("data-connected", "0")
    return visit


def feed_log(page) -> list[dict]:
    return page.evaluate("() => self.feedLog")


def test_a_tab_in_the_feed_sees_another_start_and_stop_training_and_the_count_change_within_2_s(open_page, browser_no_webgpu, live_url):
    watcher = join(app(open_page, browser_no_webgpu, live_url))
    trainer = join(app(open_page, browser_no_webgpu, live_url))
    configure(trainer.page, steps=100_000, eval_every=100_000, save_every=100_000, backend="wasm")
    trainer.page.click("#btn-start")
    wait_state(trainer.page, "training", 120)

    def seen(what: str, test) -> dict | None:
        return next((e for e in feed_log(watcher.page) if e["what"] == what and test(e)), None)

    started = "started training Tiny on WASM"
    wait_for(lambda: seen("event", lambda e: started in e["text"]) and seen("train", lambda e: e["n"] == 1), 30, "the start to reach the watcher")
    sent = next(e for e in feed_log(trainer.page) if e["what"] == "sent" and e["type"] == "start")
    assert seen("event", lambda e: started in e["text"])["at"] - sent["at"] < 2000
    assert seen("train", lambda e: e["n"] == 1)["at"] - sent["at"] < 2000
    assert "1 training Tiny on WASM" in watcher.page.locator("#live-arrows").get_attribute("aria-label")
    # The trainer sees its own run too: every tab in the feed gets every event.
    expect(trainer.page.locator("#live-feed li", has_text=started)).to_have_count(1)

    trainer.page.click("#btn-stop")
    wait_for(lambda: seen("event", lambda e: "finished training Tiny on WASM" in e["text"]) and seen("train", lambda e: e["n"] == 0),
             60, "the stop to reach the watcher")
    assert watcher.problems() == [] and trainer.problems() == []


def test_a_tab_that_has_not_joined_opens_no_websocket_and_sends_nothing(open_page, browser_no_webgpu, live_url):
    watcher = join(app(open_page, browser_no_webgpu, live_url))
    heard = len(feed_log(watcher.page))  # the recent events the room said hello with
    outsider = app(open_page, browser_no_webgpu, live_url)
    page = outsider.page
    expect(page.locator("#live")).to_be_visible()
    expect(page.locator("#live-toggle")).to_have_attribute("aria-pressed", "false")
    expect(page.locator("#live")).to_have_attribute("data-link", "off")
    configure(page, steps=20, eval_every=10, save_every=10, backend="wasm")
    page.click("#btn-start")
    wait_state(page, "training", 120)
    wait_state(page, "ready", 120)
    assert outsider.websockets == []
    assert [e for e in feed_log(page) if e["what"] == "sent"] == []
    # Its one request of the feed's is the static question whether the feed runs here.
    # The room never saw it: the watcher is the only tab connected, and heard of no run.
    assert watcher.page.locator("#live-counts").get_attribute("data-connected") == "1"
    assert [e for e in feed_log(watcher.page)[heard:] if e["what"] == "event"] == []
    assert outsider.problems() == []


def test_leaving_takes_one_click_closes_the_socket_and_is_remembered(open_page, browser_no_webgpu, live_url):
    visit = join(app(open_page, browser_no_webgpu, live_url))
    page = visit.page
    assert len(visit.websockets) == 1
    page.click("#live-toggle")
    expect(page.locator("#live")).to_have_attribute("data-link", "off")
    expect(page.locator("#live-toggle")).to_have_attribute("aria-pressed", "false")
    expect(page.locator("#live-feed li")).to_have_count(0)
    page.reload()
    wait_ready(page)
    expect(page.locator("#live")).to_have_attribute("data-live", "yes")
    expect(page.locator("#live")).to_have_attribute("data-link", "off")
    assert len(visit.websockets) == 1, visit.websockets
    # And joining again after a reload is remembered the other way.
    page.click("#live-toggle")
    expect(page.locator("#live")).to_have_attribute("data-link", "open")
    page.reload()
    wait_ready(page)
    expect(page.locator("#live")).to_have_attribute("data-link", "open")
    assert len(visit.websockets) == 3


def test_a_dropped_connection_comes_back_by_itself(open_page, browser_no_webgpu, live_url):
    visit = app(open_page, browser_no_webgpu, live_url)
    page = visit.page
    routes = []

    def through(ws):  # the page's socket, passed on to the room, so the test can cut it
        routes.append((ws, ws.connect_to_server()))

    page.route_web_socket(re.compile(r".*" + re.escape(LIVE["socket"]) + "$"), through)
    join(visit)
    page_end, room_end = routes[0]
    room_end.close()
    page_end.close(code=1012, reason="the room went away")
    # Playwright's own waits, not a sleep: the route's handler runs only while Playwright listens.
    expect(page.locator("#live")).not_to_have_attribute("data-link", "open")
    expect(page.locator("#live")).to_have_attribute("data-link", "open", timeout=60_000)
    assert len(routes) == 2
    links = [e["state"] for e in feed_log(page) if e["what"] == "link"]
    assert links[-3:] == ["waiting", "connecting", "open"], links


def test_a_host_without_the_functions_hides_the_panel_without_an_error(open_page, browser_no_webgpu, site_url):
    # The plain static server (build.py serve): the status file answers that the feed does not run here.
    visit = open_page(browser_no_webgpu, site_url + "/app/", init_script=JOINED + RECORD_FEED)
    wait_ready(visit.page)
    expect(visit.page.locator("#live")).to_have_attribute("data-live", "no")
    expect(visit.page.locator("#live")).to_be_hidden()
    assert visit.websockets == []
    assert visit.problems() == []


# Opens sockets to the feed from the page (the site's CSP allows its own origin) and plays a hostile
# client beside two good ones: L listens, S sends one valid start after each attack, and L must get it.
HOSTILE = """async ({socket, maxFrame, flood}) => {
    const url = new URL(socket, location.href);
    url.protocol = 'ws:';
    const open = () => new Promise((resolve, reject) => {
        const ws = new WebSocket(url);
        ws.msgs = [];
        ws.closedWith = null;
        ws.onmessage = (e) => ws.msgs.push(JSON.parse(e.data));
        ws.onclose = (e) => { ws.closedWith = e.code; };
        ws.onopen = () => resolve(ws);
        ws.onerror = () => reject(new Error('the socket did not open'));
    });
    const until = (test, what) => new Promise((resolve, reject) => {
        const deadline = performance.now() + 60000;
        const poll = () => test() ? resolve() : performance.now() > deadline ? reject(new Error('waited for ' + what)) : setTimeout(poll, 10);
        poll();
    });
    const start = (preset) => JSON.stringify({type: 'start', activity: {work: 'sample', preset, backend: 'wasm', paths: []}});
    const L = await open(), S = await open();
    // S's start is taken and reaches L: returns how long after it was sent.
    const good = async () => {
        const acks = S.msgs.filter((m) => m.type === 'ack').length;
        const t0 = performance.now();
        S.send(start('small'));
        await until(() => S.msgs.filter((m) => m.type === 'ack').length > acks, 'the good client\\'s ack');
        const id = S.msgs.filter((m) => m.type === 'ack').at(-1).id;
        await until(() => L.msgs.some((m) => m.type === 'events' && m.events.some((e) => e.id === id)), 'the event at the listener');
        return performance.now() - t0;
    };
    const out = {};
    const bad = await open();
    const replies = () => bad.msgs.filter((m) => m.type === 'refused' || m.type === 'ack');
    const attacks = [
        '{"type": "start", "activity": ',
        JSON.stringify({type: 'explode'}),
        JSON.stringify({type: 'start', activity: {work: 'train', preset: 'huge', backend: 'webgpu', paths: [], text: '<img src=x onerror=alert(1)>'}}),
        JSON.stringify({type: 'start', activity: {work: 'train', preset: '<b>huge</b>', backend: 'webgpu', paths: []}}),
        JSON.stringify({type: 'start', activity: {work: 'train', preset: 'huge', backend: 'webgpu', paths: ['coop-matrix', 'coop-matrix']}}),
        'x'.repeat(maxFrame + 1),
        '\u00e9'.repeat(Math.floor(maxFrame / 2) + 1),
    ];
    for (const a of attacks) bad.send(a);
    await until(() => replies().length === attacks.length, 'a reply to each bad frame');
    out.refusals = replies().map((m) => m.reason ?? 'taken');
    out.afterBad = await good();
    // A frame of 2 MiB: refused, or the socket closed by the runtime; either way only that socket.
    const big = await open();
    big.send('x'.repeat(2 << 20));
    await until(() => big.closedWith !== null || big.msgs.some((m) => m.type === 'refused'), 'the big frame refused');
    out.afterBig = await good();
    // The flood: flood messages in a second, ten every 10 ms.
    const flooder = await open();
    let sent = 0;
    await new Promise((resolve) => {
        const tick = setInterval(() => {
            for (let k = 0; k < 10 && sent < flood; k++, sent++) if (flooder.readyState === 1) flooder.send(start('huge'));
            if (sent >= flood) { clearInterval(tick); resolve(); }
        }, 10);
    });
    await until(() => flooder.closedWith !== null, 'the flooder closed');
    out.flood = {
        taken: flooder.msgs.filter((m) => m.type === 'ack').length,
        refusals: flooder.msgs.filter((m) => m.type === 'refused').map((m) => m.reason),
        closedWith: flooder.closedWith,
    };
    out.afterFlood = await good();
    out.listenerOpen = L.readyState === 1;
    for (const ws of [L, S, bad, big]) ws.close();
    return out;
}"""


def test_hostile_clients_are_refused_and_the_others_keep_receiving(open_page, browser_no_webgpu, live_url):
    visit = open_page(browser_no_webgpu, live_url + "/privacy/")
    out = visit.page.evaluate(HOSTILE, {"socket": LIVE["socket"], "maxFrame": LIVE["max_frame_bytes"], "flood": 1000})
    assert out["refusals"] == ["not-json", "unknown-type", "invalid", "invalid", "invalid", "too-large", "too-large"]
    # A flood gets its burst taken, one word of refusal, and is closed once drops_to_close are refused in a row.
    assert out["flood"]["taken"] <= LIVE["per_connection"]["burst"] + 2
    assert out["flood"]["refusals"] == ["rate-limited"]
    assert out["flood"]["closedWith"] == 1008
    assert out["listenerOpen"]
    for after in ("afterBad", "afterBig", "afterFlood"):
        assert out[after] < 60_000
    # The room is still up for a new tab.
    join(app(open_page, browser_no_webgpu, live_url))


# Opens sockets from this page (one address) until the room refuses one, then closes them and opens
# one more, trying until the room has seen the closes.
CROWD = """async ({socket, extra}) => {
    const url = new URL(socket, location.href);
    url.protocol = 'ws:';
    const open = () => new Promise((resolve) => {
        const ws = new WebSocket(url);
        ws.onopen = () => resolve(ws);
        ws.onerror = () => resolve(null);
    });
    const sockets = [];
    let refused = false;
    for (let i = 0; i < extra && !refused; i++) {
        const ws = await open();
        if (ws) sockets.push(ws);
        else refused = true;
    }
    for (const ws of sockets) ws.close();
    const deadline = performance.now() + 60000;
    let again = null;
    while (!again && performance.now() < deadline) {
        again = await open();
        if (!again) await new Promise((r) => setTimeout(r, 200));
    }
    return {opened: sockets.length, refused, again: again !== null};
}"""


def test_one_address_holds_at_most_its_share_of_sockets(open_page, browser_no_webgpu, live_url):
    visit = open_page(browser_no_webgpu, live_url + "/privacy/")
    per_address = LIVE["connections_per_address"]
    out = visit.page.evaluate(CROWD, {"socket": LIVE["socket"], "extra": per_address + 4})
    # Sockets of the tests before may still be closing: at most the share opens, and the next is refused.
    assert out["refused"] and 1 <= out["opened"] <= per_address, out
    assert out["again"], "no socket opened again once the others closed"


def test_the_load_generator_loses_nothing_at_a_small_load(live_url):
    # bench/bench_live.py runs it at 500 clients for 30 s; here, enough to check what it counts.
    run = subprocess.run(["node", "bench/live_load.mjs", "--url", live_url, "--clients", "40", "--seconds", "3"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["sent"] == 120 and result["taken"] == 120 and result["refused"] == 0
    assert result["delivered"] == 120 * 40 and result["lost"] == 0 and result["closed_early"] == 0
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
