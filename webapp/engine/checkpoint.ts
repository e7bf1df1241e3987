// The .tinygpt file (content/docs/file-format.md is the spec): version 2 read
// and write, version 1 (the original playground's export) read.
//
// A file is untrusted input. Reading has two phases, as in
// tinygpt/checkpoint.py, whose checks come in the same order with the same
// messages (facts.json format.errors): planCheckpoint checks the preamble and
// the header against the file's real size and lists the tensors' byte ranges
// without touching the data (the app runs it on a File.slice before reading
// the rest); decodeCheckpoint then reads the data and refuses non-finite
// values. Nothing is allocated for what a header merely claims.

import type { DatasetInfo, HistoryPoint, ModelConfig, RunRecord, TrainConfig } from "./types";
import { FACTS, paramCount, shapeOf, tensorLayout } from "./model";
import { floatToHalf, halfToFloat } from "./f16";
import { type AdapterInfo, LORA, PROJECTIONS, type Projection, adapterLayout, projectionShape } from "./lora";

const FMT = FACTS.format;
export type Dtype = keyof typeof FMT.dtypes;
const Q8 = FMT.q8;

/** A tensor's nbytes in the file: its values, and for q8 the column scales before them (facts.json format.q8). */
function storedBytes(dtype: Dtype, shape: readonly number[]): number {
  const count = shape.reduce((a, b) => a * b, 1);
  return count * FMT.dtypes[dtype] + (dtype === "q8" ? Q8.scale_bytes * shape[shape.length - 1] : 0);
}

/** q8 bytes of a finite row-major tensor whose last axis is `cols` long: the column scales, then the int8 values. */
function quantizeQ8(data: Float32Array, cols: number, out: DataView, at: number): void {
  const scales = new Float32Array(cols);
  for (let i = 0; i < data.length; i++) scales[i % cols] = Math.max(scales[i % cols], Math.abs(data[i]));
  for (let c = 0; c < cols; c++) {
    scales[c] = Math.fround(scales[c] / Q8.levels);
    out.setFloat32(at + Q8.scale_bytes * c, scales[c], true);
  }
  const base = at + Q8.scale_bytes * cols;
  for (let i = 0; i < data.length; i++) {
    const scale = scales[i % cols];
    const r = scale > 0 ? data[i] / scale : 0;
    // Half away from zero, in double precision, as tinygpt/checkpoint.py rounds: the two writers agree byte for byte.
    out.setInt8(base + i, Math.max(-Q8.levels, Math.min(Q8.levels, Math.sign(r) * Math.floor(Math.abs(r) + 0.5))));
  }
}
type Rule = keyof typeof FMT.errors;
const PREAMBLE = FMT.preamble_bytes;
const { m: M_PREFIX, v: V_PREFIX } = FMT.optimizer_prefixes;

export interface Checkpoint {
  model: ModelConfig;
  /** All parameters, canonical order, f32. */
  params: Float32Array;
  m?: Float32Array;
  v?: Float32Array;
  step: number;
  /** Steps the Adam moments have seen, when fewer than `step` (training continued from a file without them). */
  adamStep?: number;
  train: TrainConfig | null;
  /** The run's own settings and training time, where the file records them (the app's saves do). */
  run?: RunRecord;
  history: HistoryPoint[];
  dataset: DatasetInfo | null;
  provenance: Record<string, unknown>;
  /** A LoRA adapter file: its settings; params, m and v then hold the adapter's tensors (adapterLayout) and model is its base's. */
  adapter?: AdapterInfo | null;
}

/** The weights a file holds, in canonical order: the model's, or an adapter's. */
const weightLayout = (model: ModelConfig, adapter?: AdapterInfo | null) => (adapter ? adapterLayout(model, adapter) : tensorLayout(model));

/** A checkpoint as read from a file: also the version it was read from and how its weights were stored. */
export interface ReadCheckpoint extends Checkpoint {
  version: number;
  dtype: Dtype;
}

export class CheckpointError extends Error {
  /** `rule` is its key in facts.json format.errors. */
  constructor(
    readonly rule: Rule,
    fields: Record<string, string | number> = {},
  ) {
    super(FMT.errors[rule].replace(/\{(\w+)\}/g, (_, key: string) => String(fields[key])));
    this.name = "CheckpointError";
  }
}

