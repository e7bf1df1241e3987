// The CPU backend's kernels. Why AssemblyScript: it installs through npm alone,
// reads like the TypeScript around it, and emits WebAssembly SIMD (v128).
//
// The backend lays out every buffer in one linear memory and passes byte
// addresses; each kernel works on a range [lo, hi) of independent items (rows,
// heads, column groups, elements) so the backend can split a call across
// threads that share the memory. A kernel given rows of activations (LayerNorm,
// a linear layer, GELU, the loss) reads and writes only those rows, so a
// thread can run several back to back on its own rows without waiting for the
// others. Kernels allocate nothing and hold no state.
// Matrices are row-major; widths given to SIMD loops are multiples of 4 (the
// backend checks this once).
//
// The same source builds two modules (asconfig.json): plain SIMD, and relaxed
// SIMD where every multiply-add of a matrix product is one fused instruction
// (FMA on x86 and ARM). Fusing skips a rounding, so the two modules' results
// differ in the last bits; the backend uses the relaxed one only after it has
// matched the plain one on this machine (gate.ts).

/** First free byte after the module's own data: where the backend starts its layout. */
export function heap_base(): usize {
  return __heap_base;
}

@inline function at(base: usize, index: i32): usize {
  return base + (<usize>index << 2);
}

/** a * b + c: fused (one rounding) in the relaxed build, a multiply then an add otherwise. */
@inline function madd(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  return f32x4.add(c, f32x4.mul(a, b));
}

// ---------------------------------------------------------------------------
// Matrix multiply: out[i, :] = c[i, :] + bias + sum_p A(i, p) * b[p, :] for rows
// i in [lo, hi), with A(i, p) at a + i * rs + p * is (byte strides). The strides
// let the same kernel read a transposed A without copying it (weight
// gradients: A = x^T) and read one head's columns of a wider matrix
// (attention). c (the running sum: zeros when 0, out itself to accumulate, or
// the residual stream) shares out's row stride. Blocks of 4 rows x 8 columns
// keep 8 accumulators in registers, the most V8 keeps there without spilling
// on x86's 16 vector registers; one broadcast of A feeds 2 multiply-adds. Rows
// left over (a decode's one row) go 16 columns at a time: four independent
// accumulators, where one would wait out every multiply-add's latency.

@inline function accInit(c: usize, bias: usize): v128 {
  let acc = c ? v128.load(c) : f32x4.splat(0);
  if (bias) acc = f32x4.add(acc, v128.load(bias));
  return acc;
}

function gemm(out: usize, os: usize, c: usize, a: usize, rs: usize, is: usize, b: usize, bs: usize, bias: usize,
  P: i32, M: i32, lo: i32, hi: i32): void {
  let i = lo;
  for (; i + 4 <= hi; i += 4) {
    const a0 = a + <usize>i * rs;
    const o0 = out + <usize>i * os;
    const c0 = c ? c + <usize>i * os : 0;
    let j = 0;
    for (; j + 8 <= M; j += 8) {
      const jb = <usize>j << 2;
      const oj = o0 + jb;
      const cj = c ? c0 + jb : 0;
      const bj = bias ? bias + jb : 0;
      const bj1 = bias ? bj + 16 : 0;
      let c00 = accInit(cj, bj), c01 = accInit(cj ? cj + 16 : 0, bj1);
      let c10 = accInit(cj ? cj + os : 0, bj), c11 = accInit(cj ? cj + os + 16 : 0, bj1);
      let c20 = accInit(cj ? cj + 2 * os : 0, bj), c21 = accInit(cj ? cj + 2 * os + 16 : 0, bj1);
      let c30 = accInit(cj ? cj + 3 * os : 0, bj), c31 = accInit(cj ? cj + 3 * os + 16 : 0, bj1);
      let pa = a0;
      let pb = b + jb;
      for (let p = 0; p < P; p++) {
        const b0 = v128.load(pb);
        const b1 = v128.load(pb, 16);
        const x0 = v128.load32_splat(pa);
        const x1 = v128.load32_splat(pa + rs);
        const x2 = v128.load32_splat(pa + 2 * rs);
        const x3 = v128.load32_splat(pa + 3 * rs);
        c00 = madd(x0, b0, c00); c01 = madd(x0, b1, c01);
        c10 = madd(x1, b0, c10); c11 = madd(x1, b1, c11);
        c20 = madd(x2, b0, c20); c21 = madd(x2, b1, c21);
        c30 = madd(x3, b0, c30); c31 = madd(x3, b1, c31);
        pa += is;
        pb += bs;
      }
      v128.store(oj, c00); v128.store(oj, c01, 16);
      v128.store(oj + os, c10); v128.store(oj + os, c11, 16);
      v128.store(oj + 2 * os, c20); v128.store(oj + 2 * os, c21, 16);
      v128.store(oj + 3 * os, c30); v128.store(oj + 3 * os, c31, 16);
    }
    for (; j < M; j += 4) {
      const jb = <usize>j << 2;
      const oj = o0 + jb;
      const cj = c ? c0 + jb : 0;
      const bj = bias ? bias + jb : 0;
      let c0 = accInit(cj, bj), c1 = accInit(cj ? cj + os : 0, bj);
      let c2 = accInit(cj ? cj + 2 * os : 0, bj), c3 = accInit(cj ? cj + 3 * os : 0, bj);
      let pa = a0;
      let pb = b + jb;
      for (let p = 0; p < P; p++) {
        const b0 = v128.load(pb);
        c0 = madd(v128.load32_splat(pa), b0, c0);
        c1 = madd(v128.load32_splat(pa + rs), b0, c1);
        c2 = madd(v128.load32_splat(pa + 2 * rs), b0, c2);
        c3 = madd(v128.load32_splat(pa + 3 * rs), b0, c3);
        pa += is;
        pb += bs;
      }
      v128.store(oj, c0); v128.store(oj + os, c1); v128.store(oj + 2 * os, c2); v128.store(oj + 3 * os, c3);
    }
  }
  for (; i < hi; i++) {
    const a0 = a + <usize>i * rs;
    const o0 = out + <usize>i * os;
    let j = 0;
    for (; j + 16 <= M; j += 16) {
      const jb = <usize>j << 2;
      const cj = c ? c + <usize>i * os + jb : 0;
      const bj = bias ? bias + jb : 0;
      let c0 = accInit(cj, bj), c1 = accInit(cj ? cj + 16 : 0, bj ? bj + 16 : 0);
      let c2 = accInit(cj ? cj + 32 : 0, bj ? bj + 32 : 0), c3 = accInit(cj ? cj + 48 : 0, bj ? bj + 48 : 0);
      let pa = a0;
      let pb = b + jb;
      for (let p = 0; p < P; p++) {
        const x = v128.load32_splat(pa);
        c0 = madd(x, v128.load(pb), c0); c1 = madd(x, v128.load(pb, 16), c1);
        c2 = madd(x, v128.load(pb, 32), c2); c3 = madd(x, v128.load(pb, 48), c3);
        pa += is;
        pb += bs;
      }
      const oj = o0 + jb;
      v128.store(oj, c0); v128.store(oj, c1, 16); v128.store(oj, c2, 32); v128.store(oj, c3, 48);
    }
    for (; j < M; j += 4) {
      const jb = <usize>j << 2;
      let acc = accInit(c ? c + <usize>i * os + jb : 0, bias ? bias + jb : 0);
      let pa = a0;
      let pb = b + jb;
      for (let p = 0; p < P; p++) {
        acc = madd(v128.load32_splat(pa), v128.load(pb), acc);
        pa += is;
        pb += bs;
      }
      v128.store(o0 + jb, acc);
    }
  }
}

