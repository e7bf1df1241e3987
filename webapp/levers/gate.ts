// The numerics gate (content/docs/numerics-gate.md), one module for every
// lever, CPU and GPU: the kernel rule (facts.gate), and the verdicts. A lever's
// check compares its kernels with the plain ones on this device; its verdict
// is remembered per adapter, browser version and shader hash, for the session
// and, where the host gives a store (the worker's OPFS, worker/verdicts.ts),
// across visits, so the check runs once. A test can force a lever's verdict to
// fail (the app's ?gate-fail=<id>), which is never remembered.

import facts from "../../tinygpt/facts.json";

/**
 * How far `out` is from `ref` under facts.gate's kernel rule, each error as a share of its budget
 * (below 1 passes): max|out - ref| against max_abs_frac_of_mean_ref of mean|ref|, and the mean
 * relative error, each element's floored at rel_floor_frac_of_mean_ref of mean|ref|, against mean_rel.
 * Different lengths, an empty ref or a NaN give Infinity or NaN, which never pass.
 */
export function gateErrors(out: Float32Array, ref: Float32Array): GateErrors {
  if (out.length !== ref.length || ref.length === 0) return { "max error": Infinity, "mean relative error": Infinity };
  const meanAbs = ref.reduce((s, v) => s + Math.abs(v), 0) / ref.length;
  const floor = facts.gate.rel_floor_frac_of_mean_ref * meanAbs;
  let maxAbs = 0, rel = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(out[i] - ref[i]);
    maxAbs = Number.isNaN(d) ? NaN : Math.max(maxAbs, d);
    rel += d / Math.max(Math.abs(ref[i]), floor);
  }
  return {
    "max error": maxAbs / (facts.gate.max_abs_frac_of_mean_ref * meanAbs),
    "mean relative error": rel / ref.length / facts.gate.mean_rel,
  };
}

/**
 * A gradient's error as a share of facts.gate.grad_l2_rel: |out - ref| / |ref| in L2. Gradients come
 * out of a whole backward pass, where sums that nearly cancel (an embedding row a batch never uses)
 * turn rounding an f16 input rightly carries into large relative errors of tiny elements; the norm
 * weighs each element by its size, and still sees a wrong kernel (a transposed weight, a dropped
 * partial sum) at once.
 */
export function gradientError(out: Float32Array, ref: Float32Array): GateErrors {
  if (out.length !== ref.length || ref.length === 0) return { "gradient L2 error": Infinity };
  let diff = 0, norm = 0;
  for (let i = 0; i < ref.length; i++) {
    diff += (out[i] - ref[i]) ** 2;
    norm += ref[i] ** 2;
  }
  return { "gradient L2 error": Math.sqrt(diff / norm) / facts.gate.grad_l2_rel };
}

/** Whether every error is within its budget (a NaN share fails). */
export const withinBudget = (errors: GateErrors) => Object.values(errors).every((share) => share < 1);

/** Measured errors by name, each as a share of its budget (1: at the limit). */
export type GateErrors = Record<string, number>;

/** The worst of each error over several comparisons. */
export function worst(...all: GateErrors[]): GateErrors {
  const out: GateErrors = {};
  for (const errors of all) {
    for (const [name, share] of Object.entries(errors)) out[name] = Number.isNaN(share) || Number.isNaN(out[name]) ? NaN : Math.max(out[name] ?? 0, share);
  }
  return out;
}

/** What a lever's check found: why it failed (null: it passed) and the errors it measured. */
export interface Outcome {
  failure: string | null;
  errors: GateErrors;
}

/** A lever's verdict on this device: the page shows its pill exactly when `pass`. */
export interface Verdict {
  pass: boolean;
  /** In words, for the "This device" panel. */
  reason: string;
  /** The check's measured errors, shares of their budgets (none when forced). */
  errors: GateErrors;
  /** Remembered from an earlier visit rather than checked in this session. */
  cached: boolean;
  /** What the lever runs on this adapter, in words, where that depends on the adapter (coop-matrix: its tile config). */
  detail?: string;
}

/** The errors in words: "max error 12% of its budget, ...". */
export function describeErrors(errors: GateErrors): string {
  const pct = (share: number) => (Number.isFinite(share) ? `${(100 * share).toPrecision(2)}%` : String(share));
  return Object.entries(errors).map(([name, share]) => `${name} ${pct(share)} of its budget`).join(", ");
}

/** What a verdict depends on: the device that ran the check, the browser, and the kernels compared. */
export interface VerdictKey {
  adapter: string;
  browser: string;
  shaders: string;
}

export interface StoredVerdict extends VerdictKey {
  pass: boolean;
  reason: string;
  errors?: GateErrors;
}

/** Verdicts that outlive the session, one per lever id (the latest). */
export interface VerdictStore {
  load(): Promise<Record<string, StoredVerdict>>;
  save(verdicts: Record<string, StoredVerdict>): Promise<void>;
}

