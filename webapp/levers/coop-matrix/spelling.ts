// The two spellings of Chromium's subgroup-matrix loads and stores. The shaders are written in the
// templated one, subgroupMatrixLoad<T, row_major>(&p, offset, stride) and
// subgroupMatrixStore<row_major>(&p, offset, value, stride); browsers whose compiler predates it
// take the layout as a `col_major: bool` before the stride instead,
// subgroupMatrixLoad<T>(&p, offset, false, stride), which newer ones accept with a deprecation
// warning. That older spelling also refuses workgroup arrays sized by a pipeline constant (Tint on
// the H200, npm webgpu 0.6.2, 2026-12-03), which is how the kernels size their tiles so that one
// module serves every block size: in that spelling each kernel gets a module of its own, with its
// constants written in (olderKernel).
// The matrix levers' tables are compiled in the templated spelling at detection time and, only
// where this browser refuses it, in the older one (spelledFor).

import type { Kernel, KernelTable } from "../../engine/gpu/kernels";

export type Spelling = "templated" | "older";

// A call's arguments up to the stride; an argument holding a call or a comma is not matched, and
// olderSpelling refuses to leave it half rewritten.
const LOAD = /subgroupMatrixLoad<([^<>,]+),\s*(row|col)_major>\(([^(),]+),([^(),]+),/g;
const STORE = /subgroupMatrixStore<(row|col)_major>\(([^(),]+),([^(),]+),([^(),]+),/g;

/** WGSL in the templated spelling, rewritten in the older one. */
export function olderSpelling(wgsl: string): string {
  const out = wgsl
    .replace(LOAD, (_, type: string, major: string, ptr: string, offset: string) => `subgroupMatrixLoad<${type}>(${ptr},${offset}, ${major === "col"},`)
    .replace(STORE, (_, major: string, ptr: string, offset: string, value: string) => `subgroupMatrixStore(${ptr},${offset},${value}, ${major === "col"},`);
  const left = /subgroupMatrix(Load|Store)<[^>]*_major>/.exec(out);
  if (left) throw new Error(`a subgroup-matrix ${left[1].toLowerCase()} whose arguments hold a call or a comma has no older spelling here: ${left[0]}`);
  return out;
}

// A module-scope override declaration: name, type, default.
const OVERRIDE = /^override\s+(\w+)\s*(?::\s*(\w+))?\s*(?:=\s*([^;]+))?;/gm;

/** WGSL whose overrides are module constants: those named in `constants` at their values (u32 only, as the matrix kernels' are), the rest at their defaults. */
export function withConstants(wgsl: string, constants: Record<string, number>): string {
  return wgsl.replace(OVERRIDE, (_, name: string, type: string | undefined, init: string | undefined) => {
    if (name in constants) {
      const v = constants[name];
      if (type !== "u32" || !Number.isInteger(v) || v < 0) throw new Error(`pipeline constant ${name} = ${v}: only a u32 override can be written into the module`);
      return `const ${name}: u32 = ${v}u;`;
    }
    if (init === undefined) throw new Error(`override ${name} has no default and no pipeline constant`);
    return `const ${name}${type ? `: ${type}` : ""} = ${init.trim()};`;
  });
}

/** A kernel in the older spelling: its loads and stores rewritten and its constants written into its module, its pipeline given none. */
export const olderKernel = (k: Kernel): Kernel => ({ ...k, source: withConstants(olderSpelling(k.source), k.constants), baked: true });

/** A table with each kernel rewritten by `respell`. */
export function respelled(kernels: Partial<KernelTable>, respell: (k: Kernel) => Kernel): Partial<KernelTable> {
  return Object.fromEntries(Object.entries(kernels).map(([op, k]) => [op, respell(k!)]));
}

/** Whether `device` compiles every source without an error. */
async function compiles(device: GPUDevice, sources: string[]): Promise<boolean> {
  for (const code of new Set(sources)) {
    device.pushErrorScope("validation");
    const info = await device.createShaderModule({ code }).getCompilationInfo();
    const refused = await device.popErrorScope();
    if (refused || info.messages.some((m) => m.type === "error")) return false;
  }
  return true;
}

/**
 * The table in the first spelling `device` compiles: as written, else rewritten by `respell` (the
 * older spelling); as written where neither compiles, so that its gate fails and says why.
 */
export async function spelledFor(device: GPUDevice, kernels: Partial<KernelTable>, respell = olderKernel): Promise<{ kernels: Partial<KernelTable>; spelling: Spelling }> {
  const sources = (t: Partial<KernelTable>) => Object.values(t).map((k) => k!.source);
  if (await compiles(device, sources(kernels))) return { kernels, spelling: "templated" };
  const older = respelled(kernels, respell);
  return (await compiles(device, sources(older))) ? { kernels: older, spelling: "older" } : { kernels, spelling: "templated" };
}
