// The coop-attention lever's table per adapter, against the adapter info recorded on the H200
// (../coop-matrix/configs.json), and the graph's choice between its kernels and the plain ones.
import assert from "node:assert/strict";
import { test } from "node:test";
import recorded from "../coop-matrix/configs.json";
import { F32_KERNELS, type KernelTable, attentionOp } from "../../engine/gpu/kernels";
import type { MatrixInfo } from "../coop-matrix/lever";
import { WORKGROUP_BYTES, attentionTable } from "./lever";

const H200_LIMITS = { maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupStorageSize: 49152 };
const h200 = recorded["nvidia-h200"] as MatrixInfo;

test("coop-attention: on the H200 with f16, the forward, dQ and dK/dV on four subgroups of 32 a head's 64 rows", () => {
  const table = attentionTable({ info: h200, limits: H200_LIMITS })!;
  assert.deepEqual(Object.keys(table).sort(), ["attention_backward_dkdv_matrix", "attention_backward_dq_matrix", "attention_forward_matrix"]);
  assert.deepEqual(table.attention_forward_matrix!.constants, { SUBGROUP: 32, HEAD: 64 });
  assert.equal(table.attention_backward_dkdv_matrix!.entry, "attention_backward_dkdv");
  assert.deepEqual(table.attention_backward_dq_matrix!.workgroups({ B: 64, T: 256, n_head: 6 }), [4, 384, 1]);
  assert.deepEqual(table.attention_forward_matrix!.workgroups({ B: 3, T: 9, n_head: 2 }), [1, 6, 1]);
});

test("coop-attention: no table without a subgroup size for matrices (the H200 without the f16 toggle, Apple) or below its workgroup memory", () => {
  assert.equal(attentionTable({ info: recorded["nvidia-h200-no-f16-toggle"] as MatrixInfo, limits: H200_LIMITS }), null);
  assert.equal(attentionTable({ info: recorded.apple as MatrixInfo, limits: H200_LIMITS }), null);
  assert.equal(attentionTable({ info: { ...h200, subgroupMinSize: 16 }, limits: H200_LIMITS }), null);
  assert.equal(attentionTable({ info: h200, limits: { ...H200_LIMITS, maxComputeWorkgroupStorageSize: WORKGROUP_BYTES - 1 } }), null);
  assert.notEqual(attentionTable({ info: h200, limits: { ...H200_LIMITS, maxComputeWorkgroupStorageSize: WORKGROUP_BYTES } }), null);
});

test("coop-attention: the graph runs its kernels on heads of up to 64 columns, the plain ones on wider heads and without its table", () => {
  const table = { ...F32_KERNELS, ...attentionTable({ info: h200, limits: H200_LIMITS }) } as KernelTable;
  assert.equal(attentionOp(table, "attention_forward", 64), "attention_forward_matrix"); // Huge's heads
  assert.equal(attentionOp(table, "attention_backward_dq", 6), "attention_backward_dq_matrix");
  assert.equal(attentionOp(table, "attention_backward_dkdv", 96), "attention_backward_dkdv");
  // Without its table: the plain kernels, built without the registers of heads past 64 where they fit.
  assert.equal(attentionOp(F32_KERNELS, "attention_forward", 64), "attention_forward_64");
  assert.equal(attentionOp(F32_KERNELS, "attention_backward_dkdv", 96), "attention_backward_dkdv");
});
