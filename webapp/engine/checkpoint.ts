// The .tinygpt file: version 2 read/write, version 1 (the original playground's
// export) read. Every check runs against the real file size before anything
// the header claims is allocated; each failure names the problem.

import type { DatasetInfo, HistoryPoint, ModelConfig, TrainConfig } from "./types";
import { FACTS, checkModelConfig, tensorLayout } from "./model";
import { floatToHalf, halfToFloat } from "./f16";

const FMT = FACTS.format;
const PREFIX_BYTES = 12;

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
  history: HistoryPoint[];
  dataset: DatasetInfo | null;
  provenance: Record<string, unknown>;
}

export class CheckpointError extends Error {
  constructor(message: string) {
    super(`not a usable .tinygpt file: ${message}`);
    this.name = "CheckpointError";
  }
}

interface TensorEntry {
  name: string;
  shape: number[];
  dtype: "f32" | "f16";
  offset: number;
  nbytes: number;
}

const alignUp = (n: number, a: number) => Math.ceil(n / a) * a;

// ---------------------------------------------------------------- writing

export interface WriteOptions {
  /** Store parameters as f16 (smaller gallery files); Adam moments stay f32. */
  f16?: boolean;
  producer: string;
  commit?: string;
}

export function writeCheckpoint(c: Checkpoint, opts: WriteOptions): Uint8Array {
  const layout = tensorLayout(c.model);
  const withOpt = c.m !== undefined && c.v !== undefined;
  const parts: { entry: TensorEntry; data: Float32Array }[] = [];
  let offset = 0;
  const add = (name: string, shape: number[], dtype: "f32" | "f16", data: Float32Array) => {
    const nbytes = data.length * (dtype === "f16" ? 2 : 4);
    parts.push({ entry: { name, shape, dtype, offset, nbytes }, data });
    offset = alignUp(offset + nbytes, FMT.data_alignment);
  };
  const pdtype = opts.f16 ? "f16" : "f32";
  for (const t of layout) add(t.name, t.shape, pdtype, c.params.subarray(t.offset, t.offset + t.size));
  if (withOpt) {
    for (const t of layout) add(FMT.optimizer_prefixes.m + t.name, t.shape, "f32", c.m!.subarray(t.offset, t.offset + t.size));
    for (const t of layout) add(FMT.optimizer_prefixes.v + t.name, t.shape, "f32", c.v!.subarray(t.offset, t.offset + t.size));
  }
  const provenance: Record<string, unknown> = { ...c.provenance, created: new Date().toISOString(), producer: opts.producer };
  if (opts.commit) provenance.commit = opts.commit;
  if (c.dataset) provenance.corpus_sha256 = c.dataset.sha256;
  const header = {
    format: "tinygpt",
    version: FMT.version,
    config: { vocab_size: c.model.vocab_size, n_layer: c.model.n_layer, n_embd: c.model.n_embd, n_head: c.model.n_head, block_size: c.model.block_size },
    tokenizer: { type: "bytes", vocab_size: c.model.vocab_size },
    tensors: parts.map((p) => p.entry),
    trainer: c.train ? { step: c.step, ...(withOpt && c.adamStep !== undefined && c.adamStep !== c.step ? { adam_step: c.adamStep } : {}), config: c.train } : null,
    history: c.history.map((h) => (h.val === undefined ? { step: h.step, train: h.train } : { step: h.step, train: h.train, val: h.val })),
    dataset: c.dataset,
    provenance,
  };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const dataStart = alignUp(PREFIX_BYTES + json.length, FMT.data_alignment);
  const last = parts[parts.length - 1].entry;
  const out = new Uint8Array(dataStart + last.offset + last.nbytes);
  out.set(new TextEncoder().encode(FMT.magic), 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, FMT.version, true);
  view.setUint32(8, json.length, true);
  out.set(json, PREFIX_BYTES);
  for (const { entry, data } of parts) {
    const at = dataStart + entry.offset;
    if (entry.dtype === "f32") new Float32Array(out.buffer, at, data.length).set(data);
    else for (let i = 0; i < data.length; i++) view.setUint16(at + 2 * i, floatToHalf(data[i]), true);
  }
  return out;
}

