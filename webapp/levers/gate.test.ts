// The gate module every lever shares: the kernel rule, and the verdicts (one
// check per key per session, remembered in a store across sessions, a forced
// failure for tests that is never remembered).

import assert from "node:assert/strict";
import { test } from "node:test";
import { type StoredVerdict, type VerdictStore, configureGates, describeErrors, gate, gateErrors, withinBudget, worst } from "./gate";

const withinGate = (out: Float32Array, ref: Float32Array) => withinBudget(gateErrors(out, ref));

test("the gate's rule: max|out - ref| and the floored mean relative error, against mean|ref|", () => {
  const ref = Float32Array.from([1, -2, 3, -4, 0]);
  assert.ok(withinGate(ref.slice(), ref));
  assert.ok(withinGate(ref.map((v) => v * 1.001), ref));
  assert.ok(!withinGate(ref.map((v) => v * 1.02), ref), "2% off everywhere");
  assert.ok(!withinGate(ref.map((v, i) => (i === 4 ? 0.05 : v)), ref), "one element off by 2.5% of mean|ref|");
  assert.ok(!withinGate(ref.map((v, i) => (i === 0 ? NaN : v)), ref), "NaN");
  assert.ok(!withinGate(ref.subarray(1), ref), "a different length");
});

test("errors are shares of their budgets, the worst of several kept, NaN kept", () => {
  const ref = Float32Array.from([1, -1, 1, -1]); // mean|ref| 1: max error budget 0.01, relative errors floored at 0.01
  const e = gateErrors(ref.map((v, i) => (i === 0 ? v + 0.005 : v)), ref);
  assert.ok(Math.abs(e["max error"] - 0.5) < 1e-6, `max error 0.005 is half of 0.01: ${e["max error"]}`);
  assert.ok(Math.abs(e["mean relative error"] - 0.25) < 1e-6, `mean relative error 0.00125 is a quarter of 0.005: ${e["mean relative error"]}`);
  assert.deepEqual(worst({ a: 0.2, b: 0.9 }, { a: 0.5, b: 0.1 }, { c: 2 }), { a: 0.5, b: 0.9, c: 2 });
  assert.ok(Number.isNaN(worst({ a: 0.2 }, { a: NaN }, { a: 0.1 }).a));
  assert.equal(describeErrors({ "max error": 0.123, "mean relative error": 0.0451 }), "max error 12% of its budget, mean relative error 4.5% of its budget");
});

function memoryStore(): VerdictStore & { saved: Record<string, StoredVerdict> } {
  const s = {
    saved: {} as Record<string, StoredVerdict>,
    async load() {
      return structuredClone(s.saved);
    },
    async save(v: Record<string, StoredVerdict>) {
      s.saved = structuredClone(v);
    },
  };
  return s;
}

const key = { adapter: "a", browser: "b", shaders: "c" };

test("a verdict is reached once per key, then remembered across sessions until its key changes", async () => {
  const store = memoryStore();
  let runs = 0;
  const check = async () => (runs++, { failure: null, errors: { "max error": 0.25 } });
  configureGates({ store });
  const first = await gate("x", key, check);
  assert.deepEqual(first, { pass: true, reason: "matches the plain path within the gate", errors: { "max error": 0.25 }, cached: false });
  assert.equal(await gate("x", key, check), first, "the same session asks again: the same verdict");
  assert.equal(runs, 1);
  assert.deepEqual(store.saved.x, { ...key, pass: true, reason: first.reason, errors: first.errors });

  configureGates({ store }); // a new session (the next visit)
  const again = await gate("x", key, check);
  assert.equal(runs, 1, "remembered: the check did not run");
  assert.equal(again.cached, true);
  assert.deepEqual(again.errors, first.errors, "the errors measured are remembered with the verdict");
  for (const changed of [{ adapter: "a2" }, { browser: "b2" }, { shaders: "c2" }]) {
    assert.equal((await gate("x", { ...key, ...changed }, check)).cached, false);
  }
  assert.equal(runs, 4, "a new adapter, browser version or shader hash checks again");
  configureGates({});
});

test("a failing or throwing check fails; a forced failure skips the check and is not remembered", async () => {
  const store = memoryStore();
  configureGates({ store });
  assert.deepEqual(await gate("bad", key, async () => ({ failure: "it differs", errors: { "max error": 3 } })), { pass: false, reason: "it differs", errors: { "max error": 3 }, cached: false });
  const thrown = await gate("boom", key, async () => {
    throw new Error("no device");
  });
  assert.equal(thrown.pass, false);
  assert.match(thrown.reason, /no device/);
  assert.deepEqual(Object.keys(store.saved).sort(), ["bad", "boom"]);

  configureGates({ store, forceFail: ["good"] });
  let ran = false;
  const forced = await gate("good", key, async () => ((ran = true), { failure: null, errors: {} }));
  assert.equal(forced.pass, false);
  assert.match(forced.reason, /forced to fail for a test \(\?gate-fail=good\)/);
  assert.equal(ran, false);
  assert.equal(store.saved.good, undefined);
  configureGates({});
});

test("two levers gated at once both land in the store", async () => {
  const store = memoryStore();
  configureGates({ store });
  await Promise.all(["p", "q", "r"].map((id) => gate(id, key, async () => ({ failure: null, errors: {} }))));
  assert.deepEqual(Object.keys(store.saved).sort(), ["p", "q", "r"]);
  configureGates({});
});