let forced = new Set<string>();
let store: VerdictStore | null = null;
const session = new Map<string, Promise<Verdict>>();
// Writes are read-modify-write of one record: one at a time, so two levers gated at once both land.
let writes: Promise<void> = Promise.resolve();

/** Once per host, before any gate runs: levers forced to fail (a test switch) and where verdicts persist. */
export function configureGates(opts: { forceFail?: string[]; store?: VerdictStore | null }): void {
  forced = new Set(opts.forceFail ?? []);
  store = opts.store ?? null;
  session.clear();
}

/** The browser (or Node) version a verdict was reached in. */
export function browserVersion(): string {
  const nav = (globalThis as { navigator?: { userAgent?: string } }).navigator;
  const node = (globalThis as { process?: { version?: string } }).process?.version;
  return nav?.userAgent ?? `node ${node ?? "?"}`;
}

/** Hex SHA-256 of the kernels a check compares, for the verdict key. */
export async function shaderHash(...parts: (BufferSource | string)[]): Promise<string> {
  const enc = new TextEncoder();
  const chunks = parts.map((p) => (typeof p === "string" ? enc.encode(p) : new Uint8Array(p instanceof ArrayBuffer ? p : p.buffer, p instanceof ArrayBuffer ? 0 : p.byteOffset, p.byteLength)));
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length + 4, 0));
  let at = 0;
  for (const c of chunks) {
    new DataView(all.buffer).setUint32(at, c.length, true); // lengths keep ("ab", "c") apart from ("a", "bc")
    all.set(c, at + 4);
    at += c.length + 4;
  }
  const digest = await crypto.subtle.digest("SHA-256", all);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// The console in a browser; stderr in Node (the CLI, benchmarks, tests), whose stdout carries a tool's output.
const stderr = (globalThis as { process?: { stderr?: { write(text: string): unknown } } }).process?.stderr;
const logLine = (line: string) => (stderr ? stderr.write(`${line}\n`) : console.info(line));

const sessionKey = (lever: string, key: VerdictKey) => JSON.stringify([lever, key.adapter, key.browser, key.shaders]);
const sameKey = (a: VerdictKey, b: VerdictKey) => a.adapter === b.adapter && a.browser === b.browser && a.shaders === b.shaders;

/** The verdict the store keeps for `lever` under `key`, if any. */
async function kept(lever: string, key: VerdictKey): Promise<StoredVerdict | undefined> {
  const verdict = store ? (await store.load().catch(() => ({}) as Record<string, StoredVerdict>))[lever] : undefined;
  return verdict && sameKey(verdict, key) ? verdict : undefined;
}

async function reach(lever: string, key: VerdictKey, check: () => Promise<Outcome>): Promise<Verdict> {
  if (forced.has(lever)) return { pass: false, reason: `forced to fail for a test (?gate-fail=${lever})`, errors: {}, cached: false };
  const known = await kept(lever, key);
  if (known) return { pass: known.pass, reason: known.reason, errors: known.errors ?? {}, cached: true };
  let outcome: Outcome;
  try {
    outcome = await check();
  } catch (e) {
    outcome = { failure: `its check failed to run (${(e as Error).message})`, errors: {} };
  }
  const verdict = { pass: outcome.failure === null, reason: outcome.failure ?? "matches the plain path within the gate", errors: outcome.errors, cached: false };
  const into = store;
  if (into) {
    // A store that cannot be written (storage off, quota) only costs a check on the next visit.
    writes = writes.then(async () => into.save({ ...(await into.load()), [lever]: { ...key, pass: verdict.pass, reason: verdict.reason, errors: verdict.errors } })).catch(() => undefined);
    await writes;
  }
  return verdict;
}

/** Whether `gate` would answer for `lever` under `key` without running its check: forced, reached this session, or remembered. */
export async function remembered(lever: string, key: VerdictKey): Promise<boolean> {
  return forced.has(lever) || session.has(sessionKey(lever, key)) || (await kept(lever, key)) !== undefined;
}

/**
 * The verdict of `lever` under `key`: forced, remembered, or reached now by
 * `check`, whose failure is null when the lever's kernels agree with the plain
 * ones and the reason when they do not (a throw fails too). Each verdict is
 * logged once a session, one console line with its errors. Asked again in
 * this session with the same key, the same verdict comes back without running
 * anything.
 */
export function gate(lever: string, key: VerdictKey, check: () => Promise<Outcome>): Promise<Verdict> {
  const k = sessionKey(lever, key);
  let verdict = session.get(k);
  if (!verdict) {
    verdict = reach(lever, key, check);
    verdict.then((v) => logLine(`numerics gate: ${lever} ${v.pass ? "on" : "off"}${v.cached ? " (remembered)" : ""}: ${v.reason}${Object.keys(v.errors).length ? `; ${describeErrors(v.errors)}` : ""}`));
    session.set(k, verdict);
  }
  return verdict;
}