const PANEL_FLOATS = 32768; // 128 KiB of b per panel: well inside L2

/**
 * out[rows, M] = c + A @ b + bias for rows [lo, hi), A(i, p) = a[i * rowStride + p * innerStride],
 * b [P, M]. The p dimension is cut into panels whose slice of b stays in cache
 * while every row block of the range passes over it.
 */
export function matmul(out: usize, a: usize, b: usize, bias: usize, c: usize, rowStride: i32, innerStride: i32,
  P: i32, M: i32, lo: i32, hi: i32): void {
  const panel = max(16, PANEL_FLOATS / M);
  const os = <usize>M << 2;
  for (let p0 = 0; p0 < P; p0 += panel) {
    const first = p0 == 0;
    gemm(out, os, first ? c : out, a + (<usize>p0 * <usize>innerStride << 2), <usize>rowStride << 2, <usize>innerStride << 2,
      at(b, p0 * M), os, first ? bias : 0, min(panel, P - p0), M, lo, hi);
  }
}

// ---------------------------------------------------------------------------
// out[i, j] = c[i, j] + sum_p a[i, p] * w[j, p] for rows i in [lo, hi): a product with w [M, P]
// transposed, read in place, for what reads a weight transposed (the tied head's logits, input
// gradients), so that no transposed copy of the weights is kept. p is contiguous in a's and w's
// rows alike, so each output is a dot product: 4 lanes of partial sums, added across once at the
// end (P a multiple of 4). Blocks of 4 rows x 2 of w's rows keep 8 accumulators; a row left over
// (a decode's one) takes 4 of w's rows at a time. w's rows go in panels that stay in cache while
// every row block of the range passes over them. c is 0 (nothing) or out itself (accumulate).

@inline function ntStore(out: usize, c: usize, offset: usize, v: v128): void {
  store<f32>(out + offset, (c ? load<f32>(c + offset) : 0) + hsum(v));
}

export function matmul_nt(out: usize, a: usize, w: usize, c: usize, P: i32, M: i32, lo: i32, hi: i32): void {
  const rs = <usize>P << 2;
  const os = <usize>M << 2;
  const panel = max(4, PANEL_FLOATS / P);
  for (let j0 = 0; j0 < M; j0 += panel) {
    const j1 = min(M, j0 + panel);
    let i = lo;
    for (; i + 4 <= hi; i += 4) {
      const a0 = a + <usize>i * rs;
      const o0 = <usize>i * os;
      let j = j0;
      for (; j < j1; j += 2) {
        const two = j + 1 < j1; // else w's last row twice, stored once
        const w0 = w + <usize>j * rs, w1 = two ? w0 + rs : w0;
        let s00 = f32x4.splat(0), s01 = f32x4.splat(0), s10 = f32x4.splat(0), s11 = f32x4.splat(0);
        let s20 = f32x4.splat(0), s21 = f32x4.splat(0), s30 = f32x4.splat(0), s31 = f32x4.splat(0);
        for (let q: usize = 0; q < rs; q += 16) {
          const b0 = v128.load(w0 + q), b1 = v128.load(w1 + q);
          const x0 = v128.load(a0 + q), x1 = v128.load(a0 + rs + q);
          const x2 = v128.load(a0 + 2 * rs + q), x3 = v128.load(a0 + 3 * rs + q);
          s00 = madd(x0, b0, s00); s01 = madd(x0, b1, s01);
          s10 = madd(x1, b0, s10); s11 = madd(x1, b1, s11);
          s20 = madd(x2, b0, s20); s21 = madd(x2, b1, s21);
          s30 = madd(x3, b0, s30); s31 = madd(x3, b1, s31);
        }
        const oj = o0 + (<usize>j << 2);
        ntStore(out, c, oj, s00); ntStore(out, c, oj + os, s10); ntStore(out, c, oj + 2 * os, s20); ntStore(out, c, oj + 3 * os, s30);
        if (two) {
          ntStore(out, c, oj + 4, s01); ntStore(out, c, oj + os + 4, s11); ntStore(out, c, oj + 2 * os + 4, s21); ntStore(out, c, oj + 3 * os + 4, s31);
        }
      }
    }
    for (; i < hi; i++) {
      const a0 = a + <usize>i * rs;
      const o0 = <usize>i * os;
      for (let j = j0; j < j1; j += 4) {
        const w0 = w + <usize>j * rs;
        const w1 = j + 1 < j1 ? w0 + rs : w0, w2 = j + 2 < j1 ? w0 + 2 * rs : w0, w3 = j + 3 < j1 ? w0 + 3 * rs : w0;
        let s0 = f32x4.splat(0), s1 = f32x4.splat(0), s2 = f32x4.splat(0), s3 = f32x4.splat(0);
        for (let q: usize = 0; q < rs; q += 16) {
          const x = v128.load(a0 + q);
          s0 = madd(x, v128.load(w0 + q), s0); s1 = madd(x, v128.load(w1 + q), s1);
          s2 = madd(x, v128.load(w2 + q), s2); s3 = madd(x, v128.load(w3 + q), s3);
        }
        const oj = o0 + (<usize>j << 2);
        ntStore(out, c, oj, s0);
        if (j + 1 < j1) ntStore(out, c, oj + 4, s1);
        if (j + 2 < j1) ntStore(out, c, oj + 8, s2);
        if (j + 3 < j1) ntStore(out, c, oj + 12, s3);
      }
    }
  }
}

/**
 * dst[c, r] = src[r, c] for rows r in [lo, hi) and columns c in [0, cols) (a
 * multiple of 4), strides ds and ss in floats. 4x4 tiles are turned with
 * shuffles; 16 source rows at a time fill whole 64-byte lines of dst, so its
 * far-apart rows never share a half-written line.
 */
@inline function transposeRows(dst: usize, ds: i32, src: usize, ss: i32, lo: i32, hi: i32, cols: i32): void {
  let r = lo;
  for (; r + 16 <= hi; r += 16) {
    for (let c = 0; c + 4 <= cols; c += 4) {
      for (let rr = r; rr < r + 16; rr += 4) transpose4x4(dst, ds, src, ss, rr, c);
    }
  }
  for (; r + 4 <= hi; r += 4) {
    for (let c = 0; c + 4 <= cols; c += 4) transpose4x4(dst, ds, src, ss, r, c);
  }
  for (; r < hi; r++) {
    for (let c = 0; c < cols; c++) store<f32>(at(dst, c * ds + r), load<f32>(at(src, r * ss + c)));
  }
}

