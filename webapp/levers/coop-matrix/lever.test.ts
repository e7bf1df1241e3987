// The coop-matrix lever's choice of table per adapter, against the adapter info recorded on the
// H200 and listed for Apple and Intel (configs.json): the selection, not the arithmetic (the
// kernels run only where the adapter has subgroup matrices; SwiftShader and lavapipe have none).
import assert from "node:assert/strict";
import { test } from "node:test";
import recorded from "./configs.json";
import { F32_KERNELS, type KernelTable, weightGradOp } from "../../engine/gpu/kernels";
import { BUILT_CONFIGS, chooseConfig, coopTable, describeCoop, type MatrixInfo } from "./lever";

const H200_LIMITS = { maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupStorageSize: 49152 };
const info = (name: keyof typeof recorded) => recorded[name] as MatrixInfo;

test("coop-matrix: on the H200 with f16 it takes f16 x f16 -> f32 at 16x16x16: the 128-block products 64 deep on eight subgroups of 32, the weight gradients in 64 blocks 32 deep", () => {
  assert.deepEqual(chooseConfig(info("nvidia-h200").subgroupMatrixConfigs!), BUILT_CONFIGS[0]);
  const table = coopTable({ info: info("nvidia-h200"), limits: H200_LIMITS })!;
  assert.deepEqual(Object.keys(table).sort(), ["matmul_vec4_nn", "matmul_vec4_nt", "matmul_vec4_tn", "matmul_vec4_tn_64"]);
  assert.deepEqual(table.matmul_vec4_nn!.constants, { SUBGROUP: 32, BLOCK: 128, BK: 64 });
  assert.deepEqual(table.matmul_vec4_tn!.constants, { SUBGROUP: 32, BLOCK: 128, BK: 64 });
  assert.deepEqual(table.matmul_vec4_tn_64!.constants, { SUBGROUP: 32, BLOCK: 64, BK: 32 });
  assert.equal(table.matmul_vec4_nt!.entry, "matmul_nt");
  assert.equal(table.matmul_vec4_tn_64!.entry, "matmul_tn");
  assert.deepEqual(table.matmul_vec4_nn!.workgroups({ M: 16384, N: 1536, K: 384 }), [12, 128, 1]);
  assert.deepEqual(table.matmul_vec4_tn_64!.workgroups({ M: 384, N: 1536, K: 16384, splits: 4 }), [24, 6, 4]);
  // What the "This device" panel and the pill's explainer say it runs.
  assert.equal(describeCoop(info("nvidia-h200")), "f16 × f16 → f32 tiles of 16×16×16, subgroups of 32");
  assert.equal(describeCoop({ ...info("nvidia-h200"), subgroupMinSize: 64, subgroupMaxSize: 64 }), "f16 × f16 → f32 tiles of 16×16×16, subgroups of 64");
});

test("coop-matrix: a weight gradient over 8192 rows or more runs in 128 blocks, split along K; a shorter one, and the plain table's, in 64 blocks", () => {
  const table = { ...F32_KERNELS, ...coopTable({ info: info("nvidia-h200"), limits: H200_LIMITS }) } as KernelTable;
  assert.equal(weightGradOp(table, 384, 1536, 16384), "matmul_vec4_tn"); // Huge's fc_in
  assert.equal(weightGradOp(table, 64, 256, 8192), "matmul_vec4_tn"); // the gate's wide shape
  assert.equal(weightGradOp(table, 192, 768, 6144), "matmul_vec4_tn_64"); // Medium's
  assert.equal(weightGradOp(F32_KERNELS, 384, 1536, 16384), "matmul_vec4_tn_64");
  // Where the 128-block grid alone fills the GPU, matmulOp's own choice stands, and off vec4 sizes the scalar kernel.
  assert.equal(weightGradOp(table, 2048, 8192, 2048), "matmul_vec4_tn");
  assert.equal(weightGradOp(table, 18, 72, 16384), "matmul_tn");
});

test("coop-matrix: subgroups of 16 step 32 deep (64 would stage more vec4s an invocation than the shader holds), and need less workgroup memory", () => {
  const sixteen = { ...info("nvidia-h200"), subgroupMinSize: 16, subgroupMaxSize: 16 };
  const table = coopTable({ info: sixteen, limits: H200_LIMITS })!;
  assert.deepEqual(table.matmul_vec4_nn!.constants, { SUBGROUP: 16, BLOCK: 128, BK: 32 });
});

test("coop-matrix: a 64-deep block that exceeds the workgroup memory limit steps 32 deep instead; below a 32-deep 128 block, no table", () => {
  // Each tile 16 segments of 16 x 40 halves, and 8 scratches of 1 KiB: 48 KiB, the H200's whole limit; 32 deep, 28 KiB.
  assert.equal(coopTable({ info: info("nvidia-h200"), limits: { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 49152 } })!.matmul_vec4_nn!.constants.BK, 64);
  const table = coopTable({ info: info("nvidia-h200"), limits: { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 49151 } })!;
  assert.equal(table.matmul_vec4_nn!.constants.BK, 32);
  assert.equal(coopTable({ info: info("nvidia-h200"), limits: { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 28671 } }), null);
});

test("coop-matrix: no table where no built config is reported (the H200 without the f16 toggle: integers only; Apple; Intel)", () => {
  for (const name of ["nvidia-h200-no-f16-toggle", "apple", "intel"] as const) {
    assert.equal(chooseConfig(info(name).subgroupMatrixConfigs!), null, name);
    assert.equal(coopTable({ info: info(name), limits: H200_LIMITS }), null, name);
  }
  assert.equal(coopTable({ info: {}, limits: H200_LIMITS }), null); // no configs at all (SwiftShader)
});

test("coop-matrix: no table for a subgroup size that may vary, one outside 16..128, or limits below a 128 block's workgroup", () => {
  const h200 = info("nvidia-h200");
  assert.equal(coopTable({ info: { ...h200, subgroupMinSize: 16 }, limits: H200_LIMITS }), null);
  assert.equal(coopTable({ info: { ...h200, subgroupMinSize: 8, subgroupMaxSize: 8 }, limits: H200_LIMITS }), null);
  assert.equal(coopTable({ info: h200, limits: { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 16384 } }), null);
  assert.equal(coopTable({ info: { ...h200, subgroupMinSize: 64, subgroupMaxSize: 64 }, limits: { ...H200_LIMITS, maxComputeInvocationsPerWorkgroup: 256 } }), null);
  assert.notEqual(coopTable({ info: { ...h200, subgroupMinSize: 64, subgroupMaxSize: 64 }, limits: H200_LIMITS }), null);
});
