// The coop-matrix lever (facts.levers "coop-matrix"): the large vec4 matmuls (the linear layers'
// forward and input-gradient products and the tied head, where their grids fill the GPU) on its
// matrix units, through Chromium's experimental subgroup matrices
// (shaders/levers/coop-matrix/matmul_vec4.wgsl). Its table depends on the
// adapter: a config the kernels are built for among those it reports (adapter.info
// subgroupMatrixConfigs), and its one subgroup size, which the kernels' workgroups are made of.

import matmulVec4 from "../../../.cache/wgsl/levers/coop-matrix/matmul_vec4.wgsl";
import { F32_KERNELS, type KernelTable, type Op, type Sizes, type Workgroups } from "../../engine/gpu/kernels";
import { WIDE_SHAPE } from "../shapes";
import type { GpuLever } from "../gpu";

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

const ceil = (a: number, b: number) => Math.ceil(a / b);
// The ops it replaces and the block each computes: the 128-block products (matmulOp's choice of
// block stands), the large grids, where the matrix units win (on the H200, 41-44 TFLOP/s against
// 34-35 at Huge's layer shapes). Not the 64-block ones, the grids too small to fill the GPU: the
// kernel's BLOCK 64 trained Small at 773k tok/s against the f32 kernels' 851k (2026-12-01, with
// those ops in the table). Not matmul_vec4_tn at 128 either: no preset's weight gradient fills its
// grid (they run the 64 block, split along K), so no gate shape could exercise it.
const REPLACED: [Op, number][] = [["matmul_vec4_nn", 128], ["matmul_vec4_nt", 128]];
const grid = (block: number) => (s: Sizes): Workgroups => [ceil(s.N, block), ceil(s.M, block), s.splits ?? 1];
// Workgroup memory at BLOCK 128 (shaders/levers/coop-matrix/matmul_vec4.wgsl): f16 tiles of A and B, f32 scratch.
const WORKGROUP_BYTES = 2 * (128 * 32 * 2) + 8 * 16 * 16 * 4;

/** The lever's kernels for workgroups of subgroups of `subgroupSize` invocations. */
export function coopKernels(subgroupSize: number): Partial<KernelTable> {
  return Object.fromEntries(REPLACED.map(([op, BLOCK]) => [op, { ...F32_KERNELS[op], source: matmulVec4, constants: { SUBGROUP: subgroupSize, BLOCK }, workgroups: grid(BLOCK) }]));
}

/** What the lever reads of an adapter: its info and the two limits its workgroups need. */
export interface MatrixAdapter {
  info: MatrixInfo;
  limits: { maxComputeInvocationsPerWorkgroup: number; maxComputeWorkgroupStorageSize: number };
}

/**
 * The table for an adapter, or null where it cannot run: no built config among those it reports,
 * a subgroup size that may vary between dispatches (the kernels count on BLOCK / 16 subgroups),
 * one outside 16 to 128, or limits below a 128 block's workgroup.
 */
export function coopTable({ info, limits }: MatrixAdapter): Partial<KernelTable> | null {
  const size = info.subgroupMinSize;
  if (!size || size !== info.subgroupMaxSize || size < 16 || size > 128 || !chooseConfig(info.subgroupMatrixConfigs ?? [])) return null;
  if ((128 / 16) * size > limits.maxComputeInvocationsPerWorkgroup || WORKGROUP_BYTES > limits.maxComputeWorkgroupStorageSize) return null;
  return coopKernels(size);
}

export const COOP_MATRIX = {
  id: ID,
  feature: "chromium-experimental-subgroup-matrix" as GPUFeatureName,
  alsoNeeds: ["shader-f16", "subgroups"],
  wgslFeatures: ["subgroup_id"],
  forAdapter: (adapter) => coopTable({ info: adapter.info as MatrixInfo, limits: adapter.limits }),
  // The wide shape alone: the small ones run none of its ops, and the 20-step curve trains on the first.
  shapes: [WIDE_SHAPE],
} satisfies GpuLever;
