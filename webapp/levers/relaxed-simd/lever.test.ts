// The relaxed-SIMD lever's gate and its mutation proof: it passes the real
// relaxed build, refuses one whose multiply-adds were made wrong on purpose
// (tests/test_cpu_node.py builds it: TINYGPT_CPU_BROKEN), and a backend given
// that build then runs the plain one. Run with TINYGPT_CPU_WASM (the real
// cpu.wasm) and TINYGPT_CPU_RELAXED=1 when Node has relaxed SIMD on.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { createCpuBackend } from "../../cpu/backend";
import { relaxedModule } from "../../cpu/wasm";
import { configureGates } from "../gate";
import { gatedRelaxed, relaxedAgrees } from "./lever";

const need = (name: string) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} must be set (tests/test_cpu_node.py sets it)`);
  return v;
};
const wasm = readFileSync(need("TINYGPT_CPU_WASM"));
const broken = readFileSync(need("TINYGPT_CPU_BROKEN"));
const engineRelaxed = WebAssembly.validate(relaxedModule(wasm)!);
const model = { vocab_size: 256, n_layer: 1, n_embd: 16, n_head: 2, block_size: 8 };

test("this Node runs the relaxed-SIMD build when the harness turned it on", () => {
  assert.equal(engineRelaxed, process.env.TINYGPT_CPU_RELAXED === "1");
});

test("the gate passes the relaxed build and refuses one whose multiply-adds are wrong; that backend runs plain", async () => {
  configureGates({});
  if (engineRelaxed) {
    const good = await relaxedAgrees(wasm, relaxedModule(wasm)!);
    assert.equal(good.failure, null);
    assert.ok(good.errors["max error"] < 1 && good.errors["mean relative error"] < 1, JSON.stringify(good.errors));
    const bad = await relaxedAgrees(broken, relaxedModule(broken)!);
    assert.notEqual(bad.failure, null);
    assert.ok(!(bad.errors["max error"] < 1 && bad.errors["mean relative error"] < 1), "the broken build's errors are over budget");
    assert.equal((await gatedRelaxed(wasm)).verdict.pass, true);
  }
  const { verdict } = await gatedRelaxed(broken);
  assert.equal(verdict.pass, false);
  assert.match(verdict.reason, engineRelaxed ? /differ from the plain build's/ : /no relaxed SIMD/);
  const b = await createCpuBackend(model, { wasm: broken, threads: 1 });
  assert.equal(b.relaxed, false);
  assert.equal(b.device, "1 thread, SIMD");
  b.dispose();
});

test("forced to fail (the app's ?gate-fail=relaxed-simd), the real build is refused and the backend runs plain", async () => {
  configureGates({ forceFail: ["relaxed-simd"] });
  try {
    const copy = new Uint8Array(wasm); // gatedRelaxed keeps a verdict per bytes object
    const { verdict, module } = await gatedRelaxed(copy);
    assert.equal(module, null);
    assert.equal(verdict.pass, false);
    if (engineRelaxed) assert.match(verdict.reason, /forced to fail/);
    const b = await createCpuBackend(model, { wasm: copy, threads: 1 });
    assert.equal(b.relaxed, false);
    b.dispose();
  } finally {
    configureGates({});
  }
});
