// The .tinygpt reader and writer: round trips, version 1 files, the Python
// writer's files (when tests/test_engine_node.py provides them) and the
// rejection of corrupt files, each with a message naming the problem.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { CheckpointError, type Checkpoint, readCheckpoint, writeCheckpoint } from "../checkpoint";
import { paramCount, tensorLayout } from "../model";
import { Rng } from "../rng";
import type { ModelConfig } from "../types";

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
    history: [{ step: 1, train: 5.5 }, { step: 2, train: 5.25, val: 5.5 }],
    dataset: { name: "sonnets.txt", bytes: 1234, sha256: "ab".repeat(32) },
    provenance: {},
  };
}

// Rewrites a file's JSON header (re-aligning the data section behind it).
function withHeader(file: Uint8Array, edit: (h: Record<string, any>) => void): Uint8Array {
  const view = new DataView(file.buffer, file.byteOffset);
  const len = view.getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(file.subarray(12, 12 + len)));
  const data = file.subarray(Math.ceil((12 + len) / 64) * 64);
  edit(header);
  const json = new TextEncoder().encode(JSON.stringify(header));
  const start = Math.ceil((12 + json.length) / 64) * 64;
  const out = new Uint8Array(start + data.length);
  out.set(file.subarray(0, 8));
  new DataView(out.buffer).setUint32(8, json.length, true);
  out.set(json, 12);
  out.set(data, start);
  return out;
}

function rejects(file: Uint8Array, message: RegExp): void {
  assert.throws(() => readCheckpoint(file), (e: unknown) => e instanceof CheckpointError && message.test((e as Error).message), `expected a CheckpointError matching ${message}`);
}

test("version 2 round trip keeps every tensor and field", () => {
  const ck = sample(true);
  const back = readCheckpoint(writeCheckpoint(ck, { producer: "test" }));
  assert.deepEqual(back.model, MODEL);
  assert.deepEqual(back.params, ck.params);
  assert.deepEqual(back.m, ck.m);
  assert.deepEqual(back.v, ck.v);
  assert.equal(back.step, 42);
  assert.deepEqual(back.train, TRAIN);
  assert.deepEqual(back.history, ck.history);
  assert.deepEqual(back.dataset, ck.dataset);
  assert.equal(back.provenance.producer, "test");
  assert.equal(back.provenance.corpus_sha256, ck.dataset!.sha256);
});

test("f16 weights round trip to within half precision, without optimizer state", () => {
  const ck = sample(false);
  const file = writeCheckpoint(ck, { producer: "test", f16: true });
  assert.ok(file.length < writeCheckpoint(ck, { producer: "test" }).length);
  const back = readCheckpoint(file);
  assert.equal(back.m, undefined);
  ck.params.forEach((p, i) => assert.ok(Math.abs(back.params[i] - p) <= Math.abs(p) * 2 ** -11 + 2 ** -24, `param ${i}: ${back.params[i]} vs ${p}`));
});

test("corrupt and foreign files are refused with a message naming the problem", () => {
  const good = writeCheckpoint(sample(true), { producer: "test" });
  rejects(new Uint8Array(0), /shorter than the 12-byte prefix/);
  rejects(Uint8Array.from([...new TextEncoder().encode("PK\x03\x04"), ...good.subarray(4)]), /magic/);
  const version = good.slice();
  new DataView(version.buffer).setUint32(4, 9, true);
  rejects(version, /unsupported version 9/);
  const huge = good.slice();
  new DataView(huge.buffer).setUint32(8, 0xffffffff, true);
  rejects(huge, /exceeds the limit/);
  const long = good.slice(0, 100);
  rejects(long, /header claims \d+ bytes/);
  rejects(good.subarray(0, good.length - 1), /past the end of the file/);
  const garbled = good.slice();
  garbled[13] = 0xff;
  rejects(garbled, /not valid UTF-8 JSON/);
  rejects(withHeader(good, (h) => (h.tensors[0].dtype = "bf16")), /unknown dtype "bf16"/);
  rejects(withHeader(good, (h) => (h.tensors[1].shape = [4, 9])), /nbytes .* disagrees with shape/);
  rejects(withHeader(good, (h) => { h.tensors[1].shape = [8, 4]; }), /shape \[8,4\], the config implies \[4,8\]/);
  rejects(withHeader(good, (h) => (h.tensors[1].offset = h.tensors[0].offset)), /overlap/);
  rejects(withHeader(good, (h) => (h.tensors[2].offset = 3)), /not a non-negative multiple of 64/);
  rejects(withHeader(good, (h) => (h.config.n_head = 3)), /not divisible by n_head/);
  rejects(withHeader(good, (h) => (h.tensors = h.tensors.slice(1))), /"token_embedding.weight" is missing/);
  rejects(withHeader(good, (h) => (h.tensors[0].name = "lm_head.weight")), /unexpected tensor "lm_head.weight"/);
  rejects(withHeader(good, (h) => (h.format = "safetensors")), /header.format/);
  rejects(withHeader(good, (h) => (h.trainer.config.lr = "fast")), /trainer.config.lr/);
});

