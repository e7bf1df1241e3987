// The coop-matrix lever (facts.levers "coop-matrix"): the large vec4 matmuls (the linear layers'
// forward and input-gradient products and the tied head, where their grids fill the GPU, and the
// weight gradients) on its matrix units, through Chromium's experimental subgroup matrices
// (shaders/levers/coop-matrix/matmul_vec4.wgsl). Its table depends on the
// adapter: a config the kernels are built for among those it reports (adapter.info
// subgroupMatrixConfigs), and its one subgroup size, which the kernels' workgroups are made of.

import matmulVec4 from "../../../.cache/wgsl/levers/coop-matrix/matmul_vec4.wgsl";
import { F32_KERNELS, type KernelTable, type Op, blockGrid } from "../../engine/gpu/kernels";
import { GATE_SHAPES, WIDE_SHAPE } from "../shapes";
import type { GpuLever } from "../gpu";
import { olderKernel } from "./spelling";

export const ID = "coop-matrix";

/** One entry of adapter.info.subgroupMatrixConfigs (Chromium's GPUSubgroupMatrixConfig). */
export interface SubgroupMatrixConfig {
  componentType: string;
  resultComponentType: string;
  M: number;
  N: number;
  K: number;
}

/** What the lever reads of an adapter's info. */
export interface MatrixInfo {
  subgroupMinSize?: number;
  subgroupMaxSize?: number;
  subgroupMatrixConfigs?: readonly SubgroupMatrixConfig[];
}

/** The configs a kernel exists for, best first: f16 operands with f32 sums (an f16 sum over K would lose the gate). */
export const BUILT_CONFIGS: readonly SubgroupMatrixConfig[] = [{ componentType: "f16", resultComponentType: "f32", M: 16, N: 16, K: 16 }];

const same = (a: SubgroupMatrixConfig, b: SubgroupMatrixConfig) =>
  a.componentType === b.componentType && a.resultComponentType === b.resultComponentType && a.M === b.M && a.N === b.N && a.K === b.K;

/** The first built config the adapter reports, or null. */
export function chooseConfig(reported: readonly SubgroupMatrixConfig[]): SubgroupMatrixConfig | null {
  return BUILT_CONFIGS.find((c) => reported.some((r) => same(c, r))) ?? null;
}

// The ops it replaces, with the block each computes, its k step (BK) and, for the 128-block
// weight gradient, the K it runs from (Kernel.fromK): the 128-block products (matmulOp's choice of
// block stands) 64 deep, and the weight gradients, split along K, in 64 blocks 32 deep, or in 128
// blocks 64 deep from 8192 rows on, where each split's run is long enough for them. On the H200
// (2026-12-02, side by side in one throwaway run) the 128 block ran Huge's (K = 16384) at 66-98
// TFLOP/s against the 64 block's 41-47, Medium's (6144) at 11.8 against 12.3, Small's (2048) at 4.8
// against 7.0. Not the 64-block nn and nt, the grids too small to fill the GPU: there the f32
// kernels were faster (Small 773k tok/s against 851k, 2026-12-01).
const REPLACED: [op: Op, block: number, bk: number, fromK?: number][] = [
  ["matmul_vec4_nn", 128, 64],
  ["matmul_vec4_nt", 128, 64],
  ["matmul_vec4_tn", 128, 64, 8192],
  ["matmul_vec4_tn_64", 64, 32],
];
// The most vec4s of each operand an invocation stages a step (the shader's MAX_PER): 4 * BK / subgroup size.
const MAX_PER = 8;
// Workgroup memory of a block (shaders/levers/coop-matrix/matmul_vec4.wgsl): the f16 tiles of A
// and B in segments of 16 x 32 halves, rows 8 halves longer, and an f32 16x16 scratch for each of
// its BLOCK / 16 subgroups (48 KiB for a 128 block 64 deep).
const workgroupBytes = (BLOCK: number, BK: number) => 2 * ((BLOCK * BK) / 512) * 16 * 40 * 2 + (BLOCK / 16) * 16 * 16 * 4;