@inline function transpose4x4(dst: usize, ds: i32, src: usize, ss: i32, r: i32, c: i32): void {
  const s = at(src, r * ss + c);
  const stride = <usize>ss << 2;
  const r0 = v128.load(s), r1 = v128.load(s + stride), r2 = v128.load(s + 2 * stride), r3 = v128.load(s + 3 * stride);
  const t0 = v128.shuffle<f32>(r0, r1, 0, 4, 1, 5), t1 = v128.shuffle<f32>(r2, r3, 0, 4, 1, 5);
  const t2 = v128.shuffle<f32>(r0, r1, 2, 6, 3, 7), t3 = v128.shuffle<f32>(r2, r3, 2, 6, 3, 7);
  const d = at(dst, c * ds + r);
  const dstride = <usize>ds << 2;
  v128.store(d, v128.shuffle<f32>(t0, t1, 0, 1, 4, 5));
  v128.store(d + dstride, v128.shuffle<f32>(t0, t1, 2, 3, 6, 7));
  v128.store(d + 2 * dstride, v128.shuffle<f32>(t2, t3, 0, 1, 4, 5));
  v128.store(d + 3 * dstride, v128.shuffle<f32>(t2, t3, 2, 3, 6, 7));
}

/** dst[c, r] = src[r, c] for source rows r in [lo, hi); src is [rows, cols]. */
export function transpose(dst: usize, src: usize, rows: i32, cols: i32, lo: i32, hi: i32): void {
  transposeRows(dst, rows, src, cols, lo, hi, cols);
}

/** out[g*4..g*4+4] += sum over rows of x, for column groups g in [lo, hi): bias gradients. */
export function colsum(out: usize, x: usize, rows: i32, cols: i32, lo: i32, hi: i32): void {
  const stride = <usize>cols << 2;
  let g = lo;
  // Eight groups (two cache lines of a row) per pass over the rows.
  for (; g + 8 <= hi; g += 8) {
    const o = at(out, g * 4);
    let a0 = v128.load(o), a1 = v128.load(o, 16), a2 = v128.load(o, 32), a3 = v128.load(o, 48);
    let a4 = v128.load(o, 64), a5 = v128.load(o, 80), a6 = v128.load(o, 96), a7 = v128.load(o, 112);
    let p = at(x, g * 4);
    for (let r = 0; r < rows; r++) {
      a0 = f32x4.add(a0, v128.load(p)); a1 = f32x4.add(a1, v128.load(p, 16));
      a2 = f32x4.add(a2, v128.load(p, 32)); a3 = f32x4.add(a3, v128.load(p, 48));
      a4 = f32x4.add(a4, v128.load(p, 64)); a5 = f32x4.add(a5, v128.load(p, 80));
      a6 = f32x4.add(a6, v128.load(p, 96)); a7 = f32x4.add(a7, v128.load(p, 112));
      p += stride;
    }
    v128.store(o, a0); v128.store(o, a1, 16); v128.store(o, a2, 32); v128.store(o, a3, 48);
    v128.store(o, a4, 64); v128.store(o, a5, 80); v128.store(o, a6, 96); v128.store(o, a7, 112);
  }
  for (; g < hi; g++) {
    const o = at(out, g * 4);
    let acc = v128.load(o);
    let p = at(x, g * 4);
    for (let r = 0; r < rows; r++) {
      acc = f32x4.add(acc, v128.load(p));
      p += stride;
    }
    v128.store(o, acc);
  }
}

/** x[lo, hi) = 0 (floats). */
export function zero(x: usize, lo: i32, hi: i32): void {
  memory.fill(at(x, lo), 0, <usize>(hi - lo) << 2);
}

// ---------------------------------------------------------------------------
// Embedding: x[r] = wte[token[r]] + wpe[r % T].

export function embed_forward(out: usize, tokens: usize, wte: usize, wpe: usize, T: i32, C: i32, lo: i32, hi: i32): void {
  for (let r = lo; r < hi; r++) {
    const e = at(wte, load<i32>(at(tokens, r)) * C);
    const p = at(wpe, (r % T) * C);
    const o = at(out, r * C);
    for (let c = 0; c < C; c += 4) v128.store(at(o, c), f32x4.add(v128.load(at(e, c)), v128.load(at(p, c))));
  }
}

/**
 * Scatter-adds dout into the embedding gradients for column groups g in
 * [lo, hi): rows may share a token, so threads split the columns, not the rows.
 */
export function embed_backward(dwte: usize, dwpe: usize, dout: usize, tokens: usize, T: i32, C: i32, rows: i32,
  lo: i32, hi: i32): void {
  for (let r = 0; r < rows; r++) {
    const d = at(dout, r * C);
    const e = at(dwte, load<i32>(at(tokens, r)) * C);
    const p = at(dwpe, (r % T) * C);
    for (let g = lo; g < hi; g++) {
      const c = g * 4;
      const v = v128.load(at(d, c));
      v128.store(at(e, c), f32x4.add(v128.load(at(e, c)), v));
      v128.store(at(p, c), f32x4.add(v128.load(at(p, c)), v));
    }
  }
}

// ---------------------------------------------------------------------------
// LayerNorm over rows of C, biased variance (as GPT-2). mean and rstd are saved
// per row for backward.

@inline function hsum(v: v128): f32 {
  return f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1) + f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3);
}

/** The largest lane in every lane, by shuffles: scalar max compiles to data-dependent branches. */
@inline function hmax(v: v128): v128 {
  v = f32x4.pmax(v, v128.shuffle<f32>(v, v, 2, 3, 0, 1));
  return f32x4.pmax(v, v128.shuffle<f32>(v, v, 1, 0, 3, 2));
}

export function layernorm_forward(out: usize, mean: usize, rstd: usize, x: usize, w: usize, b: usize,
  C: i32, eps: f32, lo: i32, hi: i32): void {
  for (let r = lo; r < hi; r++) {
    const xr = at(x, r * C);
    let s = f32x4.splat(0);
    for (let c = 0; c < C; c += 4) s = f32x4.add(s, v128.load(at(xr, c)));
    const m = hsum(s) / <f32>C;
    const mv = f32x4.splat(m);
    let q = f32x4.splat(0);
    for (let c = 0; c < C; c += 4) {
      const d = f32x4.sub(v128.load(at(xr, c)), mv);
      q = f32x4.add(q, f32x4.mul(d, d));
    }
    const rs = <f32>1 / Mathf.sqrt(hsum(q) / <f32>C + eps);
    store<f32>(at(mean, r), m);
    store<f32>(at(rstd, r), rs);
    const rv = f32x4.splat(rs);
    const o = at(out, r * C);
    for (let c = 0; c < C; c += 4) {
      const xhat = f32x4.mul(f32x4.sub(v128.load(at(xr, c)), mv), rv);
      v128.store(at(o, c), f32x4.add(f32x4.mul(xhat, v128.load(at(w, c))), v128.load(at(b, c))));
    }
  }
}

