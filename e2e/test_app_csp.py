"""The CSP's Trusted Types and form-action: served on pages and on the worker
script, enforced in the page and in the worker, and the app still starts its
worker and the worker its CPU helper threads through the one policy, which
refuses scripts from anywhere but the site's /assets/."""
from urllib.parse import urlsplit
from urllib.request import urlopen

import pytest
from playwright.sync_api import expect

from appdriver import configure, open_app, wait_for, wait_state
from tinygpt.facts import FACTS

POLICY = FACTS["app"]["trusted_types_policy"]
# Every CSP violation of the realm it runs in, kept where the test can read it.
RECORD_VIOLATIONS = """(() => {
    self.violations = [];
    self.addEventListener('securitypolicyviolation', (e) => self.violations.push(`${e.violatedDirective} ${e.blockedURI}`));
})();"""
# Hands a sink a plain string; the name of what it throws, or "allowed".
PLAIN_STRING_TO = {
    "innerHTML": "() => { try { document.createElement('div').innerHTML = '<img src=x>'; return 'allowed'; } catch (e) { return e.name; } }",
    "Worker": "() => { try { new Worker(self.location.href, {type: 'module'}).terminate(); return 'allowed'; } catch (e) { return e.name; } }",
}


def directives(csp: str) -> dict[str, str]:
    return dict((d.strip() + " ").split(" ", 1) for d in csp.split(";"))


def worker_script(dist) -> str:
    return next(p.name for p in (dist / "assets").glob("worker-*.js"))


def test_pages_and_the_worker_script_are_served_with_trusted_types_and_no_form_targets(site_url, dist):
    served = []
    for path in ("/app/", "/docs/", f"/assets/{worker_script(dist)}"):
        with urlopen(site_url + path) as r:
            served.append(r.headers["Content-Security-Policy"])
    assert len(set(served)) == 1
    csp = directives(served[0])
    assert csp["form-action"].strip() == "'none'"
    assert csp["require-trusted-types-for"].strip() == "'script'"
    assert csp["trusted-types"].strip() == POLICY
    assert f"Content-Security-Policy: {served[0]}\n" in (dist / "_headers").read_text()


def test_page_and_worker_train_under_trusted_types(open_page, browser_no_webgpu):
    visit = open_page(browser_no_webgpu, "/app/", init_script=RECORD_VIOLATIONS)
    page = visit.page
    expect(page.locator("#worker-status[data-ready=yes]")).to_be_visible(timeout=30_000)
    [worker] = page.workers
    worker.evaluate(RECORD_VIOLATIONS)
    configure(page, steps=5, eval_every=5, save_every=5, backend="wasm")
    page.click("#btn-start")
    wait_state(page, "training", 60)
    wait_state(page, "ready", 120)
    # The worker started its helper threads through the policy (refused, it would fall back to one).
    threads = page.evaluate("navigator.hardwareConcurrency")
    expect(page.locator("#stat-backend")).to_contain_text(f"{threads} thread{'s' if threads > 1 else ''},")
    assert len(page.workers) == threads
    assert page.evaluate("violations") == [] and worker.evaluate("violations") == []
    assert visit.problems() == []

    # Enforced, not merely declared: a plain string to a sink throws, in the page and
    # in the worker, and the recorders that stayed empty above do see it.
    assert page.evaluate(PLAIN_STRING_TO["innerHTML"]) == "TypeError"
    assert page.evaluate(PLAIN_STRING_TO["Worker"]) == "TypeError"
    assert worker.evaluate(PLAIN_STRING_TO["Worker"]) == "TypeError"
    wait_for(lambda: page.evaluate("violations.length") == 2 and worker.evaluate("violations.length") == 1,
             10, "the violations to be reported")
    assert all(v.startswith("require-trusted-types-for ") for v in page.evaluate("violations") + worker.evaluate("violations"))


@pytest.mark.parametrize("script", ["/gallery/manifest.json", "http://localhost:{port}/assets/{worker}",
                                    "data:text/javascript,postMessage(1)"])
def test_the_policy_refuses_worker_scripts_from_elsewhere(open_page, browser_no_webgpu, site_url, dist, script):
    script = script.format(port=urlsplit(site_url).port, worker=worker_script(dist))
    visit = open_page(browser_no_webgpu, "/docs/")
    page = visit.page

    def point_the_app_elsewhere(route):
        response = route.fetch()
        body = response.text().replace(f'data-worker="/assets/{worker_script(dist)}"', f'data-worker="{script}"')
        assert script in body
        route.fulfill(response=response, body=body)

    page.route("**/app/", point_the_app_elsewhere)
    visit.goto("/app/")
    wait_for(lambda: visit.page_errors, 30, "the page to fail", page)
    [error] = visit.page_errors
    assert f"refused to start a worker from {script}: only this site's scripts under /assets/ may run" in error
    assert page.workers == []
