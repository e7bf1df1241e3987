// The .tinygpt reader and writer: round trips, the Python writer's files (when
// tests/test_engine_node.py provides them), what the writer refuses, and every
// file of the shared corpus (tests/fixtures/checkpoints/index.json), whose
// verdicts the Python reader is held to as well.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { CheckpointError, type Checkpoint, readCheckpoint, writeCheckpoint } from "../checkpoint";
import { adapterLayout } from "../lora";
import { FACTS, paramCount } from "../model";
import { Rng } from "../rng";
import type { ModelConfig } from "../types";
import { verdict } from "../../cli/summary";
import { fixture, readJson } from "./fixtures";

const MODEL: ModelConfig = { vocab_size: 256, n_layer: 1, n_embd: 8, n_head: 2, block_size: 4 };
const TRAIN = { batch_size: 2, lr: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, grad_clip: 1, warmup_steps: 10, seed: 7 };

function randoms(n: number, seed: number): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n }, () => rng.normal());
}

function sample(withOptimizer: boolean): Checkpoint {
  const n = paramCount(MODEL);
  return {
    model: MODEL,
    params: randoms(n, 1),
    m: withOptimizer ? randoms(n, 2) : undefined,
    v: withOptimizer ? randoms(n, 3).map(Math.abs) : undefined,
    step: 42,
    train: TRAIN,
    run: { target_steps: 400, eval_every: 50, save_every: 25, elapsed_ms: 1234.5 },
    history: [{ step: 1, train: 5.5 }, { step: 2, train: 5.25, val: 5.5 }],
    dataset: { name: "sonnets.txt", bytes: 1234, sha256: "ab".repeat(32) },
    provenance: {},
  };
}

function refuses(make: () => unknown, rule: string): void {
  assert.throws(make, (e: unknown) => e instanceof CheckpointError && e.rule === rule, `expected a CheckpointError for ${rule}`);
}

test("version 2 round trip keeps every tensor and field", () => {
  const ck = sample(true);
  const back = readCheckpoint(writeCheckpoint(ck, { producer: "test" }));
  assert.equal(back.version, 2);
  assert.equal(back.dtype, "f32");
  assert.deepEqual(back.model, MODEL);
  assert.deepEqual(back.params, ck.params);
  assert.deepEqual(back.m, ck.m);
  assert.deepEqual(back.v, ck.v);
  assert.equal(back.step, 42);
  assert.deepEqual(back.train, TRAIN);
  assert.deepEqual(back.run, ck.run);
  assert.deepEqual(back.history, ck.history);
  assert.deepEqual(back.dataset, ck.dataset);
  assert.equal(back.provenance.producer, "test");
  assert.equal(back.provenance.corpus_sha256, ck.dataset!.sha256);
});

test("f16 weights round trip to within half precision, without optimizer state", () => {
  const ck = sample(false);
  const file = writeCheckpoint(ck, { producer: "test", dtype: "f16" });
  assert.ok(file.length < writeCheckpoint(ck, { producer: "test" }).length);
  const back = readCheckpoint(file);
  assert.equal(back.dtype, "f16");
  assert.equal(back.m, undefined);
  ck.params.forEach((p, i) => assert.ok(Math.abs(back.params[i] - p) <= Math.abs(p) * 2 ** -11 + 2 ** -24, `param ${i}: ${back.params[i]} vs ${p}`));
});

test("q8 weights round trip to within half a step of their column's scale, and re-saving them changes nothing", () => {
  const ck = sample(false);
  const file = writeCheckpoint(ck, { producer: "test", dtype: "q8" });
  assert.ok(file.length < writeCheckpoint(ck, { producer: "test", dtype: "f16" }).length);
  const back = readCheckpoint(file);
  assert.equal(back.dtype, "q8");
  // The token embedding is the first tensor: [vocab, n_embd], a scale per embedding column.
  const cols = MODEL.n_embd;
  const rows = MODEL.vocab_size;
  for (let c = 0; c < cols; c++) {
    let max = 0;
    for (let r = 0; r < rows; r++) max = Math.max(max, Math.abs(ck.params[r * cols + c]));
    for (let r = 0; r < rows; r++) {
      const i = r * cols + c;
      assert.ok(Math.abs(back.params[i] - ck.params[i]) <= (0.5 * max) / 127 * (1 + 1e-6), `param ${i}: ${back.params[i]} vs ${ck.params[i]}`);
    }
  }
  assert.deepEqual(readCheckpoint(writeCheckpoint({ ...back, provenance: {} }, { producer: "test", dtype: "q8" })).params, back.params);
});

const corpusFile = (name: string) => fixture(`checkpoints/${name}`);
test("q8: the TypeScript writer quantizes exactly as the Python writer did", { skip: corpusFile("v2-q8.tinygpt") ? false : "tests/fixtures/checkpoints is missing" }, () => {
  // The corpus's v2-f32 and v2-q8 hold the same weights, the second as Python's writer quantized them.
  const exact = readCheckpoint(readFileSync(corpusFile("v2-f32.tinygpt")!));
  const python = readCheckpoint(readFileSync(corpusFile("v2-q8.tinygpt")!));
  const ours = readCheckpoint(writeCheckpoint(exact, { producer: "test", dtype: "q8" }));
  assert.notDeepEqual(ours.params, exact.params);
  assert.deepEqual(ours.params, python.params);
});