/**
 * dx[r] = base[r] + rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
 * dxhat = dout * w; base 0 reads as zeros, base = dx adds in place.
 */
export function layernorm_backward(dx: usize, base: usize, dout: usize, x: usize, w: usize, mean: usize, rstd: usize,
  C: i32, lo: i32, hi: i32): void {
  for (let r = lo; r < hi; r++) {
    const xr = at(x, r * C);
    const dr = at(dout, r * C);
    const mv = v128.load32_splat(at(mean, r));
    const rv = v128.load32_splat(at(rstd, r));
    let s1 = f32x4.splat(0), s2 = f32x4.splat(0);
    for (let c = 0; c < C; c += 4) {
      const xhat = f32x4.mul(f32x4.sub(v128.load(at(xr, c)), mv), rv);
      const dxhat = f32x4.mul(v128.load(at(dr, c)), v128.load(at(w, c)));
      s1 = f32x4.add(s1, dxhat);
      s2 = f32x4.add(s2, f32x4.mul(dxhat, xhat));
    }
    const m1 = f32x4.splat(hsum(s1) / <f32>C);
    const m2 = f32x4.splat(hsum(s2) / <f32>C);
    const o = at(dx, r * C);
    const bo = base ? at(base, r * C) : 0;
    for (let c = 0; c < C; c += 4) {
      const xhat = f32x4.mul(f32x4.sub(v128.load(at(xr, c)), mv), rv);
      const dxhat = f32x4.mul(v128.load(at(dr, c)), v128.load(at(w, c)));
      const g = f32x4.mul(rv, f32x4.sub(f32x4.sub(dxhat, m1), f32x4.mul(xhat, m2)));
      v128.store(at(o, c), bo ? f32x4.add(v128.load(at(bo, c)), g) : g);
    }
  }
}

/** dw += sum_r dout * xhat, db += sum_r dout, for column groups g in [lo, hi), four groups per pass. */
export function layernorm_param_grads(dw: usize, db: usize, dout: usize, x: usize, mean: usize, rstd: usize,
  rows: i32, C: i32, lo: i32, hi: i32): void {
  const stride = <usize>C << 2;
  let g = lo;
  for (; g + 4 <= hi; g += 4) {
    const w = at(dw, g * 4), b = at(db, g * 4);
    let w0 = v128.load(w), w1 = v128.load(w, 16), w2 = v128.load(w, 32), w3 = v128.load(w, 48);
    let b0 = v128.load(b), b1 = v128.load(b, 16), b2 = v128.load(b, 32), b3 = v128.load(b, 48);
    let pd = at(dout, g * 4), px = at(x, g * 4);
    for (let r = 0; r < rows; r++) {
      const mv = v128.load32_splat(at(mean, r)), rv = v128.load32_splat(at(rstd, r));
      const d0 = v128.load(pd), d1 = v128.load(pd, 16), d2 = v128.load(pd, 32), d3 = v128.load(pd, 48);
      w0 = f32x4.add(w0, f32x4.mul(d0, f32x4.mul(f32x4.sub(v128.load(px), mv), rv)));
      w1 = f32x4.add(w1, f32x4.mul(d1, f32x4.mul(f32x4.sub(v128.load(px, 16), mv), rv)));
      w2 = f32x4.add(w2, f32x4.mul(d2, f32x4.mul(f32x4.sub(v128.load(px, 32), mv), rv)));
      w3 = f32x4.add(w3, f32x4.mul(d3, f32x4.mul(f32x4.sub(v128.load(px, 48), mv), rv)));
      b0 = f32x4.add(b0, d0); b1 = f32x4.add(b1, d1); b2 = f32x4.add(b2, d2); b3 = f32x4.add(b3, d3);
      pd += stride;
      px += stride;
    }
    v128.store(w, w0); v128.store(w, w1, 16); v128.store(w, w2, 32); v128.store(w, w3, 48);
    v128.store(b, b0); v128.store(b, b1, 16); v128.store(b, b2, 32); v128.store(b, b3, 48);
  }
  for (; g < hi; g++) {
    let aw = v128.load(at(dw, g * 4)), ab = v128.load(at(db, g * 4));
    for (let r = 0; r < rows; r++) {
      const d = v128.load(at(dout, r * C + g * 4));
      const xhat = f32x4.mul(f32x4.sub(v128.load(at(x, r * C + g * 4)), v128.load32_splat(at(mean, r))),
        v128.load32_splat(at(rstd, r)));
      aw = f32x4.add(aw, f32x4.mul(d, xhat));
      ab = f32x4.add(ab, d);
    }
    v128.store(at(dw, g * 4), aw);
    v128.store(at(db, g * 4), ab);
  }
}

// ---------------------------------------------------------------------------
// Vector exp and erf, 4 lanes at a time. exp: x = n ln2 + r, |r| <= ln2/2,
// exp(r) by its Taylor series to r^6 (relative error about 1e-7), 2^n built
// in the exponent bits. erf by Abramowitz & Stegun 7.1.26 (absolute error
// below 1.5e-7): WebAssembly has neither. pmin/pmax and the round-by-adding
// trick are single x86 instructions where min/max/nearest/trunc_sat are
// sequences; for the clamped, finite inputs here they give the same values.
// Polynomials are evaluated in halves (Estrin) rather than by Horner's rule:
// the chain of dependent operations, not their count, is what limits these
// loops on an out-of-order core.
//
// The constants live in memory and are read with one broadcast load each: a
// v128 constant costs V8 three instructions at every use, and these loops use
// twenty per vector, more than the arithmetic itself.

const K = memory.data<f32>([
  -87.0, 88.0, 1.4426950408889634, 12582912.0, 0.693359375, -2.12194440e-4,
  1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0,
  0.3275911, 1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592,
  0.7071067811865476, -0.0, -0.5, 0.3989422804014327, -Infinity,
]);
const EXP_MIN = 0, EXP_MAX = 1, LOG2E = 2, ROUND = 3, LN2_HI = 4, LN2_LO = 5;
const INV720 = 6, INV120 = 7, INV24 = 8, INV6 = 9, HALF = 10, ONE = 11;
const ERF_P = 12, ERF_A5 = 13, ERF_A4 = 14, ERF_A3 = 15, ERF_A2 = 16, ERF_A1 = 17;
const SQRT1_2 = 18, SIGN = 19, MINUS_HALF = 20, INV_SQRT_2PI = 21, NEG_INF = 22;

@inline function kv(i: i32): v128 {
  return v128.load32_splat(K + (<usize>i << 2));
}

