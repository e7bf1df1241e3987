"""The GPU levers in Chromium on SwiftShader (WebGPU with subgroups of 4, no shader-f16): each
shipped lever's real gate decides its verdict and pill, the pills follow the verdicts once they
arrive (the gates finish after start-up), a later visit remembers the verdicts and runs no check,
a forced failure hides the pill and training still converges, and each pill's explainer, which
says the errors measured here, opens and closes by mouse and by keyboard. The int8 lever serves
sampling: its pill joins the others only once a sample ran on it (its held-out loss check passed
on the trained weights), and leaves at the next training step. The experimental levers
(facts.levers) get no verdict: the app never runs them; nor does coop-matrix here (no subgroup
matrices on SwiftShader), which stays off without an error."""
import pytest
from playwright.sync_api import expect

from appdriver import SEEDED_RANDOM, configure, loss_table, open_app, sample, wait_finished, wait_ready

from tinygpt.facts import FACTS

SHIPPED = [lever for lever in FACTS["levers"] if lever["backend"] == "webgpu" and lever["status"] == "shipped"]
# The shipped GPU levers SwiftShader can run (ENVIRONMENT.md), and those it cannot: it has no subgroup matrices.
HERE = {lever["id"]: lever["pill"] for lever in SHIPPED if lever["feature"] != "chromium-experimental-subgroup-matrix"}
NOT_HERE = [lever["id"] for lever in SHIPPED if lever["id"] not in HERE]
# The pills while training: those of the levers that serve sampling come with a sample.
TRAINING = {lever: pill for lever, pill in HERE.items() if next(lv for lv in SHIPPED if lv["id"] == lever).get("serves") != "sampling"}
EXPERIMENTAL = [lever["id"] for lever in FACTS["levers"] if lever["backend"] == "webgpu" and lever["status"] == "experimental"]
GATE_S = 900  # the checks on a software GPU, compiling every kernel twice
# The verdicts' file in the origin's private file system (webapp/worker/verdicts.ts).
VERDICTS = FACTS["gate"]["verdicts_file"]
READ_VERDICTS = """async (name) => {
    const root = await navigator.storage.getDirectory();
    return (await (await root.getFileHandle(name)).getFile()).text();
}"""
WRITE_VERDICTS = """async ([name, text]) => {
    const out = await (await (await navigator.storage.getDirectory()).getFileHandle(name, { create: true })).createWritable();
    await out.write(text);
    await out.close();
}"""


def verdict(page, lever):
    return page.locator(f"#caps-gate li[data-lever={lever}]")


def train(page, steps=8):
    configure(page, steps=steps, eval_every=100, save_every=100, backend="webgpu")
    page.click("#btn-start")
    wait_finished(page, steps, timeout=600)
    losses = [t for _, t, _ in loss_table(page)]
    assert losses[-1] < losses[0], f"training did not converge: {losses}"


@pytest.fixture(scope="module")
def gated(open_module_page, browser):
    """A visit whose levers' real gates decided their verdicts (minutes on SwiftShader), and the
    verdicts' file they left, which spares the later tests those minutes."""
    visit = open_app(open_module_page, browser, seed=11, gpu_levers=True)
    for lever in HERE:
        expect(verdict(visit.page, lever)).to_have_attribute("data-verdict", "pass", timeout=GATE_S * 1000)
    return visit, visit.page.evaluate(READ_VERDICTS, VERDICTS)


def test_the_levers_gates_decide_their_pills_and_explainers_say_what_they_measured(gated):
    visit, _ = gated
    page = visit.page
    for lever in HERE:
        expect(verdict(page, lever)).to_have_attribute("data-cached", "no")
        expect(verdict(page, lever)).to_contain_text("matches the plain path within the gate")
    for lever in EXPERIMENTAL + NOT_HERE:
        expect(verdict(page, lever)).to_have_count(0)
    page.select_option("#backend", "webgpu")
    expect(page.locator("#pills .pill-lever")).to_have_text(list(TRAINING.values()))
    train(page)
    expect(page.locator("#pills .pill-lever")).to_have_text(list(TRAINING.values()))
    sample(page, "to be", temperature=0, top_k=0, length=8, timeout=GATE_S, seed=1)
    expect(page.locator("#pills .pill-lever")).to_have_text(list(HERE.values()))
    expect(page.locator("#sample-tps")).to_contain_text("+int8")

    pill = page.locator("#pills .pill-lever", has_text="+subgroups")
    explainer = page.locator("#explainer-subgroups")
    pill.click()
    expect(explainer).to_be_visible()
    expect(explainer.locator("[data-gate=subgroups]")).to_contain_text("On this device: on")
    expect(explainer.locator("[data-gate=subgroups]")).to_contain_text("max error")
    explainer.locator(".explainer-close").click()
    expect(explainer).to_be_hidden()
    for lever in NOT_HERE:  # off without a check and without an error, and said so in its explainer
        feature = next(lv["feature"] for lv in SHIPPED if lv["id"] == lever)
        expect(page.locator(f"#explainer-{lever} [data-gate={lever}]")).to_have_text(f"On this device: off, this GPU adapter has no {feature}.")
    pill.focus()
    page.keyboard.press("Enter")
    expect(explainer).to_be_visible()
    page.keyboard.press("Escape")
    expect(explainer).to_be_hidden()
    assert visit.problems() == []


@pytest.mark.parametrize("failed", list(HERE))
def test_a_forced_failure_hides_its_pill_and_training_converges(open_page, browser, gated, failed):
    # A later visit of the same browser: the others' verdicts are remembered, and run no check.
    visit = open_page(browser, "/", init_script=SEEDED_RANDOM % 12)
    visit.page.evaluate(WRITE_VERDICTS, [VERDICTS, gated[1]])
    assert visit.goto(f"/app/?gate-fail={failed}").status == 200
    wait_ready(visit.page)
    page = visit.page
    expect(verdict(page, failed)).to_have_attribute("data-verdict", "fail", timeout=GATE_S * 1000)
    expect(verdict(page, failed)).to_contain_text("forced to fail")
    others = [lever for lever in HERE if lever != failed]
    for lever in others:
        expect(verdict(page, lever)).to_have_attribute("data-verdict", "pass", timeout=GATE_S * 1000)
        expect(verdict(page, lever)).to_have_attribute("data-cached", "yes")
    page.select_option("#backend", "webgpu")
    expect(page.locator("#pills .pill-lever")).to_have_text([TRAINING[lever] for lever in others if lever in TRAINING])
    train(page)
    expect(page.locator("#pills .pill-lever")).to_have_text([TRAINING[lever] for lever in others if lever in TRAINING])
    if failed == "int8":  # a sample stays on f32
        sample(page, "to be", temperature=0, top_k=0, length=8, timeout=GATE_S, seed=1)
        expect(page.locator("#pills .pill-lever")).to_have_text(list(TRAINING.values()))
        expect(page.locator("#sample-tps")).not_to_contain_text("+int8")
    assert visit.problems() == []