// The original playground's layout: JSON header, int32 step, then per tensor [w, m, v] in f32
// (or the weights alone, f16 when weightDtype is "fp16").
function legacyFile(params: Float32Array, m: Float32Array | null, v: Float32Array | null, fp16: boolean): Uint8Array {
  const layout = tensorLayout(MODEL);
  const header = {
    version: 1,
    config: { layers: MODEL.n_layer, dModel: MODEL.n_embd, heads: MODEL.n_head, ctx: MODEL.block_size, dMlp: 4 * MODEL.n_embd },
    manifest: layout.map((t) => ({ name: t.name, shape: t.name.endsWith("fc_in.weight") ? [...t.shape].reverse() : t.shape, floatOffset: t.offset })),
    includesOptimizerState: m !== null,
    weightDtype: fp16 ? "fp16" : "fp32",
    lossHistory: [{ step: 10, train: 4.5, val: 4.75 }],
  };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const floats = m ? 3 * params.length : params.length;
  const out = new Uint8Array(12 + json.length + 4 + floats * (fp16 ? 2 : 4));
  const view = new DataView(out.buffer);
  out.set(new TextEncoder().encode("TGPT"));
  view.setUint32(4, 1, true);
  view.setUint32(8, json.length, true);
  out.set(json, 12);
  view.setInt32(12 + json.length, 10, true);
  let at = 16 + json.length;
  if (fp16) {
    // 0.5 + i/1024-style values are exact in f16: write their half bits directly.
    for (const p of params) {
      view.setUint16(at, p === 0.5 ? 0x3800 : 0x3c00, true);
      at += 2;
    }
    return out;
  }
  for (const t of layout) {
    for (const src of m ? [params, m, v!] : [params]) {
      for (let i = 0; i < t.size; i++, at += 4) view.setFloat32(at, src[t.offset + i], true);
    }
  }
  return out;
}

test("version 1 files load: f32 with Adam state, and f16 weights", () => {
  const n = paramCount(MODEL);
  const [p, m, v] = [randoms(n, 4), randoms(n, 5), randoms(n, 6)];
  const ck = readCheckpoint(legacyFile(p, m, v, false));
  assert.deepEqual(ck.model, MODEL);
  assert.equal(ck.step, 10);
  assert.deepEqual(ck.params, p);
  assert.deepEqual(ck.m, m);
  assert.deepEqual(ck.v, v);
  assert.deepEqual(ck.history, [{ step: 10, train: 4.5, val: 4.75 }]);
  const halves = Float32Array.from({ length: n }, (_, i) => (i % 2 ? 0.5 : 1));
  const ck16 = readCheckpoint(legacyFile(halves, null, null, true));
  assert.deepEqual(ck16.params, halves);
  assert.equal(ck16.m, undefined);
  const legacy = legacyFile(p, m, v, false);
  rejects(legacy.subarray(0, legacy.length - 4), new RegExp(`version 1 file is ${legacy.length - 4} bytes`));
});

const fromPython = process.env.TINYGPT_PY_CHECKPOINT;
test("a file from the Python writer loads, and our re-save is for Python to compare", { skip: fromPython ? false : "TINYGPT_PY_CHECKPOINT not set (tests/test_engine_node.py sets it when tinygpt.checkpoint exists)" }, () => {
  const ck = readCheckpoint(readFileSync(fromPython!));
  assert.ok(ck.m && ck.v, "the Python file was written with optimizer state");
  assert.ok(ck.train, "the Python file holds a training config");
  writeFileSync(process.env.TINYGPT_NODE_CHECKPOINT_OUT!, writeCheckpoint(ck, { producer: "tinygpt-node test" }));
});

test("adam_step: kept beside the moments when it differs from step, checked against step and the moments", () => {
  const ck = { ...sample(true), adamStep: 4 };
  const file = writeCheckpoint(ck, { producer: "test" });
  assert.equal(readCheckpoint(file).adamStep, 4);
  assert.equal(readCheckpoint(writeCheckpoint({ ...ck, adamStep: ck.step }, { producer: "test" })).adamStep, undefined);
  assert.equal(readCheckpoint(writeCheckpoint({ ...ck, m: undefined, v: undefined }, { producer: "test" })).adamStep, undefined);
  rejects(withHeader(file, (h) => { h.trainer.adam_step = ck.step + 1; }), /adam_step 43 is not an integer between 0 and step 42/);
  rejects(withHeader(writeCheckpoint(sample(false), { producer: "test" }), (h) => { h.trainer.adam_step = 1; }), /no Adam moments/);
});
