// Reading the repository's test fixtures from a bundled test (TINYGPT_ROOT is set by tests/test_engine_node.py).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const ROOT = process.env.TINYGPT_ROOT ?? process.cwd();

export function fixture(name: string): string | null {
  const path = join(ROOT, "tests", "fixtures", name);
  return existsSync(path) ? path : null;
}

export function f32(base64: string): Float32Array {
  const bytes = Buffer.from(base64, "base64");
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

/** Relative difference of a from b. */
export const rel = (a: number, b: number) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-12);
export const l2 = (a: Float32Array) => Math.sqrt(a.reduce((s, x) => s + x * x, 0));

export function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, "utf8")) as T;
}
