// Symmetric int8 quantization, one f32 scale per row: a row x becomes q = round(x / s) in
// [-127, 127] with s = max|x| / 127 (s = 0 for a row of zeros, whose q are all 0), and
// dequantizes to q * s, within s / 2 of x. Weights are quantized per output channel (a row of
// the matrix as the product reads it, one output's weights), activations per row; the int8
// sampling lever's kernels (shaders/levers/int8/matvec.wgsl) quantize their input row the same
// way on the GPU. Rounding is half to even, as WGSL's round().

export const Q_MAX = 127;

/** Round half to even (WGSL round), in f32 as the GPU computes x * (127 / max). */
export function roundEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Rows of int8 values and their scales. */
export interface QuantizedRows {
  q: Int8Array;
  scales: Float32Array;
  rows: number;
  cols: number;
}

/** `x` [rows, cols] (row-major) quantized per row. */
export function quantizeRows(x: Float32Array, rows: number, cols: number): QuantizedRows {
  if (x.length !== rows * cols) throw new Error(`quantizeRows: ${x.length} values are not ${rows} x ${cols}`);
  const q = new Int8Array(rows * cols);
  const scales = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const row = x.subarray(r * cols, (r + 1) * cols);
    const max = row.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    if (!Number.isFinite(max)) throw new Error(`quantizeRows: row ${r} holds ${max}`);
    if (max === 0) continue;
    scales[r] = Math.fround(max / Q_MAX);
    const inv = Math.fround(Q_MAX / max);
    for (let c = 0; c < cols; c++) q[r * cols + c] = Math.max(-Q_MAX, Math.min(Q_MAX, roundEven(Math.fround(row[c] * inv))));
  }
  return { q, scales, rows, cols };
}

/** The values the quantized rows stand for: q * s. */
export function dequantizeRows({ q, scales, rows, cols }: QuantizedRows): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r * cols + c] = q[r * cols + c] * scales[r];
  return out;
}

/** `x` [rows, cols] transposed to [cols, rows]: a [K, N] weight's output channels as rows. */
export function transpose(x: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = x[r * cols + c];
  return out;
}
