// Fuzzing the TypeScript reader with a seeded generator: the corpus's good
// files with bytes flipped, cut, inserted or overwritten, and with header
// fields replaced by other JSON. Whatever the bytes, readCheckpoint returns a
// checkpoint or throws CheckpointError, within 1 s of CPU per file, and the
// process's peak memory grows by no more than 64 MiB over the whole run (a
// header's claims are never allocated). tests/test_checkpoint_readers.py holds
// the reader to the same bounds on the largest inputs the format allows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CheckpointError, readCheckpoint } from "../checkpoint";
import { Rng } from "../rng";
import { cost } from "../../cli/cost";
import { fixture, readJson } from "./fixtures";

const ROUNDS = 3000;
const MiB = 2 ** 20;
const VALUES: unknown[] = [null, true, false, 0, 1, -1, 2, 4, 64, 255, 256, 1.5, -0, 1e-300, 300000, 2 ** 20, 2 ** 31, 2 ** 32, 2 ** 53, 1e20, "", "f16", "f32", "fp16", "bytes", "tinygpt", "__proto__", "toString", "opt.m.", "blocks.0.ln1.weight", [], {}, [1], [256, 4], { type: "bytes", vocab_size: 256 }];

function paths(v: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out = [prefix];
  if (Array.isArray(v)) v.slice(0, 40).forEach((x, i) => out.push(...paths(x, [...prefix, i])));
  else if (typeof v === "object" && v !== null) for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...prefix, k]));
  return out;
}

/** The file with its header's JSON replaced, the data where the layout puts it (aligned in version 2). */
function withHeader(file: Uint8Array, header: unknown): Uint8Array {
  const view = new DataView(file.buffer, file.byteOffset);
  const length = view.getUint32(8, true);
  const old = JSON.parse(new TextDecoder().decode(file.subarray(12, 12 + length)));
  const json = new TextEncoder().encode(JSON.stringify(header));
  const legacy = view.getUint32(4, true) === 1 || (!("format" in old) && "manifest" in old);
  const data = file.subarray(legacy ? 12 + length : Math.ceil((12 + length) / 64) * 64);
  const start = legacy ? 12 + json.length : Math.ceil((12 + json.length) / 64) * 64;
  const out = new Uint8Array(start + data.length);
  out.set(file.subarray(0, 8));
  new DataView(out.buffer).setUint32(8, json.length, true);
  out.set(json, 12);
  out.set(data, start);
  return out;
}

function mutate(base: Uint8Array, rng: Rng): Uint8Array {
  if (rng.uniform() < 0.5) {
    const header = JSON.parse(new TextDecoder().decode(base.subarray(12, 12 + new DataView(base.buffer, base.byteOffset).getUint32(8, true))));
    const all = paths(header).filter((p) => p.length);
    const path = all[rng.int(all.length)];
    let target = header;
    for (const k of path.slice(0, -1)) target = target[k];
    target[path[path.length - 1]] = structuredClone(VALUES[rng.int(VALUES.length)]);
    return withHeader(base, header);
  }
  let b = base.slice();
  for (let n = 1 + rng.int(6); n > 0; n--) {
    const at = rng.int(Math.max(b.length, 1));
    const kind = rng.int(4);
    if (kind === 0 && b.length) b[at] ^= 1 << rng.int(8);
    else if (kind === 1) b = b.slice(0, at);
    else if (kind === 2) b = Uint8Array.from([...b.subarray(0, at), ...Array.from({ length: 1 + rng.int(8) }, () => rng.int(256)), ...b.subarray(at)]);
    else if (at + 4 <= b.length) new DataView(b.buffer).setUint32(at, [0, 1, 63, 64, 2 ** 31, 2 ** 32 - 1, b.length, rng.u32()][rng.int(8)], true);
  }
  return b;
}

const index = fixture("checkpoints/index.json");
test("mutated files are read or refused with CheckpointError, within the time and memory bounds", { skip: index ? false : "tests/fixtures/checkpoints is missing" }, () => {
  const good = readJson<{ cases: { file: string; ok: boolean }[] }>(index!).cases.filter((c) => c.ok);
  const bases = good.map((c) => new Uint8Array(readFileSync(join(index!, "..", c.file))));
  const rng = new Rng(20261201);
  const refused = new Map<string, number>();
  const { peakBytes } = cost(() => {
    for (let i = 0; i < ROUNDS; i++) {
      const file = mutate(bases[rng.int(bases.length)], rng);
      const cpu = process.cpuUsage();
      try {
        readCheckpoint(file);
      } catch (e) {
        assert.ok(e instanceof CheckpointError, `round ${i}: ${(e as Error).stack}`);
        refused.set(e.rule, (refused.get(e.rule) ?? 0) + 1);
      }
      const used = process.cpuUsage(cpu);
      assert.ok(used.user + used.system < 1e6, `round ${i}: ${(used.user + used.system) / 1e3} ms of CPU`);
    }
  });
  assert.ok(peakBytes < 64 * MiB, `peak memory grew by ${(peakBytes / MiB).toFixed(1)} MiB`);
  assert.ok(refused.size > 20, `only ${refused.size} kinds of refusal reached: ${[...refused.keys()]}`);
});
