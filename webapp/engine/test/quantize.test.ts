// engine/quantize.ts: the int8 scheme's round trip stays within half a step of each row's scale,
// the largest value maps to 127 exactly, a zero row to zeros, rounding is half to even (as WGSL's
// round, which the GPU quantizes activations with), and a row holding a non-finite value is refused.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Q_MAX, dequantizeRows, quantizeRows, roundEven, transpose } from "../quantize";
import { Rng } from "../rng";

test("quantize: per-row int8 round trip within half a step, extremes exact", () => {
  const rng = new Rng(7);
  const [rows, cols] = [13, 37];
  const x = Float32Array.from({ length: rows * cols }, (_, i) => rng.normal() * (1 + (i % 5)) * 10 ** ((i % cols) % 3 - 1));
  x.fill(0, 2 * cols, 3 * cols); // a row of zeros
  const qr = quantizeRows(x, rows, cols);
  const back = dequantizeRows(qr);
  for (let r = 0; r < rows; r++) {
    const row = x.subarray(r * cols, (r + 1) * cols);
    const max = row.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    assert.equal(qr.scales[r], Math.fround(max / Q_MAX));
    const at = row.findIndex((v) => Math.abs(v) === max);
    assert.equal(Math.abs(qr.q[r * cols + at]), max === 0 ? 0 : Q_MAX);
    for (let c = 0; c < cols; c++) {
      assert.ok(Math.abs(back[r * cols + c] - row[c]) <= qr.scales[r] * (0.5 + 1e-5), `row ${r} col ${c}: ${back[r * cols + c]} vs ${row[c]}`);
    }
  }
  assert.ok(qr.q.subarray(2 * cols, 3 * cols).every((v) => v === 0));
});

test("quantize: rounding half to even, transposition, and non-finite rows refused", () => {
  assert.deepEqual([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6].map(roundEven), [0, 2, 2, -0, -2, 2, -3]);
  assert.deepEqual([...transpose(Float32Array.of(1, 2, 3, 4, 5, 6), 2, 3)], [1, 4, 2, 5, 3, 6]);
  assert.throws(() => quantizeRows(Float32Array.of(1, NaN), 1, 2), /row 0 holds NaN/);
  assert.throws(() => quantizeRows(Float32Array.of(1, 2, 3), 2, 2), /3 values are not 2 x 2/);
});