@inline function expv(x: v128): v128 {
  x = f32x4.pmin(f32x4.pmax(x, kv(EXP_MIN)), kv(EXP_MAX));
  // Adding 1.5 * 2^23 rounds to an integer, which lands in the low mantissa bits.
  const shifted = f32x4.add(f32x4.mul(x, kv(LOG2E)), kv(ROUND));
  const n = f32x4.sub(shifted, kv(ROUND));
  const r = f32x4.sub(f32x4.sub(x, f32x4.mul(n, kv(LN2_HI))), f32x4.mul(n, kv(LN2_LO)));
  const r2 = f32x4.mul(r, r);
  const lo = f32x4.add(f32x4.add(kv(ONE), r), f32x4.mul(r2, f32x4.add(kv(HALF), f32x4.mul(r, kv(INV6)))));
  const hi = f32x4.add(f32x4.add(kv(INV24), f32x4.mul(r, kv(INV120))), f32x4.mul(r2, kv(INV720)));
  const q = f32x4.add(lo, f32x4.mul(f32x4.mul(r2, r2), hi));
  // << 23 keeps n (two's complement) in the exponent field; 1.0f's bits are the bias 127 << 23.
  const pow2 = i32x4.add(i32x4.shl(shifted, 23), kv(ONE));
  return f32x4.mul(q, pow2);
}

/** erf(v) given |v| and exp(-v*v), without the sign. */
@inline function erfAbs(av: v128, expNegSq: v128): v128 {
  const t = f32x4.div(kv(ONE), f32x4.add(kv(ONE), f32x4.mul(kv(ERF_P), av)));
  const t2 = f32x4.mul(t, t);
  const lo = f32x4.add(kv(ERF_A1), f32x4.mul(t, kv(ERF_A2)));
  const hi = f32x4.add(f32x4.add(kv(ERF_A3), f32x4.mul(t, kv(ERF_A4))), f32x4.mul(t2, kv(ERF_A5)));
  const poly = f32x4.add(lo, f32x4.mul(t2, hi));
  return f32x4.sub(kv(ONE), f32x4.mul(f32x4.mul(t, poly), expNegSq));
}

/** Phi(x) = (1 + erf(x / sqrt 2)) / 2, and exp(-x^2 / 2) for the density. */
@inline function normalCdf(x: v128, expHalfSq: v128): v128 {
  const sign = kv(SIGN);
  const av = f32x4.mul(v128.andnot(x, sign), kv(SQRT1_2));
  const e = erfAbs(av, expHalfSq);
  const signed = v128.or(e, v128.and(x, sign));
  return f32x4.mul(kv(HALF), f32x4.add(kv(ONE), signed));
}

// Exact GELU x * Phi(x) on rows [lo, hi) of F columns.

/**
 * out = gelu(x), and x is overwritten with the derivative Phi(x) + x * phi(x):
 * backward needs only that, and both share one exp.
 */
export function gelu_forward(out: usize, x: usize, F: i32, lo: i32, hi: i32): void {
  for (let i = lo * F; i < hi * F; i += 4) {
    const v = v128.load(at(x, i));
    const e = expv(f32x4.mul(f32x4.mul(v, v), kv(MINUS_HALF)));
    const cdf = normalCdf(v, e);
    v128.store(at(out, i), f32x4.mul(v, cdf));
    const pdf = f32x4.mul(e, kv(INV_SQRT_2PI));
    v128.store(at(x, i), f32x4.add(cdf, f32x4.mul(v, pdf)));
  }
}

/** dout *= gelu'(x), the derivative gelu_forward left in place of x. */
export function gelu_backward(dout: usize, deriv: usize, F: i32, lo: i32, hi: i32): void {
  for (let i = lo * F; i < hi * F; i += 4) {
    v128.store(at(dout, i), f32x4.mul(v128.load(at(dout, i)), v128.load(at(deriv, i))));
  }
}

// ---------------------------------------------------------------------------
// Causal attention, one (sequence, head) pair per item: item = b * H + h.
// q, k, v, out are [B*T, C] with head h in columns h*D..h*D+D. att holds the
// softmax probabilities [B, H, T, Tp], Tp = T rounded up to 4: for each block
// of 4 queries, the keys up to the block's end are written (zeros above the
// diagonal), so every product runs as whole 4-row blocks of the matmul
// kernel; keys past the block are never read. scratch holds (D + 4) * Tp
// floats per item: one transposed head of K or V, and 4 rows of score gradients.
// attention_decode's items are rows of one sequence instead (the KV cache's).

@inline function round4(n: i32): i32 {
  return (n + 3) & ~3;
}

/** Lanes [base, base + 4) that are below n: all ones, else zeros. */
@inline function below(base: i32, n: i32): v128 {
  return i32x4.lt_s(i32x4.add(i32x4.splat(base), i32x4(0, 1, 2, 3)), i32x4.splat(n));
}

/**
 * row[0..n) = softmax(scale * row[0..n)) in place, and row[n..round4(n)) = 0
 * (those entries hold scores that do not count: of later keys, or repeats).
 */
@inline function softmaxRow(row: usize, n: i32, scale: f32): void {
  const end = round4(n);
  const tail = end - 4;
  let mv = kv(NEG_INF);
  for (let t2 = 0; t2 < tail; t2 += 4) mv = f32x4.pmax(mv, v128.load(at(row, t2)));
  const keep = below(tail, n);
  mv = f32x4.pmax(mv, v128.bitselect(v128.load(at(row, tail)), kv(NEG_INF), keep));
  const sc = f32x4.splat(scale);
  const ms = f32x4.mul(hmax(mv), sc);
  let sv = f32x4.splat(0);
  for (let t2 = 0; t2 < end; t2 += 4) {
    let e = expv(f32x4.sub(f32x4.mul(v128.load(at(row, t2)), sc), ms));
    if (t2 == tail) e = v128.and(e, keep);
    v128.store(at(row, t2), e);
    sv = f32x4.add(sv, e);
  }
  const inv = f32x4.splat(<f32>1 / hsum(sv));
  for (let t2 = 0; t2 < end; t2 += 4) v128.store(at(row, t2), f32x4.mul(v128.load(at(row, t2)), inv));
}

/** dst [D, Tp] = the head's [T, D] block of src (row stride C), zero past column T. */
@inline function transposeHead(dst: usize, src: usize, T: i32, Tp: i32, C: i32, D: i32): void {
  transposeRows(dst, Tp, src, C, 0, T, D);
  for (let d = 0; d < D; d++) {
    for (let t = T; t < Tp; t++) store<f32>(at(dst, d * Tp + t), 0);
  }
}

export function attention_forward(out: usize, att: usize, scratch: usize, q: usize, k: usize, v: usize,
  T: i32, C: i32, H: i32, scale: f32, lo: i32, hi: i32): void {
  const D = C / H;
  const Tp = round4(T);
  const cs = <usize>C << 2, ts = <usize>Tp << 2;
  for (let item = lo; item < hi; item++) {
    const base = (item / H) * T * C + (item % H) * D;
    const a0 = at(att, item * T * Tp);
    const kT = at(scratch, item * (D + 4) * Tp);
    transposeHead(kT, at(k, base), T, Tp, C, D);
    for (let t0 = 0; t0 < T; t0 += 4) {
      const rows = min(4, T - t0);
      const block = a0 + <usize>t0 * ts;
      gemm(block, ts, 0, at(q, base + t0 * C), cs, 4, kT, ts, 0, D, min(t0 + 4, Tp), 0, rows);
      for (let r = 0; r < rows; r++) softmaxRow(block + <usize>r * ts, t0 + r + 1, scale);
      gemm(at(out, base + t0 * C), cs, 0, block, ts, 4, at(v, base), cs, 0, t0 + rows, D, 0, rows);
    }
  }
}