const fail = (rule: Rule, fields?: Record<string, string | number>): never => {
  throw new CheckpointError(rule, fields);
};

const alignUp = (n: number) => Math.ceil(n / FMT.data_alignment) * FMT.data_alignment;

type Json = Record<string, unknown>;
const isObject = (x: unknown): x is Json => typeof x === "object" && x !== null && !Array.isArray(x);
// Own fields only: a header's "toString" must not find Object.prototype's.
const get = (o: Json, key: string): unknown => (Object.hasOwn(o, key) ? o[key] : undefined);
/** An optional field: absent and null both mean "not given". */
const given = (o: Json, key: string): unknown => get(o, key) ?? undefined;
const first = (o: Json, keys: string[]): unknown => keys.map((k) => given(o, k)).find((x) => x !== undefined);

/** x when it is a whole number within [lo, hi] (JSON has one number type: 4.0 is 4), else null. */
function int(x: unknown, lo = 0, hi = Number.MAX_SAFE_INTEGER): number | null {
  return typeof x === "number" && Number.isInteger(x) && x >= lo && x <= hi ? x : null;
}

const isNumber = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);

/** At most max_history_points: every k-th point counting back from the newest, k as small as fits. */
export function thinHistory(points: readonly HistoryPoint[]): HistoryPoint[] {
  const n = points.length;
  const k = Math.ceil(n / FMT.max_history_points);
  return k <= 1 ? [...points] : points.filter((_, i) => (n - 1 - i) % k === 0);
}

// ---------------------------------------------------------------- writing

export interface WriteOptions {
  /** How to store the parameters: f32 (the default), f16, or q8 (int8 with a scale per column: gallery files). Adam moments stay f32. */
  dtype?: Dtype;
  producer: string;
  commit?: string;
}

interface Part {
  entry: { name: string; shape: number[]; dtype: Dtype; offset: number; nbytes: number };
  data: Float32Array;
}

/** Non-finite values first, over the whole tensor, then (second moments) negative ones, as the Python reader checks. */
function checkFinite(name: string, a: Float32Array, secondMoment: boolean): void {
  for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i])) fail("non_finite", { name });
  if (secondMoment) for (let i = 0; i < a.length; i++) if (a[i] < 0) fail("negative_moment", { name });
}

/**
 * The checkpoint as version-2 bytes. Refuses (CheckpointError) what a reader
 * would refuse: non-finite values (also f16 overflow), a header or file over
 * the format's limits. The history is thinned to max_history_points.
 */
