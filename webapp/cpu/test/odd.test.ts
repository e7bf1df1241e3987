// The CPU backend (both SIMD builds) against the numpy reference on an
// odd-shaped model that tests/test_cpu_node.py writes at test time
// (TINYGPT_CPU_ODD): 21 rows, 20 columns, sequences of 7, head size 20, so
// every kernel runs its remainder code.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { createCpuBackend } from "../backend";
import type { ModelConfig, TrainConfig } from "../../engine/types";

interface Odd {
  config: ModelConfig;
  train: TrainConfig;
  init_params: number[];
  steps: { x: number[]; y: number[]; lr: number; loss: number }[];
  prompt: number[];
  logits: number[];
}

const need = (name: string) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} must be set (tests/test_cpu_node.py sets it)`);
  return v;
};

for (const relaxed of [false, true]) {
  test(`odd shapes, ${relaxed ? "relaxed" : "plain"} SIMD: losses of three steps and the next logits match the numpy reference`, async () => {
    const odd = JSON.parse(readFileSync(need("TINYGPT_CPU_ODD"), "utf8")) as Odd;
    const b = await createCpuBackend(odd.config, { wasm: readFileSync(need("TINYGPT_CPU_WASM")), threads: 1, relaxed, optimizer: odd.train });
    await b.setState({ params: Float32Array.from(odd.init_params), step: 0 });
    for (const [i, s] of odd.steps.entries()) {
      const loss = await b.trainStep(Int32Array.from(s.x), Int32Array.from(s.y), s.lr);
      assert.ok(Math.abs(loss - s.loss) < 1e-4 * s.loss, `step ${i}: loss ${loss} vs reference ${s.loss}`);
    }
    const got = await b.nextLogits(Int32Array.from(odd.prompt));
    const scale = Math.max(...odd.logits.map(Math.abs));
    odd.logits.forEach((want, j) => assert.ok(Math.abs(got[j] - want) < 1e-4 * scale, `logit ${j}: ${got[j]} vs ${want}`));
    b.dispose();
  });
}
