// A checkpoint file as the TypeScript reader sees it, in the shape of
// tinygpt.checkpoint.summary(): what `inspect` prints and what the corpus
// index (tests/fixtures/checkpoints/index.json) records, so the readers can be
// compared on any file. Reads like the app does: preamble and header first.
import { createHash } from "node:crypto";
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { CheckpointError, type ReadCheckpoint, decodeCheckpoint, headerLength, planCheckpoint } from "../engine/checkpoint";
import { FACTS } from "../engine/model";

function read(fd: number, at: number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  let done = 0;
  while (done < n) {
    const got = readSync(fd, out, done, n - done, at + done);
    if (got === 0) break;
    done += got;
  }
  return out.subarray(0, done);
}

const digest = (a?: Float32Array) => (a ? createHash("sha256").update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest("hex") : null);

export function summary(ck: ReadCheckpoint): Record<string, unknown> {
  return {
    ok: true,
    version: ck.version,
    dtype: ck.dtype,
    config: ck.model,
    adapter: ck.adapter ?? null,
    step: ck.step,
    adam_step: ck.adamStep ?? null,
    train: ck.train,
    run: ck.run ?? null,
    history: ck.history,
    dataset: ck.dataset,
    params: digest(ck.params),
    m: digest(ck.m),
    v: digest(ck.v),
  };
}

/** The summary of the file at `path`, or the rule and message it is refused with. */
export function verdict(path: string): Record<string, unknown> {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const preamble = read(fd, 0, Math.min(size, FACTS.format.preamble_bytes));
    const head = read(fd, 0, preamble.length + headerLength(preamble, size));
    const plan = planCheckpoint(head, size);
    return summary(decodeCheckpoint(plan, read(fd, plan.bodyStart, size - plan.bodyStart), plan.bodyStart));
  } catch (e) {
    if (!(e instanceof CheckpointError)) throw e;
    return { ok: false, rule: e.rule, error: e.message };
  } finally {
    closeSync(fd);
  }
}