export function writeCheckpoint(c: Checkpoint, opts: WriteOptions): Uint8Array {
  const layout = weightLayout(c.model, c.adapter);
  const withOpt = c.m !== undefined && c.v !== undefined;
  const parts: Part[] = [];
  let offset = 0;
  const add = (name: string, shape: number[], dtype: Dtype, data: Float32Array, secondMoment = false) => {
    checkFinite(name, data, secondMoment);
    const nbytes = storedBytes(dtype, shape);
    parts.push({ entry: { name, shape, dtype, offset, nbytes }, data });
    offset = alignUp(offset + nbytes);
  };
  const pdtype = opts.dtype ?? "f32";
  if (c.adapter && !FMT.adapter.dtypes.includes(pdtype)) throw new Error(`an adapter's weights are stored as ${FMT.adapter.dtypes.join(" or ")}, not ${pdtype}`);
  for (const t of layout) add(t.name, t.shape, pdtype, c.params.subarray(t.offset, t.offset + t.size));
  if (withOpt) {
    for (const t of layout) add(M_PREFIX + t.name, t.shape, "f32", c.m!.subarray(t.offset, t.offset + t.size));
    for (const t of layout) add(V_PREFIX + t.name, t.shape, "f32", c.v!.subarray(t.offset, t.offset + t.size), true);
  }
  c.history.forEach((h, index) => {
    if (!Number.isFinite(h.train) || (h.val !== undefined && !Number.isFinite(h.val))) fail("history_non_finite", { index });
  });
  const provenance: Record<string, unknown> = { ...c.provenance, created: new Date().toISOString(), producer: opts.producer };
  if (opts.commit) provenance.commit = opts.commit;
  if (c.dataset) provenance.corpus_sha256 = c.dataset.sha256;
  const header = {
    format: "tinygpt",
    version: FMT.version,
    config: Object.fromEntries(FMT.config_keys.map((k) => [k, c.model[k as keyof ModelConfig]])),
    tokenizer: { type: "bytes", vocab_size: c.model.vocab_size },
    ...(c.adapter ? { adapter: c.adapter } : {}),
    tensors: parts.map((p) => p.entry),
    trainer: c.train ? { step: c.step, ...(withOpt && c.adamStep !== undefined && c.adamStep !== c.step ? { adam_step: c.adamStep } : {}), config: c.train, ...(c.run ? { run: c.run } : {}) } : null,
    history: thinHistory(c.history).map((h) => (h.val === undefined ? { step: h.step, train: h.train } : { step: h.step, train: h.train, val: h.val })),
    dataset: c.dataset,
    provenance,
  };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const dataStart = alignUp(PREAMBLE + json.length);
  const last = parts[parts.length - 1].entry;
  const size = dataStart + last.offset + last.nbytes;
  if (json.length > FMT.max_header_bytes) fail("header_too_long", { length: json.length, max: FMT.max_header_bytes });
  if (size > FMT.max_file_bytes) fail("file_too_large", { size, max: FMT.max_file_bytes });
  const out = new Uint8Array(size);
  out.set(new TextEncoder().encode(FMT.magic), 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, FMT.version, true);
  view.setUint32(8, json.length, true);
  out.set(json, PREAMBLE);
  for (const { entry, data } of parts) {
    const at = dataStart + entry.offset;
    if (entry.dtype === "f32") {
      new Float32Array(out.buffer, at, data.length).set(data);
      continue;
    }
    if (entry.dtype === "q8") {
      quantizeQ8(data, entry.shape[entry.shape.length - 1], view, at);
      continue;
    }
    for (let i = 0; i < data.length; i++) {
      const h = floatToHalf(data[i]);
      if ((h & 0x7c00) === 0x7c00) fail("non_finite", { name: entry.name }); // beyond f16's range
      view.setUint16(at + 2 * i, h, true);
    }
  }
  planCheckpoint(out.subarray(0, PREAMBLE + json.length), size); // never write what a reader refuses
  return out;
}

// ---------------------------------------------------------------- reading, phase 1: the plan

export interface PlannedTensor {
  name: string;
  dtype: Dtype;
  /** Byte offset in the file. */
  at: number;
  count: number;
}

/** What a checked header promises: everything but the tensors' values, and where those lie. */
export interface Plan extends Omit<ReadCheckpoint, "params" | "m" | "v"> {
  /** Weights, then (with `moments`) Adam m and v, each in canonical order. */
  tensors: PlannedTensor[];
  moments: boolean;
  /** Version 1 keeps its step as an i32 in the data, here. */
  legacyStepAt?: number;
  /** The first byte phase 2 needs. */
  bodyStart: number;
}

/** The header's length, once the preamble (the file's first 12 bytes) and the file's size pass their checks. */
export function headerLength(preamble: Uint8Array, size: number): number {
  if (size < PREAMBLE || preamble.length < PREAMBLE) fail("file_too_short", { size });
  if (size > FMT.max_file_bytes) fail("file_too_large", { size, max: FMT.max_file_bytes });
  if (String.fromCharCode(...preamble.subarray(0, 4)) !== FMT.magic) fail("magic");
  const view = new DataView(preamble.buffer, preamble.byteOffset, PREAMBLE);
  const version = view.getUint32(4, true);
  const length = view.getUint32(8, true);
  if (version !== FMT.version && version !== FMT.legacy_version) fail("version", { version });
  if (length > FMT.max_header_bytes) fail("header_too_long", { length, max: FMT.max_header_bytes });
  if (PREAMBLE + length > size) fail("header_truncated", { length, left: size - PREAMBLE });
  return length;
}

