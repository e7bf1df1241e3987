// The gate module every lever shares: the kernel rule, and the verdicts (one
// check per key per session, remembered in a store across sessions, a forced
// failure for tests that is never remembered).

import assert from "node:assert/strict";
import { test } from "node:test";
import { type StoredVerdict, type VerdictStore, configureGates, gate, withinGate } from "./gate";

test("the gate's rule: max|out - ref| and the floored mean relative error, against mean|ref|", () => {
  const ref = Float32Array.from([1, -2, 3, -4, 0]);
  assert.ok(withinGate(ref.slice(), ref));
  assert.ok(withinGate(ref.map((v) => v * 1.001), ref));
  assert.ok(!withinGate(ref.map((v) => v * 1.02), ref), "2% off everywhere");
  assert.ok(!withinGate(ref.map((v, i) => (i === 4 ? 0.05 : v)), ref), "one element off by 2.5% of mean|ref|");
  assert.ok(!withinGate(ref.map((v, i) => (i === 0 ? NaN : v)), ref), "NaN");
  assert.ok(!withinGate(ref.subarray(1), ref), "a different length");
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
  const check = async () => (runs++, null);
  configureGates({ store });
  const first = await gate("x", key, check);
  assert.deepEqual(first, { pass: true, reason: "matches the plain path within the gate", cached: false });
  assert.equal(await gate("x", key, check), first, "the same session asks again: the same verdict");
  assert.equal(runs, 1);
  assert.deepEqual(store.saved.x, { ...key, pass: true, reason: first.reason });

  configureGates({ store }); // a new session (the next visit)
  const again = await gate("x", key, check);
  assert.equal(runs, 1, "remembered: the check did not run");
  assert.equal(again.cached, true);
  for (const changed of [{ adapter: "a2" }, { browser: "b2" }, { shaders: "c2" }]) {
    assert.equal((await gate("x", { ...key, ...changed }, check)).cached, false);
  }
  assert.equal(runs, 4, "a new adapter, browser version or shader hash checks again");
  configureGates({});
});

test("a failing or throwing check fails; a forced failure skips the check and is not remembered", async () => {
  const store = memoryStore();
  configureGates({ store });
  assert.deepEqual(await gate("bad", key, async () => "it differs"), { pass: false, reason: "it differs", cached: false });
  const thrown = await gate("boom", key, async () => {
    throw new Error("no device");
  });
  assert.equal(thrown.pass, false);
  assert.match(thrown.reason, /no device/);
  assert.deepEqual(Object.keys(store.saved).sort(), ["bad", "boom"]);

  configureGates({ store, forceFail: ["good"] });
  let ran = false;
  const forced = await gate("good", key, async () => ((ran = true), null));
  assert.equal(forced.pass, false);
  assert.match(forced.reason, /forced to fail for a test \(\?gate-fail=good\)/);
  assert.equal(ran, false);
  assert.equal(store.saved.good, undefined);
  configureGates({});
});

test("two levers gated at once both land in the store", async () => {
  const store = memoryStore();
  configureGates({ store });
  await Promise.all(["p", "q", "r"].map((id) => gate(id, key, async () => null)));
  assert.deepEqual(Object.keys(store.saved).sort(), ["p", "q", "r"]);
  configureGates({});
});