test("an adapter round trips with its settings, and the writer keeps it f32", { skip: corpusFile("adapter.tinygpt") ? false : "tests/fixtures/checkpoints is missing" }, () => {
  const python = readCheckpoint(readFileSync(corpusFile("adapter-adam.tinygpt")!));
  assert.equal(python.adapter?.rank, 2);
  assert.deepEqual(python.params.length, adapterLayout(python.model, python.adapter!).reduce((n, t) => n + t.size, 0));
  const back = readCheckpoint(writeCheckpoint(python, { producer: "test" }));
  assert.deepEqual(back.adapter, python.adapter);
  assert.deepEqual([back.params, back.m, back.v], [python.params, python.m, python.v]);
  assert.throws(() => writeCheckpoint(python, { producer: "test", dtype: "f16" }), /an adapter's weights are stored as f32, not f16/);
});

test("adam_step is kept beside the moments only when it differs from step", () => {
  const ck = { ...sample(true), adamStep: 4 };
  assert.equal(readCheckpoint(writeCheckpoint(ck, { producer: "test" })).adamStep, 4);
  assert.equal(readCheckpoint(writeCheckpoint({ ...ck, adamStep: ck.step }, { producer: "test" })).adamStep, undefined);
  assert.equal(readCheckpoint(writeCheckpoint({ ...ck, m: undefined, v: undefined }, { producer: "test" })).adamStep, undefined);
});

test("the writer refuses what a reader would refuse", () => {
  const ck = sample(true);
  const nan = ck.params.slice();
  nan[5] = NaN;
  refuses(() => writeCheckpoint({ ...ck, params: nan }, { producer: "test" }), "non_finite");
  const big = ck.params.slice();
  big[5] = 70000; // fine in f32, beyond f16
  writeCheckpoint({ ...ck, params: big }, { producer: "test" });
  refuses(() => writeCheckpoint({ ...ck, params: big }, { producer: "test", dtype: "f16" }), "non_finite");
  refuses(() => writeCheckpoint({ ...ck, v: ck.v!.map((x) => -x) }, { producer: "test" }), "negative_moment");
  refuses(() => writeCheckpoint({ ...ck, history: [{ step: 1, train: Infinity }] }, { producer: "test" }), "history_non_finite");
  refuses(() => writeCheckpoint({ ...ck, dataset: { name: "x".repeat(FACTS.format.max_header_bytes), bytes: 1, sha256: "ab".repeat(32) } }, { producer: "test" }), "header_too_long");
  refuses(() => writeCheckpoint({ ...ck, dataset: { name: "x", bytes: 1, sha256: "not hex" } }, { producer: "test" }), "dataset");
});

test("a long history is thinned to the cap, keeping every k-th point back from the newest", () => {
  const cap = FACTS.format.max_history_points;
  const history = Array.from({ length: 3 * cap + 5 }, (_, i) => ({ step: i + 1, train: 1 + i / 1e5 }));
  const kept = readCheckpoint(writeCheckpoint({ ...sample(false), history }, { producer: "test" })).history;
  assert.ok(kept.length > cap / 2 && kept.length <= cap, `${kept.length} points`);
  assert.deepEqual(kept[kept.length - 1], history[history.length - 1]);
  assert.deepEqual(new Set(kept.slice(1).map((p, i) => p.step - kept[i].step)), new Set([4]));
});

const fromPython = process.env.TINYGPT_PY_CHECKPOINT;
test("a file from the Python writer loads, and our re-save is for Python to compare", { skip: fromPython ? false : "TINYGPT_PY_CHECKPOINT not set (tests/test_engine_node.py sets it when tinygpt.checkpoint exists)" }, () => {
  const ck = readCheckpoint(readFileSync(fromPython!));
  assert.ok(ck.m && ck.v, "the Python file was written with optimizer state");
  assert.ok(ck.train, "the Python file holds a training config");
  writeFileSync(process.env.TINYGPT_NODE_CHECKPOINT_OUT!, writeCheckpoint(ck, { producer: "tinygpt-node test" }));
});

interface Case {
  file: string;
  ok: boolean;
  rule?: string;
  error?: string;
}

const index = fixture("checkpoints/index.json");
test("every corpus file gets the verdict and message its index records", { skip: index ? false : "tests/fixtures/checkpoints is missing" }, () => {
  const { cases } = readJson<{ cases: Case[] }>(index!);
  assert.ok(cases.length > 100);
  const wrong: string[] = [];
  for (const { file, ...expected } of cases) {
    const got = verdict(join(index!, "..", file));
    // header_json's detail is the parser's own wording; its fixed start is what both readers share.
    const same = expected.rule === "header_json" ? got.rule === "header_json" && String(got.error).startsWith(expected.error!) : isDeepStrictEqual(got, expected);
    if (!same) wrong.push(`${file}\n  expected ${JSON.stringify(expected).slice(0, 300)}\n  got      ${JSON.stringify(got).slice(0, 300)}`);
  }
  assert.deepEqual(wrong, []);
});