/** Deepest nesting of [ and { outside strings, counted on the raw text whether or not it parses. */
function jsonDepth(raw: Uint8Array): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) max = Math.max(max, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

function holdsInfinity(value: unknown): boolean {
  const stack = [value];
  while (stack.length) {
    const x = stack.pop();
    if (typeof x === "number" && !Number.isFinite(x)) return true;
    if (typeof x === "object" && x !== null) for (const y of Object.values(x)) stack.push(y); // no spread: arrays may hold 10^5 items
  }
  return false;
}

function parseHeader(raw: Uint8Array): Json {
  let text: string;
  try {
    // ignoreBOM keeps a byte-order mark, which JSON (and so the Python reader) refuses.
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(raw);
  } catch {
    return fail("header_utf8");
  }
  if (jsonDepth(raw) > FMT.max_json_depth) fail("header_depth", { max: FMT.max_json_depth });
  let header: unknown;
  try {
    header = JSON.parse(text);
  } catch (e) {
    return fail("header_json", { detail: (e as Error).message });
  }
  if (holdsInfinity(header)) fail("header_number");
  if (!isObject(header)) fail("header_object");
  return header as Json;
}

/**
 * Checks the preamble and the header (`head`: the file's first bytes, at least
 * preamble and header) against the file's size; reads no tensor data.
 */
export function planCheckpoint(head: Uint8Array, size: number): Plan {
  const length = headerLength(head.subarray(0, PREAMBLE), size);
  const header = parseHeader(head.subarray(PREAMBLE, PREAMBLE + length));
  const version = new DataView(head.buffer, head.byteOffset, PREAMBLE).getUint32(4, true);
  // The original playground also wrote its fp16 gallery files with version 2; their header has a manifest.
  const legacy = version === FMT.legacy_version || (given(header, "format") === undefined && given(header, "manifest") !== undefined);
  return legacy ? planLegacy(header, PREAMBLE + length, size) : planV2(header, PREAMBLE + length, size);
}

/** keys: our field name -> the name the file uses for it (the same in version 2). */
function modelFrom(cfg: Json, where: string, keys: Record<string, string>): ModelConfig {
  const m: Record<string, number> = {};
  for (const [ours, theirs] of Object.entries(keys)) {
    const value = int(get(cfg, theirs), 1, FMT.max_dim);
    m[ours] = value ?? fail("config_int", { where, key: theirs, max: FMT.max_dim });
  }
  if (m.vocab_size !== FACTS.vocab_size) fail("vocab", { where });
  if (m.n_embd % m.n_head !== 0) fail("heads", { where, n_embd: m.n_embd, n_head: m.n_head });
  return m as unknown as ModelConfig;
}

const weightCount = (m: ModelConfig) => FACTS.tensors.head.length + m.n_layer * FACTS.tensors.block.length;

const HEAD = new Map(FACTS.tensors.head.map((t) => [t.name, t.shape]));
const BLOCK = new Map(FACTS.tensors.block.map((t) => [t.name.split("{i}")[1], t.shape]));
const BLOCK_PREFIX = FACTS.tensors.block[0].name.split("{i}")[0];
const LAYER_AND_REST = /^(0|[1-9][0-9]{0,15})([\s\S]*)$/;

/**
 * The facts.tensors shape of a parameter name in a model of n_layer layers
 * (undefined: no such parameter), found without listing the layers, so a long
 * list of bogus entries costs nothing.
 */
function symbolsOf(name: string, nLayer: number): string[] | undefined {
  const head = HEAD.get(name);
  if (head) return head;
  const m = name.startsWith(BLOCK_PREFIX) ? LAYER_AND_REST.exec(name.slice(BLOCK_PREFIX.length)) : null;
  return m && Number(m[1]) < nLayer ? BLOCK.get(m[2]) : undefined;
}
/** header.adapter checked, in the order of its error rules (as tinygpt/checkpoint.py _adapter). */
function adapterFrom(raw: unknown): AdapterInfo | null {
  if (raw === null || raw === undefined) return null;
  if (!isObject(raw)) return fail("adapter_object");
  const rank = int(get(raw, "rank"), 1, LORA.max_rank) ?? fail("adapter_rank", { max: LORA.max_rank });
  const alpha = get(raw, "alpha");
  if (!(isNumber(alpha) && alpha > 0)) fail("adapter_alpha");
  const targets = get(raw, "targets");
  const known = (t: unknown): t is Projection => typeof t === "string" && Object.hasOwn(LORA.projections, t);
  if (!(Array.isArray(targets) && targets.length > 0 && targets.every(known) && new Set(targets).size === targets.length)) {
    fail("adapter_targets", { names: PROJECTIONS.join(", ") });
  }
  const base = get(raw, "base_sha256");
  if (!(typeof base === "string" && /^[0-9a-f]{64}$/.test(base))) fail("adapter_base");
  return { rank, alpha: alpha as number, targets: targets as Projection[], base_sha256: base as string };
}

const LORA_PARTS = new Map(Object.values(LORA.projections).flatMap((p) => ["a", "b"].map((part) => [`.${p}.lora_${part}`, { projection: p, part }])));

/** The shape of an adapter tensor name in this adapter (undefined: no such tensor), without listing the layers. */
function adapterShape(name: string, model: ModelConfig, adapter: AdapterInfo): number[] | undefined {
  const m = name.startsWith(BLOCK_PREFIX) ? LAYER_AND_REST.exec(name.slice(BLOCK_PREFIX.length)) : null;
  const found = m && Number(m[1]) < model.n_layer ? LORA_PARTS.get(m[2]) : undefined;
  if (!found || !adapter.targets.some((t) => LORA.projections[t] === found.projection)) return undefined;
  const [dIn, dOut] = projectionShape(model, found.projection);
  return found.part === "a" ? [dIn, adapter.rank] : [adapter.rank, dOut];
}

const shapeIs = (raw: unknown, shape: number[]) => Array.isArray(raw) && raw.length === shape.length && raw.every((d, i) => int(d) === shape[i]);
const shapeText = (shape: number[]) => `[${shape.join(", ")}]`;

function planV2(h: Json, headerEnd: number, size: number): Plan {
  if (get(h, "format") !== "tinygpt" || int(get(h, "version")) !== FMT.version) fail("format");
  const cfg = get(h, "config");
  if (!isObject(cfg)) return fail("config_object", { where: "header.config" });
  const model = modelFrom(cfg, "header.config", Object.fromEntries(FMT.config_keys.map((k) => [k, k])));
  const tok = get(h, "tokenizer");
  if (!(isObject(tok) && get(tok, "type") === "bytes" && int(get(tok, "vocab_size")) === FACTS.vocab_size)) fail("tokenizer");
  const adapter = adapterFrom(get(h, "adapter"));
  const entries = get(h, "tensors");
  if (!Array.isArray(entries)) return fail("tensors_list");
  const weights = adapter ? 2 * model.n_layer * adapter.targets.length : weightCount(model);
  if (entries.length !== weights && entries.length !== 3 * weights) {
    fail(adapter ? "adapter_count" : "tensor_count", { weights, all: 3 * weights, count: entries.length });
  }
  const moments = entries.length === 3 * weights;
  const groups = moments ? ["", M_PREFIX, V_PREFIX] : [""];

  const dataStart = alignUp(headerEnd);
  const found = new Map<string, PlannedTensor>();
  const spans: { offset: number; index: number; end: number; name: string }[] = [];
  let dtype: Dtype | null = null;
  entries.forEach((e: unknown, index: number) => {
    if (!isObject(e)) return fail("tensor_object", { index });
    const name = get(e, "name");
    const group = typeof name === "string" ? (groups.slice(1).find((g) => name.startsWith(g)) ?? "") : "";
    let shape: number[] | undefined;
    if (typeof name === "string" && adapter) shape = adapterShape(name.slice(group.length), model, adapter);
    else if (typeof name === "string") {
      const symbols = symbolsOf(name.slice(group.length), model.n_layer);
      shape = symbols && shapeOf(symbols, model);
    }
    if (typeof name !== "string" || !shape) return fail("tensor_name", { index });
    if (found.has(name)) fail("tensor_twice", { name });
    const allowed: string[] = group ? FMT.moment_dtypes : adapter ? FMT.adapter.dtypes : Object.keys(FMT.dtypes);
    if (!shapeIs(get(e, "shape"), shape)) fail("tensor_shape", { name, shape: shapeText(shape) });
    const dt = get(e, "dtype");
    if (typeof dt !== "string" || !allowed.includes(dt)) fail("tensor_dtype", { name, allowed: allowed.join(" or ") });
    if (!name.startsWith(M_PREFIX) && !name.startsWith(V_PREFIX)) {
      if (dtype !== null && dtype !== dt) fail("tensor_mixed", { name, dtype });
      dtype = dt as Dtype;
    }
    const offset = int(get(e, "offset"));
    if (offset === null || offset % FMT.data_alignment !== 0) return fail("tensor_offset", { name });
    const count = shape.reduce((a, b) => a * b, 1);
    const nbytes = storedBytes(dt as Dtype, shape);
    if (int(get(e, "nbytes")) !== nbytes) fail("tensor_nbytes", { name, nbytes });
    const start = dataStart + offset;
    if (start + nbytes > size) fail("tensor_beyond", { name, start, end: start + nbytes, size });
    found.set(name, { name, dtype: dt as Dtype, at: start, count });
    spans.push({ offset, index, end: offset + nbytes, name });
  });
  spans.sort((a, b) => a.offset - b.offset || a.index - b.index);
  for (let i = 1; i < spans.length; i++) if (spans[i].offset < spans[i - 1].end) fail("tensor_overlap", { a: spans[i - 1].name, b: spans[i].name });

  const { step, adamStep, train, run } = trainerFrom(get(h, "trainer"), moments);
  // Every entry is now known to hold real bytes of the file, so listing the layers costs what the file does.
  const layout = weightLayout(model, adapter);
  return {
    version: FMT.version,
    model,
    adapter,
    dtype: dtype!,
    tensors: groups.flatMap((prefix) => layout.map((t) => found.get(prefix + t.name)!)),
    moments,
    step,
    ...(adamStep !== undefined ? { adamStep } : {}),
    train,
    ...(run ? { run } : {}),
    history: historyFrom(get(h, "history"), "header.history", { train: ["train"], val: ["val"] }),
    dataset: datasetFrom(get(h, "dataset")),
    provenance: provenanceFrom(get(h, "provenance")),
    bodyStart: dataStart,
  };
}

type Range = { integer?: boolean; min?: number; max?: number; above?: number; below?: number };

/** A trainer_config range in words, for its error message. */
function ruleText(r: Range): string {
  const words: [keyof Range, string][] = [["min", "at least"], ["above", "above"], ["max", "at most"], ["below", "below"]];
  const bounds = words.filter(([k]) => k in r).map(([k, w]) => `${w} ${r[k]}`);
  return (r.integer ? "an integer" : "a number") + (bounds.length ? " " + bounds.join(" and ") : "");
}

function inRange(x: unknown, r: Range): boolean {
  if (!isNumber(x) || (r.integer && int(x, -Number.MAX_SAFE_INTEGER) === null)) return false;
  return x >= (r.min ?? -Infinity) && x <= (r.max ?? Infinity) && x > (r.above ?? -Infinity) && x < (r.below ?? Infinity);
}

/** The fields of a facts range table (trainer_config, run_settings), each checked in the table's order. */
function ranged(raw: Json, table: Record<string, unknown>, rule: Rule): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, bounds] of Object.entries(table) as [string, Range][]) {
    if (key.startsWith("_")) continue;
    const x = get(raw, key);
    if (!inRange(x, bounds)) fail(rule, { key, range: ruleText(bounds) });
    out[key] = x as number;
  }
  return out;
}