/** The sums of a's, b's, c's and d's lanes, in lanes 0 to 3. */
@inline function hsum4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = f32x4.add(v128.shuffle<f32>(a, b, 0, 4, 1, 5), v128.shuffle<f32>(a, b, 2, 6, 3, 7));
  const cd = f32x4.add(v128.shuffle<f32>(c, d, 0, 4, 1, 5), v128.shuffle<f32>(c, d, 2, 6, 3, 7));
  return f32x4.add(v128.shuffle<f32>(ab, cd, 0, 1, 4, 5), v128.shuffle<f32>(ab, cd, 2, 3, 6, 7));
}

/**
 * Rows t in [lo, hi) of one sequence of T, each against the keys and values of
 * rows [0, t]: what attention_forward gives those rows, when the rows before
 * them are the KV cache (a decode runs one). att holds row t's probabilities at
 * t * round4(T), one head after another. The scores are dot products with the
 * keys where they lie, four keys per pass (transposing them for the matmul
 * kernel, per token, would cost as much as the scores); a pass past key t
 * repeats key t, and softmaxRow clears those scores.
 */
export function attention_decode(out: usize, att: usize, q: usize, k: usize, v: usize, T: i32, C: i32, H: i32,
  scale: f32, lo: i32, hi: i32): void {
  const D = C / H;
  const cs = <usize>C << 2;
  for (let t = lo; t < hi; t++) {
    const n = t + 1;
    const row = at(att, t * round4(T));
    for (let h = 0; h < H; h++) {
      const qh = at(q, t * C + h * D);
      const kh = at(k, h * D);
      for (let j = 0; j < n; j += 4) {
        const k0 = kh + <usize>j * cs, k1 = kh + <usize>min(j + 1, t) * cs;
        const k2 = kh + <usize>min(j + 2, t) * cs, k3 = kh + <usize>min(j + 3, t) * cs;
        let s0 = f32x4.splat(0), s1 = s0, s2 = s0, s3 = s0;
        for (let d = 0; d < D; d += 4) {
          const o = <usize>d << 2;
          const qd = v128.load(qh + o);
          s0 = madd(qd, v128.load(k0 + o), s0); s1 = madd(qd, v128.load(k1 + o), s1);
          s2 = madd(qd, v128.load(k2 + o), s2); s3 = madd(qd, v128.load(k3 + o), s3);
        }
        v128.store(at(row, j), hsum4(s0, s1, s2, s3));
      }
      softmaxRow(row, n, scale);
      gemm(at(out, t * C + h * D), cs, 0, row, 0, 4, at(v, h * D), cs, 0, n, D, 0, 1);
    }
  }
}

/**
 * Writes dq, dk, dv (no need to clear them) and overwrites att with the score
 * gradients. dv and dk gather each key's column of att (all queries that saw
 * that key): A = att^T, read in place through the matmul kernel's strides.
 */
export function attention_backward(dq: usize, dk: usize, dv: usize, scratch: usize, dout: usize, q: usize, k: usize,
  v: usize, att: usize, T: i32, C: i32, H: i32, scale: f32, lo: i32, hi: i32): void {
  const D = C / H;
  const Tp = round4(T);
  const cs = <usize>C << 2, ts = <usize>Tp << 2;
  for (let item = lo; item < hi; item++) {
    const base = (item / H) * T * C + (item % H) * D;
    const a0 = at(att, item * T * Tp);
    for (let t2 = 0; t2 < T; t2 += 4) {
      gemm(at(dv, base + t2 * C), cs, 0, a0 + <usize>(t2 * Tp + t2) * 4, 4, ts, at(dout, base + t2 * C), cs, 0,
        T - t2, D, 0, min(4, T - t2));
    }
    const vT = at(scratch, item * (D + 4) * Tp);
    const datt = vT + <usize>D * ts;
    transposeHead(vT, at(v, base), T, Tp, C, D);
    for (let t0 = 0; t0 < T; t0 += 4) {
      const rows = min(4, T - t0);
      const cols = min(t0 + 4, Tp);
      gemm(datt, ts, 0, at(dout, base + t0 * C), cs, 4, vT, ts, 0, D, cols, 0, rows);
      for (let r = 0; r < rows; r++) {
        const row = a0 + <usize>(t0 + r) * ts;
        const dr = datt + <usize>r * ts;
        const end = round4(t0 + r + 1);
        // Entries past the query are zero probabilities: they add nothing to the sum.
        let s = f32x4.splat(0);
        for (let t2 = 0; t2 < end; t2 += 4) s = f32x4.add(s, f32x4.mul(v128.load(at(row, t2)), v128.load(at(dr, t2))));
        const dsum = f32x4.splat(hsum(s));
        const sc = f32x4.splat(scale);
        for (let t2 = 0; t2 < end; t2 += 4) {
          const p = v128.load(at(row, t2));
          v128.store(at(row, t2), f32x4.mul(f32x4.mul(p, f32x4.sub(v128.load(at(dr, t2)), dsum)), sc));
        }
      }
      gemm(at(dq, base + t0 * C), cs, 0, a0 + <usize>t0 * ts, ts, 4, at(k, base), cs, 0, t0 + rows, D, 0, rows);
    }
    for (let t2 = 0; t2 < T; t2 += 4) {
      gemm(at(dk, base + t2 * C), cs, 0, a0 + <usize>(t2 * Tp + t2) * 4, 4, ts, at(q, base + t2 * C), cs, 0,
        T - t2, D, 0, min(4, T - t2));
    }
  }
}

// ---------------------------------------------------------------------------
// Cross-entropy per row: losses[r] = logsumexp(logits[r]) - logits[r, y[r]].
// With gradScale != 0 the logits are replaced by their gradient
// (softmax - onehot) * gradScale. V is a multiple of 4.

