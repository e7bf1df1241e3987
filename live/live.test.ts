// The feed's checks without a runtime: what schema.ts refuses, the words
// words.ts builds, and the bucket's arithmetic. The room and the Functions run
// under workerd in e2e/test_live.py.
import assert from "node:assert/strict";
import { test } from "node:test";
import facts from "../tinygpt/facts.json";
import { Bucket } from "./bucket";
import { PRESETS, parseClientMessage } from "./schema";
import { countryName, describe } from "./words";

const activity = { work: "train", preset: "huge", backend: "webgpu", paths: ["coop-matrix"] };
const frame = (v: unknown) => JSON.stringify(v);

test("a start, a resume and a finish are taken as they are", () => {
  assert.deepEqual(parseClientMessage(frame({ type: "start", activity })), { type: "start", activity });
  assert.deepEqual(parseClientMessage(frame({ type: "resume", activity })), { type: "resume", activity });
  assert.deepEqual(parseClientMessage(frame({ type: "finish" })), { type: "finish" });
  for (const preset of PRESETS) assert.equal(typeof parseClientMessage(frame({ type: "start", activity: { ...activity, preset } })), "object", preset);
});

test("anything outside the schema is refused, with why", () => {
  const cases: [unknown, string][] = [
    [{ type: "launch" }, "unknown-type"],
    [{ type: "finish", note: "hi" }, "invalid"],
    [[1, 2], "invalid"],
    [{ type: "start" }, "invalid"],
    [{ type: "start", activity: { ...activity, text: "<b>hi</b>" } }, "invalid"],
    [{ type: "start", activity: { ...activity, work: "mine" } }, "invalid"],
    [{ type: "start", activity: { ...activity, preset: "Huge" } }, "invalid"],
    [{ type: "start", activity: { ...activity, backend: "threads" } }, "invalid"],
    [{ type: "start", activity: { ...activity, paths: ["warp-drive"] } }, "invalid"],
    [{ type: "start", activity: { ...activity, paths: ["wasm"] } }, "invalid"], // a backend is not a path
    [{ type: "start", activity: { ...activity, paths: ["int8", "int8"] } }, "invalid"],
    [{ type: "start", activity: { ...activity, paths: "int8" } }, "invalid"],
  ];
  for (const [v, why] of cases) assert.equal(parseClientMessage(frame(v)), why, JSON.stringify(v));
  assert.equal(parseClientMessage("{\"type\":"), "not-json");
  assert.equal(parseClientMessage(new ArrayBuffer(8)), "not-json");
  assert.equal(parseClientMessage(new ArrayBuffer(facts.live.max_frame_bytes + 1)), "too-large");
});

test("the size bound counts UTF-8 bytes, not characters, and stops before parsing", () => {
  const max = facts.live.max_frame_bytes;
  assert.equal(parseClientMessage("x".repeat(max + 1)), "too-large");
  // Two bytes a character: under the bound in characters, over it in bytes.
  assert.equal(parseClientMessage(frame({ type: "finish", pad: "\u00e9".repeat(Math.ceil(max / 2)) })), "too-large");
  assert.equal(parseClientMessage(frame({ type: "finish", pad: "\u00e9".repeat(Math.floor(max / 4)) })), "invalid");
  // Every valid message fits: the longest has every path.
  const longest = { type: "start", activity: { work: "finetune", preset: "medium", backend: "webgpu", paths: facts.levers.slice(0, facts.live.max_paths).map((l) => l.id) } };
  assert.equal(typeof parseClientMessage(frame(longest)), "object");
  assert.ok(frame(longest).length < max / 2, `${frame(longest).length} bytes`);
});

test("the words come from the ids alone", () => {
  assert.equal(describe("started", activity as never, "BR"), "Brazil: someone started training Huge on WebGPU +coop-matrix");
  assert.equal(describe("finished", { work: "sample", preset: "custom", backend: "wasm", paths: ["threads"] }, ""), "Someone finished sampling from a custom model on WASM +threads");
  assert.equal(describe("started", { work: "finetune", preset: "tiny", backend: "wasm", paths: [] }, "XX"), "Someone started fine-tuning Tiny on WASM");
  assert.equal(countryName("T1"), null);
  assert.equal(countryName("br"), null);
  assert.equal(countryName("DE"), "Germany");
});

test("a bucket gives its burst at once, then its rate", () => {
  const b = new Bucket(3, 2, 0);
  assert.deepEqual([b.take(0), b.take(0), b.take(0), b.take(0)], [true, true, true, false]);
  assert.equal(b.take(400), false); // 0.8 of a token
  assert.equal(b.take(500), true); // 1.0
  assert.equal(b.take(10_000), true);
  assert.deepEqual([b.take(10_000), b.take(10_000), b.take(10_000)], [true, true, false]); // refilled to the burst, no further
  assert.equal(b.refillMs, 1500);
  assert.equal(b.full(11_000), false); // 2 of 3
  assert.equal(b.full(11_500), true);
});