function trainerFrom(raw: unknown, moments: boolean): { step: number; adamStep?: number; train: TrainConfig | null; run?: RunRecord } {
  if (raw === undefined || raw === null) return { step: 0, train: null };
  const step = isObject(raw) ? int(get(raw, "step")) : null;
  if (step === null) return fail("trainer");
  const t = raw as Json;
  let adamStep: number | undefined;
  if (given(t, "adam_step") !== undefined) {
    adamStep = int(get(t, "adam_step"), 0, step) ?? fail("adam_step", { step });
    if (!moments) fail("adam_step_moments");
  }
  const tc = get(t, "config");
  if (!isObject(tc)) return fail("train_config");
  const train = ranged(tc, FMT.trainer_config, "train_key") as unknown as TrainConfig;
  const run = given(t, "run");
  if (run !== undefined && !isObject(run)) fail("run_object");
  return { step, ...(adamStep !== undefined ? { adamStep } : {}), train, ...(run !== undefined ? { run: ranged(run as Json, FMT.run_settings, "run_key") as unknown as RunRecord } : {}) };
}

/** aliases: the file's names for the train and val losses. */
function historyFrom(points: unknown, where: string, aliases: { train: string[]; val: string[] }): HistoryPoint[] {
  if (points === undefined || points === null) return [];
  if (!Array.isArray(points)) return fail("history_list", { where });
  return points.map((p: unknown, index: number) => {
    const step = isObject(p) ? int(get(p, "step")) : null;
    const train = step !== null ? first(p as Json, aliases.train) : undefined;
    const val = step !== null ? first(p as Json, aliases.val) : undefined;
    if (!(isNumber(train) && (val === undefined || isNumber(val)))) fail("history_point", { where, index });
    return val === undefined ? { step: step!, train: train as number } : { step: step!, train: train as number, val: val as number };
  });
}

