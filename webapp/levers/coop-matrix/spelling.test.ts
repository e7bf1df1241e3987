// The older subgroup-matrix spelling, and the choice between the two: the rewrite on a known call
// and on every shipped matrix module, pipeline constants written into a module, and spelledFor
// against devices that refuse one spelling, the other, or both. Whether a browser's compiler takes the older spelling is for the H200 to say
// (kernels.test.ts runs the kernels in both spellings there).
import assert from "node:assert/strict";
import { test } from "node:test";
import matmul from "../../../.cache/wgsl/levers/coop-matrix/matmul_vec4.wgsl";
import attention from "../../../.cache/wgsl/levers/coop-attention/attention.wgsl";
import type { KernelTable } from "../../engine/gpu/kernels";
import { F32_KERNELS } from "../../engine/gpu/kernels";
import { olderKernel, olderSpelling, spelledFor, withConstants } from "./spelling";

test("coop-matrix spelling: a load and a store take the layout as a bool before the stride", () => {
  const wgsl = [
    "let a = subgroupMatrixLoad<Left, row_major>(&tile_a, r * ROW + kk, ROW);",
    "let b = subgroupMatrixLoad<Right, col_major>(&tiles, oth + T16 * STRIDE + kk, STRIDE);",
    "subgroupMatrixStore<row_major>(&scratch, sg * T * T, r, T);",
    "subgroupMatrixStore<col_major>(&out, at, c00, 16u);",
  ].join("\n");
  assert.equal(olderSpelling(wgsl), [
    "let a = subgroupMatrixLoad<Left>(&tile_a, r * ROW + kk, false, ROW);",
    "let b = subgroupMatrixLoad<Right>(&tiles, oth + T16 * STRIDE + kk, true, STRIDE);",
    "subgroupMatrixStore(&scratch, sg * T * T, r, false, T);",
    "subgroupMatrixStore(&out, at, c00, true, 16u);",
  ].join("\n"));
  assert.throws(() => olderSpelling("subgroupMatrixLoad<Left, row_major>(&a, at(r, kk), ROW)"), /arguments hold a call or a comma .*subgroupMatrixLoad<Left, row_major>/);
});

test("coop-matrix spelling: every load and store of the shipped matrix modules is rewritten, and nothing else", () => {
  for (const [name, wgsl] of [["coop-matrix", matmul], ["coop-attention", attention]]) {
    const calls = (text: string) => text.match(/subgroupMatrix(Load|Store)\b/g)!.length;
    const older = olderSpelling(wgsl);
    assert.ok(calls(wgsl) >= 4, `${name}: its loads and stores`);
    assert.equal(calls(older), calls(wgsl), name);
    assert.doesNotMatch(older, /_major/, `${name}: no layout left as a template argument`);
    // Each call gains exactly its bool, and the text around the calls is as it was.
    assert.equal(older.match(/, (true|false),/g)!.length - (wgsl.match(/, (true|false),/g) ?? []).length, calls(wgsl), name);
    assert.equal(older.replace(/subgroupMatrix(Load|Store)(<\w+>)?\([^;]*;/g, ""), wgsl.replace(/subgroupMatrix(Load|Store)<[^>]+>\([^;]*;/g, ""), name);
  }
});

test("coop-matrix spelling: an older-spelt kernel has its constants in its module, and its pipeline none", () => {
  const wgsl = "override SUBGROUP: u32 = 32u;\noverride HEAD: u32; // set by the table\noverride ROWS = SUBGROUP / 2u;\nvar<workgroup> t: array<f16, ROWS * HEAD>;\n";
  assert.equal(withConstants(wgsl, { HEAD: 64 }), "const SUBGROUP: u32 = 32u;\nconst HEAD: u32 = 64u; // set by the table\nconst ROWS = SUBGROUP / 2u;\nvar<workgroup> t: array<f16, ROWS * HEAD>;\n");
  assert.throws(() => withConstants(wgsl, {}), /override HEAD has no default and no pipeline constant/);
  assert.throws(() => withConstants(wgsl, { HEAD: 64, ROWS: 8 }), /ROWS = 8: only a u32 override/);
  assert.throws(() => withConstants(wgsl, { HEAD: 1.5 }), /HEAD = 1.5/);
  const k = olderKernel({ ...F32_KERNELS.attention_forward, source: attention, constants: { SUBGROUP: 32, HEAD: 64 } });
  assert.doesNotMatch(k.source, /^override/m, "every override a module constant");
  assert.match(k.source, /^const HEAD: u32 = 64u;/m);
  assert.match(k.source, /^const SUBGROUP: u32 = 32u;/m);
  assert.equal(k.baked, true);
  assert.deepEqual(k.constants, { SUBGROUP: 32, HEAD: 64 }, "kept for the graph, which reads HEAD");
});

/** A device whose compiler refuses WGSL that matches `refuse`, either way a browser may: an error message, or a validation error. */
function compilerRefusing(refuse: RegExp, how: "message" | "scope"): { device: GPUDevice; compiled: string[] } {
  const compiled: string[] = [];
  let refusedInScope = false;
  const device = {
    pushErrorScope: () => void (refusedInScope = false),
    popErrorScope: async () => (refusedInScope ? ({ message: "refused" } as GPUError) : null),
    createShaderModule: ({ code }: { code: string }) => {
      compiled.push(code);
      const refused = refuse.test(code);
      if (refused && how === "scope") refusedInScope = true;
      return { getCompilationInfo: async () => ({ messages: refused && how === "message" ? [{ type: "error", message: "unknown" }] : [] }) };
    },
  };
  return { device: device as unknown as GPUDevice, compiled };
}

test("coop-matrix spelling: the templated table where it compiles, the older one where only that does, the templated one where neither does", async () => {
  // Two blocks of one module: in the older spelling, a module each.
  const table: Partial<KernelTable> = {
    matmul_vec4_nn: { ...F32_KERNELS.matmul_vec4_nn, source: matmul, constants: { SUBGROUP: 32, BLOCK: 128, BK: 64 } },
    matmul_vec4_nt: { ...F32_KERNELS.matmul_vec4_nt, source: matmul, constants: { SUBGROUP: 32, BLOCK: 64, BK: 32 } },
  };
  for (const how of ["message", "scope"] as const) {
    const modern = compilerRefusing(/subgroupMatrixLoad<\w+>\(/, how);
    const now = await spelledFor(modern.device, table);
    assert.equal(now.spelling, "templated");
    assert.equal(now.kernels, table);
    assert.deepEqual(modern.compiled, [matmul], "one module compiled once, in the templated spelling only");

    const older = compilerRefusing(/_major>/, how);
    const then = await spelledFor(older.device, table);
    assert.equal(then.spelling, "older");
    assert.deepEqual(then.kernels.matmul_vec4_nt, olderKernel(table.matmul_vec4_nt!));
    assert.equal(then.kernels.matmul_vec4_nt!.entry, "matmul_nt");
    assert.deepEqual(older.compiled, [matmul, olderKernel(table.matmul_vec4_nn!).source, olderKernel(table.matmul_vec4_nt!).source]);

    const neither = await spelledFor(compilerRefusing(/subgroupMatrix/, how).device, table);
    assert.deepEqual(neither, { kernels: table, spelling: "templated" }, "as written, so that its gate fails and says why");
  }
});