// ---------------------------------------------------------------- reading

export function readCheckpoint(bytes: Uint8Array): Checkpoint {
  if (bytes.length < PREFIX_BYTES) throw new CheckpointError(`the file is ${bytes.length} bytes, shorter than the ${PREFIX_BYTES}-byte prefix`);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== FMT.magic) throw new CheckpointError(`magic is ${JSON.stringify(magic)}, expected ${JSON.stringify(FMT.magic)}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint32(4, true);
  const headerLen = view.getUint32(8, true);
  if (version !== FMT.version && version !== FMT.legacy_version) throw new CheckpointError(`unsupported version ${version} (this app reads ${FMT.legacy_version} and ${FMT.version})`);
  if (headerLen > FMT.max_header_bytes) throw new CheckpointError(`header length ${headerLen} exceeds the limit of ${FMT.max_header_bytes} bytes`);
  if (PREFIX_BYTES + headerLen > bytes.length) throw new CheckpointError(`header claims ${headerLen} bytes but the file has only ${bytes.length - PREFIX_BYTES} after the prefix (truncated?)`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(PREFIX_BYTES, PREFIX_BYTES + headerLen)));
  } catch (e) {
    throw new CheckpointError(`header is not valid UTF-8 JSON (${(e as Error).message})`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) throw new CheckpointError("header is not a JSON object");
  const h = header as Record<string, unknown>;
  // The original playground also wrote version 2 files with its own (manifest) header.
  const legacy = version === FMT.legacy_version || (Array.isArray(h.manifest) && h.format === undefined);
  return legacy ? readV1(bytes, view, h, headerLen) : readV2(bytes, view, h, headerLen);
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function modelFrom(cfg: unknown, where: string): ModelConfig {
  if (!isObject(cfg)) throw new CheckpointError(`${where} is missing or not an object`);
  const m = { vocab_size: cfg.vocab_size, n_layer: cfg.n_layer, n_embd: cfg.n_embd, n_head: cfg.n_head, block_size: cfg.block_size } as ModelConfig;
  try {
    checkModelConfig(m);
  } catch (e) {
    throw new CheckpointError(`${where}: ${(e as Error).message}`);
  }
  return m;
}

function shapeEq(a: number[], b: number[]): boolean {
  return Array.isArray(a) && a.length === b.length && a.every((x, i) => x === b[i]);
}

function readV2(bytes: Uint8Array, view: DataView, h: Record<string, unknown>, headerLen: number): Checkpoint {
  if (h.format !== "tinygpt") throw new CheckpointError(`header.format is ${JSON.stringify(h.format)}, expected "tinygpt"`);
  if (h.version !== FMT.version) throw new CheckpointError(`header.version ${JSON.stringify(h.version)} disagrees with the prefix version ${FMT.version}`);
  const model = modelFrom(h.config, "header.config");
  if (isObject(h.tokenizer) && (h.tokenizer.type !== "bytes" || h.tokenizer.vocab_size !== model.vocab_size)) throw new CheckpointError(`tokenizer ${JSON.stringify(h.tokenizer)} is not the byte tokenizer this app uses`);
  if (!Array.isArray(h.tensors)) throw new CheckpointError("header.tensors is missing or not a list");
  const dataStart = alignUp(PREFIX_BYTES + headerLen, FMT.data_alignment);
  const dataBytes = bytes.length - dataStart;
  const entries = new Map<string, TensorEntry>();
  h.tensors.forEach((raw: unknown, i: number) => {
    const where = `tensor #${i}`;
    if (!isObject(raw) || typeof raw.name !== "string") throw new CheckpointError(`${where} has no name`);
    const name = raw.name;
    const at = `tensor ${JSON.stringify(name)}`;
    if (entries.has(name)) throw new CheckpointError(`${at} appears twice`);
    if (raw.dtype !== "f32" && raw.dtype !== "f16") throw new CheckpointError(`${at} has unknown dtype ${JSON.stringify(raw.dtype)} (f32 or f16)`);
    if (!Array.isArray(raw.shape) || !raw.shape.every((d: unknown) => Number.isInteger(d) && (d as number) >= 0)) throw new CheckpointError(`${at} has a malformed shape ${JSON.stringify(raw.shape)}`);
    const shape = raw.shape as number[];
    const { offset, nbytes } = raw;
    if (!Number.isSafeInteger(offset) || (offset as number) < 0 || (offset as number) % FMT.data_alignment !== 0) throw new CheckpointError(`${at} offset ${JSON.stringify(offset)} is not a non-negative multiple of ${FMT.data_alignment}`);
    const expectBytes = shape.reduce((a, b) => a * b, 1) * (raw.dtype === "f16" ? 2 : 4);
    if (nbytes !== expectBytes) throw new CheckpointError(`${at} nbytes ${JSON.stringify(nbytes)} disagrees with shape ${JSON.stringify(shape)} and dtype ${raw.dtype} (${expectBytes})`);
    if ((offset as number) + expectBytes > dataBytes) throw new CheckpointError(`${at} ends at data byte ${(offset as number) + expectBytes}, past the end of the file's ${dataBytes} data bytes (truncated?)`);
    entries.set(name, { name, shape, dtype: raw.dtype, offset: offset as number, nbytes: expectBytes });
  });
  const sorted = [...entries.values()].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1];
    if (prev.offset + prev.nbytes > sorted[i].offset) throw new CheckpointError(`tensors ${JSON.stringify(prev.name)} and ${JSON.stringify(sorted[i].name)} overlap`);
  }
  const layout = tensorLayout(model);
  const known = new Set<string>();
  const hasM = entries.has(FMT.optimizer_prefixes.m + layout[0].name);
  const hasV = entries.has(FMT.optimizer_prefixes.v + layout[0].name);
  const groups: [string, boolean][] = [["", true], [FMT.optimizer_prefixes.m, hasM], [FMT.optimizer_prefixes.v, hasV]];
  for (const [prefix, present] of groups) if (present) for (const t of layout) known.add(prefix + t.name);
  for (const name of entries.keys()) if (!known.has(name)) throw new CheckpointError(`unexpected tensor ${JSON.stringify(name)} for a ${model.n_layer}-layer model`);
  const total = layout.reduce((a, t) => a + t.size, 0);
  const gather = (prefix: string) => {
    const out = new Float32Array(total);
    for (const t of layout) {
      const e = entries.get(prefix + t.name);
      if (!e) throw new CheckpointError(`tensor ${JSON.stringify(prefix + t.name)} is missing`);
      if (!shapeEq(e.shape, t.shape)) throw new CheckpointError(`tensor ${JSON.stringify(e.name)} has shape ${JSON.stringify(e.shape)}, the config implies ${JSON.stringify(t.shape)}`);
      decodeInto(out, t.offset, view, dataStart + e.offset, t.size, e.dtype);
    }
    return out;
  };
  const params = gather("");
  const m = hasM ? gather(FMT.optimizer_prefixes.m) : undefined;
  const v = hasV ? gather(FMT.optimizer_prefixes.v) : undefined;
  if ((m === undefined) !== (v === undefined)) throw new CheckpointError("Adam moments are incomplete: one of m, v is present without the other");
  let step = 0;
  let adamStep: number | undefined;
  let train: TrainConfig | null = null;
  if (isObject(h.trainer)) {
    if (!Number.isInteger(h.trainer.step) || (h.trainer.step as number) < 0) throw new CheckpointError(`trainer.step ${JSON.stringify(h.trainer.step)} is not a non-negative integer`);
    step = h.trainer.step as number;
    if (h.trainer.adam_step !== undefined) {
      const a = h.trainer.adam_step;
      if (!Number.isInteger(a) || (a as number) < 0 || (a as number) > step) throw new CheckpointError(`trainer.adam_step ${JSON.stringify(a)} is not an integer between 0 and step ${step}`);
      if (!m) throw new CheckpointError("trainer.adam_step is set but the file has no Adam moments");
      adamStep = a as number;
    }
    train = trainConfigFrom(h.trainer.config);
  }
  return { model, params, m, v, step, ...(adamStep !== undefined ? { adamStep } : {}), train, history: historyFrom(h.history), dataset: datasetFrom(h.dataset), provenance: isObject(h.provenance) ? h.provenance : {} };
}

