// Checkpoints and corpora in the origin-private file system (OPFS).
//
// A run is runs/<id>.tinygpt (the checkpoint) and runs/<id>.json (its record:
// what the list shows, and the checkpoint's byte length), written under a Web
// Lock named after the run, so two tabs never write the same files.
//
// A save never replaces a good checkpoint with a bad one: the checkpoint and
// then the record go to temporary files, every write and each file's final
// size are checked, and only then are they moved into place, checkpoint first.
// A full disk or a crash before the moves leaves the previous save whole; a
// crash between the two moves is finished by `recover` at the next start. A
// record whose byte length is not its checkpoint's is never listed or opened.
//
// A temporary file's name starts with the id of the run that writes it
// (runs/<id>.tinygpt.tmp, runs/<id>.json.tmp, corpora/<id>.<sha256>.tmp), so
// `recover` knows whose lock must be free before it may touch the file.
//
// A fine-tuning run's checkpoints are its adapter's; the frozen model under it is
// kept once in bases/, named by the sha256 of its weights, as its adapter names it.
// A text or base no saved run names goes after a delete (`collect`).
import type { ModelConfig } from "../engine/types";
import type { CheckpointInfo } from "./protocol";

export interface RunMeta {
  id: string;
  step: number;
  model: ModelConfig;
  dataset: { name: string; bytes: number; sha256: string } | null;
  /** A fine-tuning run's base: the sha256 of its weights (bases/ keeps it by that) and what the user called it. */
  base?: { sha256: string; name: string } | null;
  bytes: number;
  savedAt: string;
}

export class StorageFullError extends Error {
  constructor() {
    super("the browser's storage for this site is full");
    this.name = "StorageFullError";
  }
}

const RUNS = "runs";
const CORPORA = "corpora";
const BASES = "bases";
const RUN_LOCK = "tinygpt-run-";
export const lockName = (id: string) => `${RUN_LOCK}${id}`;
// Held shared while a text or base is kept, exclusively while `collect` looks for those no run names.
const KEPT_LOCK = "tinygpt-kept";

async function dir(name: string): Promise<FileSystemDirectoryHandle> {
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(name, { create: true });
}

const entries = (folder: FileSystemDirectoryHandle) => folder as unknown as AsyncIterable<[string, FileSystemHandle]>;
const remove = (folder: FileSystemDirectoryHandle, name: string) => folder.removeEntry(name).catch(() => undefined);
const move = (handle: FileSystemFileHandle, name: string) => (handle as FileSystemFileHandle & { move(name: string): Promise<void> }).move(name);

/** A new temporary file holding exactly `bytes`; on any failure it is removed. */
async function writeTemp(folder: FileSystemDirectoryHandle, tmp: string, bytes: Uint8Array): Promise<FileSystemFileHandle> {
  try {
    const handle = await folder.getFileHandle(tmp, { create: true });
    const access = await handle.createSyncAccessHandle();
    try {
      access.truncate(0);
      // Out of quota, Chromium's write() stores part of the buffer and returns
      // 4294967288 instead of throwing: any count but the whole is a failure.
      if (access.write(bytes, { at: 0 }) !== bytes.length) throw new StorageFullError();
      access.flush();
      const size = access.getSize();
      if (size !== bytes.length) throw new Error(`${tmp} holds ${size} bytes after writing ${bytes.length}`);
    } finally {
      access.close();
    }
    return handle;
  } catch (e) {
    await remove(folder, tmp);
    throw e instanceof DOMException && e.name === "QuotaExceededError" ? new StorageFullError() : e;
  }
}

async function readFile(folder: FileSystemDirectoryHandle, name: string): Promise<Uint8Array> {
  const file = await (await folder.getFileHandle(name)).getFile();
  return new Uint8Array(await file.arrayBuffer());
}

async function size(folder: FileSystemDirectoryHandle, name: string): Promise<number> {
  return (await (await folder.getFileHandle(name)).getFile()).size;
}