/**
 * The lever's kernels for workgroups of subgroups of `subgroupSize` invocations, each op at its own
 * depth or else 32 deep where the deeper step stages more vec4s an invocation than the shader
 * holds (subgroups of 16) or needs more workgroup memory than `maxBytes`; null where even 32 does.
 */
export function coopKernels(subgroupSize: number, maxBytes: number): Partial<KernelTable> | null {
  const fits = (BLOCK: number, BK: number) => (4 * BK) / subgroupSize <= MAX_PER && workgroupBytes(BLOCK, BK) <= maxBytes;
  const table: Partial<KernelTable> = {};
  for (const [op, BLOCK, deep, fromK] of REPLACED) {
    const BK = [deep, 32].find((bk) => fits(BLOCK, bk));
    if (BK === undefined) return null;
    table[op] = { ...F32_KERNELS[op], source: matmulVec4, constants: { SUBGROUP: subgroupSize, BLOCK, BK }, workgroups: blockGrid(BLOCK), ...(fromK ? { fromK } : {}) };
  }
  return table;
}

/** What the lever reads of an adapter: its info and the two limits its workgroups need. */
export interface MatrixAdapter {
  info: MatrixInfo;
  limits: { maxComputeInvocationsPerWorkgroup: number; maxComputeWorkgroupStorageSize: number };
}

/**
 * The one subgroup size subgroup-matrix kernels run on with this adapter, or null where they cannot
 * run: no built config among those it reports, a size that may vary between dispatches (a
 * workgroup counts on a fixed number of subgroups), or one outside 16 to 128.
 */
export function matrixSubgroupSize(info: MatrixInfo): number | null {
  const size = info.subgroupMinSize;
  if (!size || size !== info.subgroupMaxSize || size < 16 || size > 128 || !chooseConfig(info.subgroupMatrixConfigs ?? [])) return null;
  return size;
}

/**
 * The table for an adapter, or null where it cannot run: no subgroup size for matrices
 * (matrixSubgroupSize), or limits below a 128 block's workgroup.
 */
export function coopTable({ info, limits }: MatrixAdapter): Partial<KernelTable> | null {
  const size = matrixSubgroupSize(info);
  if (!size || (128 / 16) * size > limits.maxComputeInvocationsPerWorkgroup) return null;
  return coopKernels(size, limits.maxComputeWorkgroupStorageSize);
}

/** The config and subgroup size its kernels run on an adapter it has a table for, in words. */
export function describeCoop(info: MatrixInfo): string {
  const c = chooseConfig(info.subgroupMatrixConfigs ?? [])!;
  return `${c.componentType} × ${c.componentType} → ${c.resultComponentType} tiles of ${c.M}×${c.N}×${c.K}, subgroups of ${info.subgroupMinSize}`;
}

/** What a lever on subgroup matrices needs of an adapter and says it runs there (coop-attention's too). */
export const MATRIX_NEEDS = {
  feature: "chromium-experimental-subgroup-matrix" as GPUFeatureName,
  alsoNeeds: ["shader-f16", "subgroups"] as GPUFeatureName[],
  wgslFeatures: ["subgroup_id"],
  describe: (adapter: GPUAdapter) => describeCoop(adapter.info as MatrixInfo),
  respell: olderKernel,
  f16: true,
};

export const COOP_MATRIX = {
  id: ID,
  ...MATRIX_NEEDS,
  forAdapter: (adapter) => coopTable({ info: adapter.info as MatrixInfo, limits: adapter.limits }),
  // The wide shape (8192 rows: the 128 blocks, the weight gradients' too) and the first small one
  // (its weight gradients' 64 blocks); the 20-step curve trains on the first.
  shapes: [WIDE_SHAPE, GATE_SHAPES[0]],
} satisfies GpuLever;
