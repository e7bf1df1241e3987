// The build compiles cpu.wasm twice from one source: plain SIMD, which every
// engine with SIMD runs, and relaxed SIMD (fused multiply-add), which only
// newer engines validate. The relaxed module rides inside the plain one as a
// custom section (engines skip custom sections), so the app fetches one file
// and picks at run time. Both import a plain (unshared) memory so they run on
// any page; for threads the chosen bytes are turned into a module that imports
// a shared memory: one flag byte of the memory import's limits.

import facts from "../../tinygpt/facts.json";

/** The custom section that holds the relaxed-SIMD lever's build (tinygpt/site_build/bundle.py writes it). */
const RELAXED_SECTION = facts.levers.find((l) => l.id === "relaxed-simd")!.wasm_section!;

function readLeb(bytes: Uint8Array, pos: number): [number, number] {
  let value = 0, shift = 0;
  for (;;) {
    if (pos >= bytes.length) throw new Error("cpu.wasm: truncated LEB128 number");
    const b = bytes[pos++];
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if (!(b & 0x80)) return [value, pos];
  }
}

function bytesOf(source: BufferSource): Uint8Array {
  return source instanceof ArrayBuffer ? new Uint8Array(source) : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
}

function checkMagic(bytes: Uint8Array): void {
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) throw new Error("cpu.wasm: not a WebAssembly module");
}

/** The relaxed-SIMD module carried in `source`'s custom section, or null when it has none. */
export function relaxedModule(source: BufferSource): Uint8Array<ArrayBuffer> | null {
  const bytes = bytesOf(source);
  checkMagic(bytes);
  const want = new TextEncoder().encode(RELAXED_SECTION);
  for (let pos = 8; pos < bytes.length;) {
    const id = bytes[pos];
    const [size, start] = readLeb(bytes, pos + 1);
    if (id === 0) {
      const [len, name] = readLeb(bytes, start);
      if (len === want.length && want.every((b, i) => bytes[name + i] === b)) return bytes.slice(name + len, start + size);
    }
    pos = start + size;
  }
  return null;
}

function skipName(bytes: Uint8Array, pos: number): number {
  const [len, p] = readLeb(bytes, pos);
  return p + len;
}

function skipLimits(bytes: Uint8Array, pos: number): number {
  const flags = bytes[pos];
  let p = readLeb(bytes, pos + 1)[1];
  if (flags & 1) p = readLeb(bytes, p)[1];
  return p;
}

/** A copy of a module's bytes whose imported memory is declared shared (it must declare a maximum). */
export function withSharedMemory(source: BufferSource): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(source.byteLength);
  bytes.set(bytesOf(source));
  checkMagic(bytes);
  let pos = 8;
  while (pos < bytes.length) {
    const id = bytes[pos];
    const [size, start] = readLeb(bytes, pos + 1);
    if (id === 2) {
      let [count, p] = readLeb(bytes, start);
      for (; count > 0; count--) {
        p = skipName(bytes, skipName(bytes, p));
        const kind = bytes[p++];
        if (kind === 0) p = readLeb(bytes, p)[1];
        else if (kind === 1) p = skipLimits(bytes, p + 1);
        else if (kind === 3) p += 2;
        else if (kind === 4) p = readLeb(bytes, p + 1)[1];
        else if (kind === 2) {
          if (bytes[p] !== 0x01 && bytes[p] !== 0x03) throw new Error(`cpu.wasm: memory import has limit flags ${bytes[p]}, expected a maximum (asconfig maximumMemory)`);
          bytes[p] = 0x03;
          return bytes;
        } else throw new Error(`cpu.wasm: unknown import kind ${kind}`);
      }
    }
    pos = start + size;
  }
  throw new Error("cpu.wasm: imports no memory (asconfig importMemory)");
}