export async function saveRun(meta: Omit<RunMeta, "bytes">, bytes: Uint8Array): Promise<void> {
  const folder = await dir(RUNS);
  const [ckptTmp, recordTmp] = [`${meta.id}.tinygpt.tmp`, `${meta.id}.json.tmp`];
  let record: FileSystemFileHandle;
  try {
    const ckpt = await writeTemp(folder, ckptTmp, bytes);
    record = await writeTemp(folder, recordTmp, new TextEncoder().encode(JSON.stringify({ ...meta, bytes: bytes.length })));
    await move(ckpt, `${meta.id}.tinygpt`);
  } catch (e) {
    // The record's first: left alone, it would tell `recover` the checkpoint had been moved.
    await remove(folder, recordTmp);
    await remove(folder, ckptTmp);
    throw e;
  }
  await move(record, `${meta.id}.json`);
}

export async function loadRun(id: string): Promise<{ meta: RunMeta; bytes: Uint8Array }> {
  const folder = await dir(RUNS);
  const meta = JSON.parse(new TextDecoder().decode(await readFile(folder, `${id}.json`))) as RunMeta;
  const bytes = await readFile(folder, `${id}.tinygpt`);
  if (bytes.length !== meta.bytes) throw new Error(`its checkpoint is ${bytes.length} bytes, but its record says ${meta.bytes}`);
  return { meta, bytes };
}

export async function deleteRun(id: string): Promise<void> {
  const folder = await dir(RUNS);
  for (const name of [`${id}.json`, `${id}.tinygpt`, `${id}.json.tmp`, `${id}.tinygpt.tmp`]) await remove(folder, name);
}

/** Saved runs, newest first; `busy` when another tab holds the run's lock. */
export async function listRuns(currentId: string | null): Promise<CheckpointInfo[]> {
  const folder = await dir(RUNS);
  const held = new Set(((await navigator.locks.query()).held ?? []).map((l) => l.name));
  const out: CheckpointInfo[] = [];
  for await (const [name, handle] of entries(folder)) {
    if (!name.endsWith(".json") || handle.kind !== "file") continue;
    try {
      const meta = JSON.parse(await (await (handle as FileSystemFileHandle).getFile()).text()) as RunMeta;
      if ((await size(folder, `${meta.id}.tinygpt`)) !== meta.bytes) continue;
      out.push({ id: meta.id, step: meta.step, model: meta.model, dataset: meta.dataset?.name ?? null, bytes: meta.bytes, savedAt: meta.savedAt,
        base: meta.base?.name ?? null, busy: meta.id !== currentId && held.has(lockName(meta.id)), current: meta.id === currentId });
    } catch {
      // A record cut short, or one not of the checkpoint beside it (another tab
      // between its two moves, or a crash there before `recover`): not offered.
    }
  }
  return out.sort((a, b) => b.savedAt.localeCompare(a.savedAt));
}

/**
 * Finishes or removes what a tab that crashed mid-save left behind. Only for
 * runs no tab holds: a held run's temporary files may be mid-write right now.
 */
export async function recover(): Promise<void> {
  const runs = await dir(RUNS);
  const temps = new Map<string, { folder: FileSystemDirectoryHandle; name: string }[]>();
  for (const folder of [runs, await dir(CORPORA), await dir(BASES)]) {
    for await (const [name, handle] of entries(folder)) {
      if (handle.kind !== "file" || !name.endsWith(".tmp")) continue;
      const id = name.slice(0, name.indexOf("."));
      temps.set(id, [...(temps.get(id) ?? []), { folder, name }]);
    }
  }
  for (const [id, files] of temps) {
    const lock = await holdRunLock(id);
    if (!lock.ok) continue;
    try {
      const names = new Set(files.map((f) => f.name));
      // A whole record without its checkpoint's temporary file: the checkpoint
      // was moved into place and the crash came before the record's move.
      if (names.has(`${id}.json.tmp`) && !names.has(`${id}.tinygpt.tmp`)) {
        await move(await runs.getFileHandle(`${id}.json.tmp`), `${id}.json`);
      }
      // The rest goes (a record just moved is no longer there to remove).
      for (const f of files) await remove(f.folder, f.name);
    } finally {
      lock.release();
    }
  }
}