export function crossentropy(logits: usize, losses: usize, targets: usize, V: i32, gradScale: f32, lo: i32, hi: i32): void {
  for (let r = lo; r < hi; r++) {
    const row = at(logits, r * V);
    let mv = kv(NEG_INF);
    for (let j = 0; j < V; j += 4) mv = f32x4.pmax(mv, v128.load(at(row, j)));
    const ms = hmax(mv);
    const mx = f32x4.extract_lane(ms, 0);
    // The sum in f64, as the reference's float64 log-sum-exp.
    let s0 = f64x2.splat(0), s1 = f64x2.splat(0);
    for (let j = 0; j < V; j += 4) {
      const e = expv(f32x4.sub(v128.load(at(row, j)), ms));
      s0 = f64x2.add(s0, f64x2.promote_low_f32x4(e));
      s1 = f64x2.add(s1, f64x2.promote_low_f32x4(v128.shuffle<f32>(e, e, 2, 3, 0, 1)));
    }
    const sum = f64x2.extract_lane(s0, 0) + f64x2.extract_lane(s1, 0) + f64x2.extract_lane(s0, 1) + f64x2.extract_lane(s1, 1);
    const lse = <f32>Math.log(sum) + mx;
    const y = load<i32>(at(targets, r));
    store<f32>(at(losses, r), lse - load<f32>(at(row, y)));
    if (gradScale != 0) {
      const ls = f32x4.splat(lse), gs = f32x4.splat(gradScale);
      for (let j = 0; j < V; j += 4) v128.store(at(row, j), f32x4.mul(expv(f32x4.sub(v128.load(at(row, j)), ls)), gs));
      store<f32>(at(row, y), load<f32>(at(row, y)) - gradScale);
    }
  }
}

// ---------------------------------------------------------------------------
// Optimizer.

const NORM_BLOCK = 1024;

/**
 * out[b] = sum of squares of x over blocks b in [lo, hi) of 1024 floats (x has
 * n), as f64: the partial sums of clipping's global norm, block by block so
 * threads can share the work and the total is the same however they split it.
 */
export function sumsq(x: usize, n: i32, out: usize, lo: i32, hi: i32): void {
  for (let b = lo; b < hi; b++) {
    const start = b * NORM_BLOCK;
    const end = min(n, start + NORM_BLOCK);
    let s = f32x4.splat(0);
    let i = start;
    for (; i + 4 <= end; i += 4) {
      const v = v128.load(at(x, i));
      s = f32x4.add(s, f32x4.mul(v, v));
    }
    let total = <f64>hsum(s);
    for (; i < end; i++) {
      const v = <f64>load<f32>(at(x, i));
      total += v * v;
    }
    store<f64>(out + (<usize>b << 3), total);
  }
}

/**
 * AdamW on elements [lo, hi) of the flat parameter vector: the gradient is
 * scaled by gradScale (clipping), m and v move, and
 * p -= lr * (m/bc1 / (sqrt(v/bc2) + eps) + wd * p), with wd applied only inside
 * the `nDecay` element ranges [start, end) listed as i32 pairs at `decayRanges`.
 */
export function adamw(p: usize, g: usize, m: usize, v: usize, decayRanges: usize, nDecay: i32, lr: f32, beta1: f32,
  beta2: f32, eps: f32, wd: f32, bc1: f32, bc2: f32, gradScale: f32, lo: i32, hi: i32): void {
  let i = lo;
  for (let r = 0; r <= nDecay && i < hi; r++) {
    const start = r < nDecay ? load<i32>(decayRanges + (<usize>r << 3)) : hi;
    const end = r < nDecay ? load<i32>(decayRanges + (<usize>r << 3), 4) : hi;
    if (i < start) {
      const stop = min(start, hi);
      adamwRange(p, g, m, v, lr, beta1, beta2, eps, 0, bc1, bc2, gradScale, i, stop);
      i = stop;
    }
    if (i < end) {
      const stop = min(end, hi);
      adamwRange(p, g, m, v, lr, beta1, beta2, eps, wd, bc1, bc2, gradScale, i, stop);
      i = stop;
    }
  }
}

// Lane by lane the same IEEE operations as the scalar formula (no fused
// multiply-add here), so the update is exact whichever build runs it.
@inline function adamwRange(p: usize, g: usize, m: usize, v: usize, lr: f32, beta1: f32, beta2: f32, eps: f32, wd: f32,
  bc1: f32, bc2: f32, gradScale: f32, lo: i32, hi: i32): void {
  const gs = f32x4.splat(gradScale), b1 = f32x4.splat(beta1), b2 = f32x4.splat(beta2);
  const c1 = f32x4.splat(<f32>1 - beta1), c2 = f32x4.splat(<f32>1 - beta2);
  const lrv = f32x4.splat(lr), epsv = f32x4.splat(eps), wdv = f32x4.splat(wd), bc1v = f32x4.splat(bc1), bc2v = f32x4.splat(bc2);
  let i = lo;
  for (; i + 4 <= hi; i += 4) {
    const grad = f32x4.mul(v128.load(at(g, i)), gs);
    const mi = f32x4.add(f32x4.mul(b1, v128.load(at(m, i))), f32x4.mul(c1, grad));
    const vi = f32x4.add(f32x4.mul(b2, v128.load(at(v, i))), f32x4.mul(c2, f32x4.mul(grad, grad)));
    v128.store(at(m, i), mi);
    v128.store(at(v, i), vi);
    const pi = v128.load(at(p, i));
    const step = f32x4.add(f32x4.div(f32x4.div(mi, bc1v), f32x4.add(f32x4.sqrt(f32x4.div(vi, bc2v)), epsv)), f32x4.mul(wdv, pi));
    v128.store(at(p, i), f32x4.sub(pi, f32x4.mul(lrv, step)));
  }
  for (; i < hi; i++) {
    const grad = load<f32>(at(g, i)) * gradScale;
    const mi = beta1 * load<f32>(at(m, i)) + (<f32>1 - beta1) * grad;
    const vi = beta2 * load<f32>(at(v, i)) + (<f32>1 - beta2) * (grad * grad);
    store<f32>(at(m, i), mi);
    store<f32>(at(v, i), vi);
    const pi = load<f32>(at(p, i));
    store<f32>(at(p, i), pi - lr * ((mi / bc1) / (Mathf.sqrt(vi / bc2) + eps) + wd * pi));
  }
}

// ---------------------------------------------------------------------------
// int8 decoding (the int8 sampling lever on this backend, content/docs/kernels.md): a product's
// weights are an int8 block (engine/quantize.ts int8Layout: N f32 channel scales, then N channels
// of K int8 values, a channel contiguous along K) and its input row is quantized to int8 once
// (quantize_rows). A channel's sum is exact in i32: products of values within [-127, 127] are
// exact (i32x4.dot_i16x8_s over the values widened to i16), and K of them stay far inside i32
// (127^2 * 1536 = 24.8 million for Huge's fc_out). Both builds run the same integer instructions
// (no relaxed op), so they give the same bits; only the store rounds: sum * (row scale * channel
// scale), then + bias, then + c.

/**
 * Rows r in [lo, hi) of x [rows, K] quantized as engine/quantize.ts quantizeRows does: scale =
 * max|x| / 127 (0 for a row of zeros), q = round(x * (127 / max)) half to even, into q (K bytes a
 * row) and scales (an f32 a row).
 */
