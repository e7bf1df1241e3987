// Checkpoints and corpora in the origin-private file system (OPFS).
//
// Each run has its own files (runs/<id>.tinygpt and runs/<id>.json), written
// under a Web Lock named after the run, so two tabs never write the same file;
// a checkpoint is written to a temporary file and renamed into place, so a
// crash mid-write leaves the previous checkpoint intact.
import type { ModelConfig } from "../engine/types";
import type { CheckpointInfo } from "./protocol";

export interface RunMeta {
  id: string;
  step: number;
  model: ModelConfig;
  dataset: { name: string; bytes: number; sha256: string } | null;
  bytes: number;
  savedAt: string;
}

const RUNS = "runs";
const CORPORA = "corpora";
export const lockName = (id: string) => `tinygpt-run-${id}`;

async function dir(name: string): Promise<FileSystemDirectoryHandle> {
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(name, { create: true });
}

async function writeFile(folder: FileSystemDirectoryHandle, name: string, bytes: Uint8Array): Promise<void> {
  const tmp = `${name}.tmp`;
  const handle = await folder.getFileHandle(tmp, { create: true });
  const access = await handle.createSyncAccessHandle();
  try {
    access.truncate(0);
    let done = 0;
    while (done < bytes.length) done += access.write(bytes.subarray(done), { at: done });
    access.flush();
  } catch (e) {
    access.close();
    await folder.removeEntry(tmp).catch(() => undefined);
    throw e;
  }
  access.close();
  await (handle as FileSystemFileHandle & { move(name: string): Promise<void> }).move(name);
}

async function readFile(folder: FileSystemDirectoryHandle, name: string): Promise<Uint8Array> {
  const file = await (await folder.getFileHandle(name)).getFile();
  return new Uint8Array(await file.arrayBuffer());
}

export async function saveRun(meta: RunMeta, bytes: Uint8Array): Promise<void> {
  const folder = await dir(RUNS);
  await writeFile(folder, `${meta.id}.tinygpt`, bytes);
  await writeFile(folder, `${meta.id}.json`, new TextEncoder().encode(JSON.stringify(meta)));
}

export async function loadRun(id: string): Promise<{ meta: RunMeta; bytes: Uint8Array }> {
  const folder = await dir(RUNS);
  const meta = JSON.parse(new TextDecoder().decode(await readFile(folder, `${id}.json`))) as RunMeta;
  return { meta, bytes: await readFile(folder, `${id}.tinygpt`) };
}

export async function deleteRun(id: string): Promise<void> {
  const folder = await dir(RUNS);
  for (const name of [`${id}.json`, `${id}.tinygpt`, `${id}.tinygpt.tmp`, `${id}.json.tmp`]) {
    await folder.removeEntry(name).catch(() => undefined);
  }
}

/** Saved runs, newest first; `busy` when another tab holds the run's lock. */
export async function listRuns(currentId: string | null): Promise<CheckpointInfo[]> {
  const folder = await dir(RUNS);
  const held = new Set(((await navigator.locks.query()).held ?? []).map((l) => l.name));
  const out: CheckpointInfo[] = [];
  for await (const [name, handle] of folder as unknown as AsyncIterable<[string, FileSystemHandle]>) {
    if (!name.endsWith(".json") || handle.kind !== "file") continue;
    try {
      const meta = JSON.parse(await (await (handle as FileSystemFileHandle).getFile()).text()) as RunMeta;
      out.push({ id: meta.id, step: meta.step, model: meta.model, dataset: meta.dataset?.name ?? null, bytes: meta.bytes, savedAt: meta.savedAt, busy: meta.id !== currentId && held.has(lockName(meta.id)), current: meta.id === currentId });
    } catch {
      // A metadata file cut short by a crash: its run stays on disk but is not offered.
    }
  }
  return out.sort((a, b) => b.savedAt.localeCompare(a.savedAt));
}

export async function saveCorpus(sha256: string, bytes: Uint8Array): Promise<void> {
  const folder = await dir(CORPORA);
  try {
    await folder.getFileHandle(sha256);
  } catch {
    await writeFile(folder, sha256, bytes);
  }
}

export async function loadCorpus(sha256: string): Promise<Uint8Array | null> {
  try {
    return await readFile(await dir(CORPORA), sha256);
  } catch {
    return null;
  }
}

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