function decodeInto(out: Float32Array, at: number, view: DataView, byteAt: number, n: number, dtype: "f32" | "f16"): void {
  if (dtype === "f32") for (let i = 0; i < n; i++) out[at + i] = view.getFloat32(byteAt + 4 * i, true);
  else for (let i = 0; i < n; i++) out[at + i] = halfToFloat(view.getUint16(byteAt + 2 * i, true));
}

function trainConfigFrom(raw: unknown): TrainConfig {
  if (!isObject(raw)) throw new CheckpointError("trainer.config is missing or not an object");
  const keys = ["batch_size", "lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip", "warmup_steps", "seed"] as const;
  const out = {} as Record<string, number>;
  for (const k of keys) {
    if (typeof raw[k] !== "number" || !Number.isFinite(raw[k])) throw new CheckpointError(`trainer.config.${k} is ${JSON.stringify(raw[k])}, not a finite number`);
    out[k] = raw[k] as number;
  }
  if (!Number.isInteger(out.batch_size) || out.batch_size <= 0) throw new CheckpointError(`trainer.config.batch_size ${out.batch_size} is not a positive integer`);
  return out as unknown as TrainConfig;
}

function historyFrom(raw: unknown): HistoryPoint[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new CheckpointError("history is not a list");
  return raw.map((p: unknown, i: number) => {
    if (!isObject(p) || typeof p.step !== "number" || typeof p.train !== "number") throw new CheckpointError(`history[${i}] is not {step, train, val?}`);
    return typeof p.val === "number" ? { step: p.step, train: p.train, val: p.val } : { step: p.step, train: p.train };
  });
}