/** Keeps `bytes` in `name`/<sha256>, once per content; `runId` is the run whose lock is held. */
async function keep(name: string, runId: string, sha256: string, bytes: Uint8Array): Promise<void> {
  await navigator.locks.request(KEPT_LOCK, { mode: "shared" }, async () => {
    const folder = await dir(name);
    // A copy of another size was cut short by an older version of this store.
    if ((await size(folder, sha256).catch(() => -1)) === bytes.length) return;
    const tmp = `${runId}.${sha256}.tmp`;
    const handle = await writeTemp(folder, tmp, bytes);
    await move(handle, sha256).catch(async (e) => {
      await remove(folder, tmp);
      throw e;
    });
  });
}

/**
 * Removes the kept texts and bases that no saved run names. A run keeps its text (and its base)
 * when it starts, before its first save writes the record that names them, so nothing goes while
 * a tab holds a run other than `own` (this tab's runs' ids), nor while a record cannot be read, and
 * `inUse` (the sha256s of what this tab's loaded run kept) stay.
 */
export async function collect(own: string[], inUse: string[]): Promise<void> {
  await navigator.locks.request(KEPT_LOCK, async () => {
    const mine = new Set(own.map(lockName));
    if (((await navigator.locks.query()).held ?? []).some((l) => l.name?.startsWith(RUN_LOCK) && !mine.has(l.name))) return;
    const named = new Set(inUse);
    for await (const [name, handle] of entries(await dir(RUNS))) {
      if (name.endsWith(".tmp")) return; // a save between its moves, which `recover` finishes
      if (!name.endsWith(".json") || handle.kind !== "file") continue;
      try {
        const meta = JSON.parse(await (await (handle as FileSystemFileHandle).getFile()).text()) as RunMeta;
        for (const sha of [meta.dataset?.sha256, meta.base?.sha256]) if (sha) named.add(sha);
      } catch {
        return;
      }
    }
    for (const folder of [await dir(CORPORA), await dir(BASES)]) {
      const unnamed = [];
      for await (const [name, handle] of entries(folder)) if (handle.kind === "file" && !name.endsWith(".tmp") && !named.has(name)) unnamed.push(name);
      for (const name of unnamed) await remove(folder, name);
    }
  });
}

async function kept(name: string, sha256: string): Promise<Uint8Array | null> {
  try {
    return await readFile(await dir(name), sha256);
  } catch {
    return null;
  }
}

/** The text a run trains on, by its sha256. */
export const saveCorpus = (runId: string, sha256: string, bytes: Uint8Array) => keep(CORPORA, runId, sha256, bytes);
export const loadCorpus = (sha256: string) => kept(CORPORA, sha256);
/** The model file a fine-tuning run's adapter is for, by the sha256 of its weights. */
export const saveBase = (runId: string, sha256: string, bytes: Uint8Array) => keep(BASES, runId, sha256, bytes);
export const loadBase = (sha256: string) => kept(BASES, sha256);

/**
 * Holds the run's lock until `release` is called. Resolves false when another
 * tab already holds it (the run is being trained there).
 */
export function holdRunLock(id: string): Promise<{ ok: boolean; release: () => void }> {
  return new Promise((resolve) => {
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    navigator.locks
      .request(lockName(id), { ifAvailable: true }, (lock) => {
        if (!lock) {
          resolve({ ok: false, release: () => {} });
          return undefined;
        }
        resolve({ ok: true, release });
        return held;
      })
      .catch(() => resolve({ ok: false, release: () => {} }));
  });
}
