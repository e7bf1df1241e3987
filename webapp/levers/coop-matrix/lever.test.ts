// The coop-matrix lever's choice of table per adapter, against the adapter info recorded on the
// H200 and listed for Apple and Intel (configs.json): the selection, not the arithmetic (the
// kernels run only where the adapter has subgroup matrices; SwiftShader and lavapipe have none).
import assert from "node:assert/strict";
import { test } from "node:test";
import recorded from "./configs.json";
import { BUILT_CONFIGS, chooseConfig, coopTable, type MatrixInfo } from "./lever";

const H200_LIMITS = { maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupStorageSize: 49152 };
const info = (name: keyof typeof recorded) => recorded[name] as MatrixInfo;

test("coop-matrix: on the H200 with f16 it takes f16 x f16 -> f32 at 16x16x16, the 128-block products on eight subgroups of 32", () => {
  assert.deepEqual(chooseConfig(info("nvidia-h200").subgroupMatrixConfigs!), BUILT_CONFIGS[0]);
  const table = coopTable({ info: info("nvidia-h200"), limits: H200_LIMITS })!;
  assert.deepEqual(Object.keys(table).sort(), ["matmul_vec4_nn", "matmul_vec4_nt"]);
  assert.deepEqual(table.matmul_vec4_nn!.constants, { SUBGROUP: 32, BLOCK: 128 });
  assert.equal(table.matmul_vec4_nt!.entry, "matmul_nt");
  assert.deepEqual(table.matmul_vec4_nn!.workgroups({ M: 16384, N: 1536, K: 384 }), [12, 128, 1]);
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