export function quantize_rows(q: usize, scales: usize, x: usize, K: i32, lo: i32, hi: i32): void {
  for (let r = lo; r < hi; r++) {
    const xr = at(x, r * K);
    const qr = q + <usize>r * <usize>K;
    let mv = f32x4.splat(0);
    let k = 0;
    for (; k + 4 <= K; k += 4) mv = f32x4.max(mv, f32x4.abs(v128.load(at(xr, k))));
    let amax = f32x4.extract_lane(hmax(mv), 0);
    for (; k < K; k++) amax = max(amax, abs(load<f32>(at(xr, k))));
    if (amax == 0) {
      store<f32>(at(scales, r), 0);
      memory.fill(qr, 0, <usize>K);
      continue;
    }
    store<f32>(at(scales, r), amax / <f32>127);
    const inv = <f32>127 / amax;
    const iv = f32x4.splat(inv), lim = f32x4.splat(127), nlim = f32x4.splat(-127);
    k = 0;
    for (; k + 16 <= K; k += 16) {
      const a = i32x4.trunc_sat_f32x4_s(f32x4.min(lim, f32x4.max(nlim, f32x4.nearest(f32x4.mul(v128.load(at(xr, k)), iv)))));
      const b = i32x4.trunc_sat_f32x4_s(f32x4.min(lim, f32x4.max(nlim, f32x4.nearest(f32x4.mul(v128.load(at(xr, k + 4)), iv)))));
      const c = i32x4.trunc_sat_f32x4_s(f32x4.min(lim, f32x4.max(nlim, f32x4.nearest(f32x4.mul(v128.load(at(xr, k + 8)), iv)))));
      const d = i32x4.trunc_sat_f32x4_s(f32x4.min(lim, f32x4.max(nlim, f32x4.nearest(f32x4.mul(v128.load(at(xr, k + 12)), iv)))));
      v128.store(qr + <usize>k, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(a, b), i16x8.narrow_i32x4_s(c, d)));
    }
    for (; k < K; k++) {
      const v = min(<f32>127, max(<f32>-127, nearest(load<f32>(at(xr, k)) * inv)));
      store<i8>(qr + <usize>k, <i8><i32>v);
    }
  }
}

/**
 * 16 int8 weights w times the row's 16 values (xl, xh: widened to i16 once for the four channels
 * of a pass), summed in pairs into 4 exact i32 lanes. Faster here than multiplying the int8 lanes
 * in i16 (extmul, two products fit an i16) and widening those sums pairwise: a token's products
 * took 1067 against 1743 us for Huge, 133 against 160 for Medium (one thread, best of 15).
 */
@inline function dot16(xl: v128, xh: v128, w: v128): v128 {
  return i32x4.add(i32x4.dot_i16x8_s(xl, i16x8.extend_low_i8x16_s(w)), i32x4.dot_i16x8_s(xh, i16x8.extend_high_i8x16_s(w)));
}

/** The exact sum of a channel's K int8 products with the row, from k0 on (the tail a 16-wide loop left). */
@inline function dotTail(x: usize, w: usize, k0: i32, K: i32): i32 {
  let s = 0;
  for (let k = k0; k < K; k++) s += <i32>load<i8>(x + <usize>k) * <i32>load<i8>(w + <usize>k);
  return s;
}

/** The sums of a's, b's, c's and d's i32 lanes, in lanes 0 to 3. */
@inline function hsum4i(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = i32x4.add(v128.shuffle<i32>(a, b, 0, 4, 1, 5), v128.shuffle<i32>(a, b, 2, 6, 3, 7));
  const cd = i32x4.add(v128.shuffle<i32>(c, d, 0, 4, 1, 5), v128.shuffle<i32>(c, d, 2, 6, 3, 7));
  return i32x4.add(v128.shuffle<i32>(ab, cd, 0, 1, 4, 5), v128.shuffle<i32>(ab, cd, 2, 3, 6, 7));
}

/**
 * out[r, n] = c[r, n] + bias[n] + sum_k q[r, k] * w_n[k] * (scales[r] * ws[n]) for rows r in
 * [lo, hi) and every channel n of the int8 block w (N scales ws, then N channels of K bytes); q
 * and scales as quantize_rows leaves them, c and bias 0 for none. Four channels a pass share each
 * 16 bytes of the row loaded once; a channel left over (N not a multiple of 4) goes alone.
 */
export function matvec_i8(out: usize, q: usize, scales: usize, w: usize, bias: usize, c: usize, K: i32, N: i32,
  lo: i32, hi: i32): void {
  const kb = <usize>K;
  const wq = w + (<usize>N << 2);
  for (let r = lo; r < hi; r++) {
    const x = q + <usize>r * kb;
    const sx = load<f32>(at(scales, r));
    const o = at(out, r * N);
    const cr = c ? at(c, r * N) : 0;
    let n = 0;
    for (; n + 4 <= N; n += 4) {
      const w0 = wq + <usize>n * kb, w1 = w0 + kb, w2 = w1 + kb, w3 = w2 + kb;
      let a0 = i32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
      let k = 0;
      for (; k + 16 <= K; k += 16) {
        const xv = v128.load(x + <usize>k);
        const xl = i16x8.extend_low_i8x16_s(xv), xh = i16x8.extend_high_i8x16_s(xv);
        a0 = i32x4.add(a0, dot16(xl, xh, v128.load(w0 + <usize>k)));
        a1 = i32x4.add(a1, dot16(xl, xh, v128.load(w1 + <usize>k)));
        a2 = i32x4.add(a2, dot16(xl, xh, v128.load(w2 + <usize>k)));
        a3 = i32x4.add(a3, dot16(xl, xh, v128.load(w3 + <usize>k)));
      }
      let sums = hsum4i(a0, a1, a2, a3);
      if (k < K) sums = i32x4.add(sums, i32x4(dotTail(x, w0, k, K), dotTail(x, w1, k, K), dotTail(x, w2, k, K), dotTail(x, w3, k, K)));
      let y = f32x4.mul(f32x4.convert_i32x4_s(sums), f32x4.mul(f32x4.splat(sx), v128.load(at(w, n))));
      if (bias) y = f32x4.add(y, v128.load(at(bias, n)));
      if (cr) y = f32x4.add(y, v128.load(at(cr, n)));
      v128.store(at(o, n), y);
    }
    for (; n < N; n++) {
      const wn = wq + <usize>n * kb;
      let a = i32x4.splat(0);
      let k = 0;
      for (; k + 16 <= K; k += 16) {
        const xv = v128.load(x + <usize>k);
        a = i32x4.add(a, dot16(i16x8.extend_low_i8x16_s(xv), i16x8.extend_high_i8x16_s(xv), v128.load(wn + <usize>k)));
      }
      const sum = i32x4.extract_lane(a, 0) + i32x4.extract_lane(a, 1) + i32x4.extract_lane(a, 2) + i32x4.extract_lane(a, 3) + dotTail(x, wn, k, K);
      let y = <f32>sum * (sx * load<f32>(at(w, n)));
      if (bias) y += load<f32>(at(bias, n));
      if (cr) y += load<f32>(at(cr, n));
      store<f32>(at(o, n), y);
    }
  }
}