function datasetFrom(raw: unknown): DatasetInfo | null {
  if (raw === undefined || raw === null) return null;
  if (!isObject(raw) || typeof raw.name !== "string" || typeof raw.bytes !== "number" || typeof raw.sha256 !== "string") throw new CheckpointError("dataset is not {name, bytes, sha256}");
  return { name: raw.name, bytes: raw.bytes, sha256: raw.sha256 };
}

// Version 1: {config, manifest: [{name, shape, floatOffset}], weightDtype?,
// includesOptimizerState?, lossHistory?} then an int32 step, then either f32
// [w, m, v] triplets per tensor or all weights contiguous (f16 when weightDtype
// is "fp16", or f32 without optimizer state).
function readV1(bytes: Uint8Array, view: DataView, h: Record<string, unknown>, headerLen: number): Checkpoint {
  const cfg = h.config;
  if (!isObject(cfg)) throw new CheckpointError("version 1 header has no config object");
  const pick = (...keys: string[]) => keys.map((k) => cfg[k]).find((x) => x !== undefined);
  const model = modelFrom(
    { vocab_size: pick("vocabSize") ?? FACTS.vocab_size, n_layer: pick("layers", "nLayers"), n_embd: pick("dModel"), n_head: pick("heads", "nHeads"), block_size: pick("ctx", "contextLength") },
    "version 1 header.config",
  );
  const dMlp = pick("dMlp");
  if (dMlp !== undefined && dMlp !== 4 * model.n_embd) throw new CheckpointError(`version 1 dMlp ${JSON.stringify(dMlp)} is not 4 x dModel; this app's MLP is 4x`);
  const manifest = h.manifest;
  if (!Array.isArray(manifest)) throw new CheckpointError("version 1 header has no manifest list");
  const layout = tensorLayout(model);
  if (manifest.length !== layout.length) throw new CheckpointError(`version 1 manifest lists ${manifest.length} tensors, the config implies ${layout.length}`);
  const fp16 = h.weightDtype === "fp16";
  if (h.weightDtype !== undefined && h.weightDtype !== "fp16" && h.weightDtype !== "fp32") throw new CheckpointError(`version 1 weightDtype ${JSON.stringify(h.weightDtype)} is unknown (fp32 or fp16)`);
  const triplets = !fp16 && h.includesOptimizerState !== false;
  layout.forEach((t, i) => {
    const e: unknown = manifest[i];
    if (!isObject(e) || e.name !== t.name) throw new CheckpointError(`version 1 manifest entry ${i} is ${JSON.stringify(isObject(e) ? e.name : e)}, expected ${JSON.stringify(t.name)}`);
    // Its manifest lists fc_in as [d_mlp, C] though the data is [C, d_mlp]: either order is accepted.
    if (!shapeEq(e.shape as number[], t.shape) && !shapeEq(e.shape as number[], [...t.shape].reverse())) throw new CheckpointError(`version 1 tensor ${JSON.stringify(t.name)} has shape ${JSON.stringify(e.shape)}, the config implies ${JSON.stringify(t.shape)}`);
    if (e.floatOffset !== undefined && e.floatOffset !== t.offset) throw new CheckpointError(`version 1 tensor ${JSON.stringify(t.name)} floatOffset ${JSON.stringify(e.floatOffset)}, expected ${t.offset}`);
  });
  const total = layout.reduce((a, t) => a + t.size, 0);
  const stepAt = PREFIX_BYTES + headerLen;
  const bodyAt = stepAt + 4;
  const need = total * (fp16 ? 2 : triplets ? 12 : 4);
  if (bodyAt + need !== bytes.length) throw new CheckpointError(`version 1 file is ${bytes.length} bytes; its config and layout (${fp16 ? "fp16" : "fp32"}${triplets ? " with optimizer state" : ""}) imply ${bodyAt + need}`);
  const step = view.getInt32(stepAt, true);
  if (step < 0) throw new CheckpointError(`version 1 step ${step} is negative`);
  const params = new Float32Array(total);
  let m: Float32Array | undefined;
  let v: Float32Array | undefined;
  if (triplets) {
    m = new Float32Array(total);
    v = new Float32Array(total);
    for (const t of layout) {
      const at = bodyAt + 12 * t.offset;
      decodeInto(params, t.offset, view, at, t.size, "f32");
      decodeInto(m, t.offset, view, at + 4 * t.size, t.size, "f32");
      decodeInto(v, t.offset, view, at + 8 * t.size, t.size, "f32");
    }
  } else decodeInto(params, 0, view, bodyAt, total, fp16 ? "f16" : "f32");
  const history: HistoryPoint[] = [];
  for (const p of Array.isArray(h.lossHistory) ? h.lossHistory : []) {
    if (!isObject(p) || !Number.isInteger(p.step)) continue;
    const train = p.train ?? p.trainLoss;
    const val = p.val ?? p.valLoss;
    if (typeof train !== "number" || !Number.isFinite(train)) continue;
    history.push(typeof val === "number" && Number.isFinite(val) ? { step: p.step as number, train, val } : { step: p.step as number, train });
  }
  return { model, params, m, v, step, train: null, history, dataset: null, provenance: { producer: "tinygpt playground (version 1 file)" } };
}