function datasetFrom(d: unknown): DatasetInfo | null {
  if (d === undefined || d === null) return null;
  const sha = isObject(d) ? get(d, "sha256") : undefined;
  if (!(isObject(d) && typeof get(d, "name") === "string" && int(get(d, "bytes")) !== null && typeof sha === "string" && /^[0-9a-f]{64}$/.test(sha))) return fail("dataset");
  return { name: get(d, "name") as string, bytes: get(d, "bytes") as number, sha256: get(d, "sha256") as string };
}

function provenanceFrom(p: unknown): Record<string, unknown> {
  if (p === undefined || p === null) return {};
  if (!isObject(p)) return fail("provenance");
  return p;
}

function planLegacy(h: Json, headerEnd: number, size: number): Plan {
  const cfg = get(h, "config");
  if (!isObject(cfg)) return fail("legacy_config");
  const aliases = FMT.legacy.config_aliases as Record<string, string[]>;
  const keys = Object.fromEntries(Object.entries(aliases).map(([ours, names]) => [ours, names.find((k) => given(cfg, k) !== undefined) ?? names[0]]));
  // The playground's models were all byte-level.
  const withVocab = given(cfg, keys.vocab_size) === undefined ? { ...cfg, [keys.vocab_size]: FACTS.vocab_size } : cfg;
  const model = modelFrom(withVocab, "legacy header.config", keys);
  if (given(cfg, "dMlp") !== undefined && int(get(cfg, "dMlp")) !== 4 * model.n_embd) fail("legacy_dmlp", { d_mlp: 4 * model.n_embd });
  const manifest = get(h, "manifest");
  if (!Array.isArray(manifest)) return fail("legacy_manifest");
  const weights = weightCount(model);
  if (manifest.length !== weights) fail("legacy_count", { weights, count: manifest.length });
  const named = given(h, "weightDtype");
  const dtypes = FMT.legacy.weight_dtypes as Record<string, Dtype>;
  const dtype = named === undefined ? "f32" : typeof named === "string" && Object.hasOwn(dtypes, named) ? dtypes[named] : fail("legacy_dtype");
  const flag = given(h, "includesOptimizerState") ?? true;
  if (typeof flag !== "boolean") fail("legacy_flag");
  const triplets = flag === true && dtype === "f32"; // the fp16 layout never carries Adam state
  const body = headerEnd + 4; // an i32 step, then the tensors
  const item = FMT.dtypes[dtype];
  const expected = body + paramCount(model) * (triplets ? 3 * item : item);
  if (size !== expected) fail("legacy_length", { size, expected });
  const layout = tensorLayout(model); // the file is now known to be as large as the layers

  const tensors: PlannedTensor[] = [];
  const m: PlannedTensor[] = [];
  const v: PlannedTensor[] = [];
  layout.forEach((t, index) => {
    const e: unknown = manifest[index];
    if (!isObject(e) || get(e, "name") !== t.name) fail("legacy_entry", { index, name: t.name });
    const entry = e as Json;
    // Its manifest lists fc_in as [d_mlp, C] although the data is [C, d_mlp] (input-major): either order.
    if (!shapeIs(get(entry, "shape"), t.shape) && !shapeIs(get(entry, "shape"), [...t.shape].reverse())) fail("tensor_shape", { name: t.name, shape: shapeText(t.shape) });
    if (given(entry, "floatOffset") !== undefined && int(get(entry, "floatOffset")) !== t.offset) fail("legacy_offset", { name: t.name, offset: t.offset });
    if (triplets) {
      const at = body + 12 * t.offset;
      tensors.push({ name: t.name, dtype, at, count: t.size });
      m.push({ name: M_PREFIX + t.name, dtype, at: at + 4 * t.size, count: t.size });
      v.push({ name: V_PREFIX + t.name, dtype, at: at + 8 * t.size, count: t.size });
    } else tensors.push({ name: t.name, dtype, at: body + item * t.offset, count: t.size });
  });
  const history = historyFrom(get(h, "lossHistory"), "legacy header.lossHistory", FMT.legacy.history_aliases);
  const savedAt = get(h, "savedAt");
  return {
    version: FMT.legacy_version,
    model,
    dtype,
    tensors: [...tensors, ...m, ...v],
    moments: triplets,
    step: 0,
    train: null,
    history,
    dataset: null,
    provenance: { producer: FMT.legacy.producer, ...(typeof savedAt === "string" ? { created: savedAt } : {}) },
    legacyStepAt: headerEnd,
    bodyStart: headerEnd,
  };
}

