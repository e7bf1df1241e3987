// A gallery file's bytes: from Cache Storage when the copy there still has
// the manifest's sha256, else downloaded with progress, checked, and cached.
// Entries are keyed by the file's hash, so a model whose file changes is a new
// entry (and the old one is dropped). Nothing here touches the page.
import { sha256Hex } from "../engine/data";

const CACHE = "tinygpt-gallery";

export interface WantedFile {
  url: string;
  bytes: number;
  sha256: string;
}

export interface Fetched {
  bytes: Uint8Array;
  source: "cache" | "network";
  /** A cached copy no longer matched its hash: it was deleted and the file downloaded again. */
  repaired: boolean;
  /** The copy could not be kept (storage full or refused): the next load downloads again. */
  uncached: boolean;
}

/** A download that failed or arrived damaged; the message completes "The file ...". */
export class DownloadError extends Error {}

function cacheKey(file: WantedFile): string {
  const url = new URL(file.url, location.href);
  url.search = `sha256=${file.sha256}`;
  return url.href;
}

async function openCache(): Promise<Cache | null> {
  try {
    return await caches.open(CACHE);
  } catch {
    return null; // no Cache Storage here: every load downloads
  }
}

/** The file's bytes, verified; `signal` cancels the download (an AbortError). */
export async function fetchVerified(file: WantedFile, signal: AbortSignal, onProgress: (received: number) => void): Promise<Fetched> {
  const cache = await openCache();
  const key = cacheKey(file);
  const hit = await cache?.match(key);
  let repaired = false;
  if (hit) {
    const bytes = new Uint8Array(await hit.arrayBuffer());
    if ((await sha256Hex(bytes)) === file.sha256) return { bytes, source: "cache", repaired, uncached: false };
    await cache!.delete(key);
    repaired = true;
  }
  const res = await fetch(file.url, { signal });
  if (!res.ok || !res.body) throw new DownloadError(`could not be downloaded (HTTP ${res.status})`);
  // Into a buffer of the manifest's size: a server sending more is refused before it costs memory.
  const bytes = new Uint8Array(file.bytes);
  let received = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (received + value.length > file.bytes) {
      await reader.cancel();
      throw new DownloadError(`is larger than the manifest says (${file.bytes} bytes)`);
    }
    bytes.set(value, received);
    received += value.length;
    onProgress(received);
  }
  if (received !== file.bytes) throw new DownloadError(`ended after ${received} of ${file.bytes} bytes`);
  if ((await sha256Hex(bytes)) !== file.sha256) throw new DownloadError("arrived damaged: its sha256 does not match the manifest");
  return { bytes, source: "network", repaired, uncached: !(await keep(cache, key, bytes)) };
}

/** Caches the verified bytes and drops older versions of the same file; false where the cache refused. */
async function keep(cache: Cache | null, key: string, bytes: Uint8Array): Promise<boolean> {
  if (!cache) return false;
  try {
    await cache.put(key, new Response(bytes as Uint8Array<ArrayBuffer>, { headers: { "content-type": "application/octet-stream" } }));
    const path = new URL(key).pathname;
    for (const old of await cache.keys()) if (old.url !== key && new URL(old.url).pathname === path) await cache.delete(old);
    return true;
  } catch {
    return false;
  }
}