// ---------------------------------------------------------------- reading, phase 2: the data

/** The tensors of a checked plan, from `body` (the file's bytes from `bodyOffset` on). */
export function decodeCheckpoint(plan: Plan, body: Uint8Array, bodyOffset: number): ReadCheckpoint {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  let step = plan.step;
  if (plan.legacyStepAt !== undefined) {
    step = view.getInt32(plan.legacyStepAt - bodyOffset, true);
    if (step < 0) fail("legacy_step", { step });
  }
  const layout = weightLayout(plan.model, plan.adapter);
  const total = layout.reduce((a, t) => a + t.size, 0);
  const arrays = Array.from({ length: plan.tensors.length / layout.length }, () => new Float32Array(total));
  plan.tensors.forEach((t, i) => {
    const { offset, shape } = layout[i % layout.length];
    const slice = arrays[Math.floor(i / layout.length)].subarray(offset, offset + t.count);
    const at = t.at - bodyOffset;
    // A byte copy reads f32 as little-endian, which every host that runs JavaScript is.
    if (t.dtype === "f32") new Uint8Array(slice.buffer, slice.byteOffset, slice.byteLength).set(body.subarray(at, at + 4 * t.count));
    else if (t.dtype === "f16") for (let j = 0; j < t.count; j++) slice[j] = halfToFloat(view.getUint16(at + 2 * j, true));
    else {
      const cols = shape[shape.length - 1];
      const base = at + Q8.scale_bytes * cols;
      for (let j = 0; j < t.count; j++) slice[j] = Math.fround(view.getInt8(base + j) * view.getFloat32(at + Q8.scale_bytes * (j % cols), true));
    }
    checkFinite(t.name, slice, t.name.startsWith(V_PREFIX));
  });
  const [params, m, v] = arrays;
  const { tensors: _t, moments: _m, legacyStepAt: _s, bodyStart: _b, ...fields } = plan;
  return { ...fields, params, m, v, step };
}

/** The plan of a file not yet read (a File or Blob): only its preamble and header are read. */
export async function planBlob(blob: Blob): Promise<Plan> {
  const preamble = new Uint8Array(await blob.slice(0, PREAMBLE).arrayBuffer());
  const head = blob.slice(0, PREAMBLE + headerLength(preamble, blob.size));
  return planCheckpoint(new Uint8Array(await head.arrayBuffer()), blob.size);
}

export function readCheckpoint(bytes: Uint8Array): ReadCheckpoint {
  const length = headerLength(bytes.subarray(0, PREAMBLE), bytes.length);
  return decodeCheckpoint(planCheckpoint(bytes.subarray(0, PREAMBLE + length), bytes.length), bytes, 0);
}
