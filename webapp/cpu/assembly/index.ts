// The CPU backend's kernels. Why AssemblyScript: it installs through npm alone,
// reads like the TypeScript around it, and emits WebAssembly SIMD (v128).
//
// The backend lays out every buffer in one linear memory and passes byte
// addresses; each kernel works on a range [lo, hi) of independent items (rows,
// heads, column groups, elements) so the backend can split a call across
// threads that share the memory. Kernels allocate nothing and hold no state.
// Matrices are row-major; widths given to SIMD loops are multiples of 4 (the
// backend checks this once).

/** First free byte after the module's own data: where the backend starts its layout. */
export function heap_base(): usize {
  return __heap_base;
}

@inline function at(base: usize, index: i32): usize {
  return base + (<usize>index << 2);
}

// ---------------------------------------------------------------------------
// Matrix multiply: out[i, :] (+)= sum_p A(i, p) * b[p, :] (+ bias) for rows
// i in [lo, hi), with A(i, p) = a[i * rowStride + p * innerStride]. The strides
// let the same kernel read a transposed A without copying it (weight
// gradients: A = x^T). b is [P, M]. Blocks of 4 rows x 8 columns keep 8
// accumulators in registers; one broadcast of A feeds 2 vector multiplies.
// The p dimension is cut into panels whose slice of b stays in cache while
// every row block of the range passes over it.

@inline function accInit(out: usize, bias: usize, accumulate: i32): v128 {
  let acc = accumulate ? v128.load(out) : f32x4.splat(0);
  if (bias) acc = f32x4.add(acc, v128.load(bias));
  return acc;
}

const PANEL_FLOATS = 32768; // 128 KiB of b per panel: well inside L2

export function matmul(out: usize, a: usize, b: usize, bias: usize, rowStride: i32, innerStride: i32,
  P: i32, M: i32, accumulate: i32, lo: i32, hi: i32): void {
  const panel = max(16, PANEL_FLOATS / M);
  for (let p0 = 0; p0 < P; p0 += panel) {
    const first = p0 == 0;
    matmulPanel(out, a + (<usize>p0 * <usize>innerStride << 2), at(b, p0 * M), first ? bias : 0, rowStride, innerStride,
      min(panel, P - p0), M, first ? accumulate : 1, lo, hi);
  }
}

function matmulPanel(out: usize, a: usize, b: usize, bias: usize, rowStride: i32, innerStride: i32,
  P: i32, M: i32, accumulate: i32, lo: i32, hi: i32): void {
  const rs = <usize>rowStride << 2;
  const is = <usize>innerStride << 2;
  const bRow = <usize>M << 2;
  let i = lo;
  for (; i + 4 <= hi; i += 4) {
    const a0 = a + <usize>i * rs;
    const o0 = at(out, i * M);
    let j = 0;
    for (; j + 8 <= M; j += 8) {
      const oj = o0 + (<usize>j << 2);
      const bj = bias ? at(bias, j) : 0;
      let c00 = accInit(oj, bj, accumulate), c01 = accInit(oj + 16, bj ? bj + 16 : 0, accumulate);
      let c10 = accInit(oj + bRow, bj, accumulate), c11 = accInit(oj + bRow + 16, bj ? bj + 16 : 0, accumulate);
      let c20 = accInit(oj + 2 * bRow, bj, accumulate), c21 = accInit(oj + 2 * bRow + 16, bj ? bj + 16 : 0, accumulate);
      let c30 = accInit(oj + 3 * bRow, bj, accumulate), c31 = accInit(oj + 3 * bRow + 16, bj ? bj + 16 : 0, accumulate);
      let pa = a0;
      let pb = at(b, j);
      for (let p = 0; p < P; p++) {
        const b0 = v128.load(pb);
        const b1 = v128.load(pb, 16);
        const x0 = v128.load32_splat(pa);
        const x1 = v128.load32_splat(pa + rs);
        const x2 = v128.load32_splat(pa + 2 * rs);
        const x3 = v128.load32_splat(pa + 3 * rs);
        c00 = f32x4.add(c00, f32x4.mul(x0, b0)); c01 = f32x4.add(c01, f32x4.mul(x0, b1));
        c10 = f32x4.add(c10, f32x4.mul(x1, b0)); c11 = f32x4.add(c11, f32x4.mul(x1, b1));
        c20 = f32x4.add(c20, f32x4.mul(x2, b0)); c21 = f32x4.add(c21, f32x4.mul(x2, b1));
        c30 = f32x4.add(c30, f32x4.mul(x3, b0)); c31 = f32x4.add(c31, f32x4.mul(x3, b1));
        pa += is;
        pb += bRow;
      }
      v128.store(oj, c00); v128.store(oj, c01, 16);
      v128.store(oj + bRow, c10); v128.store(oj + bRow, c11, 16);
      v128.store(oj + 2 * bRow, c20); v128.store(oj + 2 * bRow, c21, 16);
      v128.store(oj + 3 * bRow, c30); v128.store(oj + 3 * bRow, c31, 16);
    }
    for (; j < M; j += 4) {
      const oj = o0 + (<usize>j << 2);
      const bj = bias ? at(bias, j) : 0;
      let c0 = accInit(oj, bj, accumulate), c1 = accInit(oj + bRow, bj, accumulate);
      let c2 = accInit(oj + 2 * bRow, bj, accumulate), c3 = accInit(oj + 3 * bRow, bj, accumulate);
      let pa = a0;
      let pb = at(b, j);
      for (let p = 0; p < P; p++) {
        const b0 = v128.load(pb);
        c0 = f32x4.add(c0, f32x4.mul(v128.load32_splat(pa), b0));
        c1 = f32x4.add(c1, f32x4.mul(v128.load32_splat(pa + rs), b0));
        c2 = f32x4.add(c2, f32x4.mul(v128.load32_splat(pa + 2 * rs), b0));
        c3 = f32x4.add(c3, f32x4.mul(v128.load32_splat(pa + 3 * rs), b0));
        pa += is;
        pb += bRow;
      }
      v128.store(oj, c0); v128.store(oj + bRow, c1); v128.store(oj + 2 * bRow, c2); v128.store(oj + 3 * bRow, c3);
    }
  }
  for (; i < hi; i++) {
    const a0 = a + <usize>i * rs;
    const o0 = at(out, i * M);
    for (let j = 0; j < M; j += 4) {
      const oj = o0 + (<usize>j << 2);
      let c = accInit(oj, bias ? at(bias, j) : 0, accumulate);
      let pa = a0;
      let pb = at(b, j);
      for (let p = 0; p < P; p++) {
        c = f32x4.add(c, f32x4.mul(v128.load32_splat(pa), v128.load(pb)));
        pa += is;
        pb += bRow;
      }
      v128.store(oj, c);
    }
  }
}

/**
 * dst[c, r] = src[r, c] for source rows r in [lo, hi); src is [rows, cols].
 * 4x4 tiles are turned with shuffles; 16 source rows at a time fill whole
 * 64-byte lines of dst, so its far-apart rows never share a half-written line.
 */
export function transpose(dst: usize, src: usize, rows: i32, cols: i32, lo: i32, hi: i32): void {
  let r = lo;
  for (; r + 16 <= hi; r += 16) {
    for (let c = 0; c < cols; c += 4) {
      for (let rr = r; rr < r + 16; rr += 4) transpose4x4(dst, src, rows, cols, rr, c);
    }
  }
  for (; r + 4 <= hi; r += 4) {
    for (let c = 0; c < cols; c += 4) transpose4x4(dst, src, rows, cols, r, c);
  }
  for (; r < hi; r++) {
    for (let c = 0; c < cols; c++) store<f32>(at(dst, c * rows + r), load<f32>(at(src, r * cols + c)));
  }
}

@inline function transpose4x4(dst: usize, src: usize, rows: i32, cols: i32, r: i32, c: i32): void {
  const s = at(src, r * cols + c);
  const stride = <usize>cols << 2;
  const r0 = v128.load(s), r1 = v128.load(s + stride), r2 = v128.load(s + 2 * stride), r3 = v128.load(s + 3 * stride);
  const t0 = v128.shuffle<f32>(r0, r1, 0, 4, 1, 5), t1 = v128.shuffle<f32>(r2, r3, 0, 4, 1, 5);
  const t2 = v128.shuffle<f32>(r0, r1, 2, 6, 3, 7), t3 = v128.shuffle<f32>(r2, r3, 2, 6, 3, 7);
  const d = at(dst, c * rows + r);
  const dstride = <usize>rows << 2;
  v128.store(d, v128.shuffle<f32>(t0, t1, 0, 1, 4, 5));
  v128.store(d + dstride, v128.shuffle<f32>(t0, t1, 2, 3, 6, 7));
  v128.store(d + 2 * dstride, v128.shuffle<f32>(t2, t3, 0, 1, 4, 5));
  v128.store(d + 3 * dstride, v128.shuffle<f32>(t2, t3, 2, 3, 6, 7));
}

/** out[r, g*4..g*4+4] += sum over rows of x, for column groups g in [lo, hi): bias gradients. */
export function colsum(out: usize, x: usize, rows: i32, cols: i32, lo: i32, hi: i32): void {
  for (let g = lo; g < hi; g++) {
    const o = at(out, g * 4);
    let acc = v128.load(o);
    let p = at(x, g * 4);
    const stride = <usize>cols << 2;
    for (let r = 0; r < rows; r++) {
      acc = f32x4.add(acc, v128.load(p));
      p += stride;
    }
    v128.store(o, acc);
  }
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

/** Scatter-adds dout into the embedding gradients; rows may share a token, so this runs on one thread. */
export function embed_backward(dwte: usize, dwpe: usize, dout: usize, tokens: usize, T: i32, C: i32, rows: i32): void {
  for (let r = 0; r < rows; r++) {
    const d = at(dout, r * C);
    const e = at(dwte, load<i32>(at(tokens, r)) * C);
    const p = at(dwpe, (r % T) * C);
    for (let c = 0; c < C; c += 4) {
      const g = v128.load(at(d, c));
      v128.store(at(e, c), f32x4.add(v128.load(at(e, c)), g));
      v128.store(at(p, c), f32x4.add(v128.load(at(p, c)), g));
    }
  }
}

// ---------------------------------------------------------------------------
// LayerNorm over rows of C, biased variance (as GPT-2). mean and rstd are saved
// per row for backward.

@inline function hsum(v: v128): f32 {
  return f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1) + f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3);
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

/** dx[r] += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * w. */
export function layernorm_backward(dx: usize, dout: usize, x: usize, w: usize, mean: usize, rstd: usize,
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
    for (let c = 0; c < C; c += 4) {
      const xhat = f32x4.mul(f32x4.sub(v128.load(at(xr, c)), mv), rv);
      const dxhat = f32x4.mul(v128.load(at(dr, c)), v128.load(at(w, c)));
      const g = f32x4.mul(rv, f32x4.sub(f32x4.sub(dxhat, m1), f32x4.mul(xhat, m2)));
      v128.store(at(o, c), f32x4.add(v128.load(at(o, c)), g));
    }
  }
}

/** dw += sum_r dout * xhat, db += sum_r dout, for column groups g in [lo, hi). */
export function layernorm_param_grads(dw: usize, db: usize, dout: usize, x: usize, mean: usize, rstd: usize,
  rows: i32, C: i32, lo: i32, hi: i32): void {
  for (let g = lo; g < hi; g++) {
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
// below 1.5e-7): WebAssembly has neither.

@inline function expv(x: v128): v128 {
  x = f32x4.min(f32x4.max(x, f32x4.splat(-87.0)), f32x4.splat(88.0));
  const n = f32x4.nearest(f32x4.mul(x, f32x4.splat(1.4426950408889634)));
  const r = f32x4.sub(f32x4.sub(x, f32x4.mul(n, f32x4.splat(0.693359375))), f32x4.mul(n, f32x4.splat(-2.12194440e-4)));
  let q = f32x4.add(f32x4.splat(1.0 / 120.0), f32x4.mul(r, f32x4.splat(1.0 / 720.0)));
  q = f32x4.add(f32x4.splat(1.0 / 24.0), f32x4.mul(r, q));
  q = f32x4.add(f32x4.splat(1.0 / 6.0), f32x4.mul(r, q));
  q = f32x4.add(f32x4.splat(0.5), f32x4.mul(r, q));
  q = f32x4.add(f32x4.splat(1.0), f32x4.mul(r, q));
  q = f32x4.add(f32x4.splat(1.0), f32x4.mul(r, q));
  const pow2 = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23);
  return f32x4.mul(q, pow2);
}

/** erf(v) given |v| and exp(-v*v), without the sign. */
@inline function erfAbs(av: v128, expNegSq: v128): v128 {
  const t = f32x4.div(f32x4.splat(1.0), f32x4.add(f32x4.splat(1.0), f32x4.mul(f32x4.splat(0.3275911), av)));
  let poly = f32x4.add(f32x4.splat(-1.453152027), f32x4.mul(t, f32x4.splat(1.061405429)));
  poly = f32x4.add(f32x4.splat(1.421413741), f32x4.mul(t, poly));
  poly = f32x4.add(f32x4.splat(-0.284496736), f32x4.mul(t, poly));
  poly = f32x4.add(f32x4.splat(0.254829592), f32x4.mul(t, poly));
  return f32x4.sub(f32x4.splat(1.0), f32x4.mul(f32x4.mul(t, poly), expNegSq));
}

/** Phi(x) = (1 + erf(x / sqrt 2)) / 2, and exp(-x^2 / 2) for the density. */
@inline function normalCdf(x: v128, expHalfSq: v128): v128 {
  const av = f32x4.mul(f32x4.abs(x), f32x4.splat(0.7071067811865476));
  const e = erfAbs(av, expHalfSq);
  const signed = v128.or(e, v128.and(x, i32x4.splat(0x80000000)));
  return f32x4.mul(f32x4.splat(0.5), f32x4.add(f32x4.splat(1.0), signed));
}

// Exact GELU x * Phi(x) over elements [lo, hi) (multiples of 4).

export function gelu_forward(out: usize, x: usize, lo: i32, hi: i32): void {
  for (let i = lo; i < hi; i += 4) {
    const v = v128.load(at(x, i));
    const e = expv(f32x4.mul(f32x4.mul(v, v), f32x4.splat(-0.5)));
    v128.store(at(out, i), f32x4.mul(v, normalCdf(v, e)));
  }
}

/** dx = dout * (Phi(x) + x * phi(x)), written over dout. */
export function gelu_backward(dout: usize, x: usize, lo: i32, hi: i32): void {
  for (let i = lo; i < hi; i += 4) {
    const v = v128.load(at(x, i));
    const e = expv(f32x4.mul(f32x4.mul(v, v), f32x4.splat(-0.5)));
    const pdf = f32x4.mul(e, f32x4.splat(0.3989422804014327));
    const g = f32x4.add(normalCdf(v, e), f32x4.mul(v, pdf));
    v128.store(at(dout, i), f32x4.mul(v128.load(at(dout, i)), g));
  }
}

// ---------------------------------------------------------------------------
// Causal attention, one (sequence, head) pair per item: item = b * H + h.
// q, k, v, out are [B*T, C] with head h in columns h*D..h*D+D; att holds the
// softmax probabilities [B, H, T, T] (only t2 <= t is written or read).
// Scores are taken four keys at a time (four dot products, one horizontal
// reduction); weighted sums over keys keep 16 output columns in registers.

@inline function hsum4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = f32x4.add(v128.shuffle<f32>(a, b, 0, 1, 4, 5), v128.shuffle<f32>(a, b, 2, 3, 6, 7));
  const cd = f32x4.add(v128.shuffle<f32>(c, d, 0, 1, 4, 5), v128.shuffle<f32>(c, d, 2, 3, 6, 7));
  return f32x4.add(v128.shuffle<f32>(ab, cd, 0, 2, 4, 6), v128.shuffle<f32>(ab, cd, 1, 3, 5, 7));
}

/** dst[t2] = scale * dot(x, rows[t2]) for t2 in [0, n); rows are `stride` bytes apart. */
@inline function dotRows(dst: usize, x: usize, rows: usize, stride: usize, n: i32, D: i32, scale: f32): void {
  let t2 = 0;
  for (; t2 + 4 <= n; t2 += 4) {
    const r0 = rows + <usize>t2 * stride;
    let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
    for (let d = 0; d < D; d += 4) {
      const xv = v128.load(at(x, d));
      const o = <usize>d << 2;
      a0 = f32x4.add(a0, f32x4.mul(xv, v128.load(r0 + o)));
      a1 = f32x4.add(a1, f32x4.mul(xv, v128.load(r0 + stride + o)));
      a2 = f32x4.add(a2, f32x4.mul(xv, v128.load(r0 + 2 * stride + o)));
      a3 = f32x4.add(a3, f32x4.mul(xv, v128.load(r0 + 3 * stride + o)));
    }
    v128.store(at(dst, t2), f32x4.mul(hsum4(a0, a1, a2, a3), f32x4.splat(scale)));
  }
  for (; t2 < n; t2++) store<f32>(at(dst, t2), dot(x, rows + <usize>t2 * stride, D) * scale);
}

/** y[0..D) = sum_i w[i] * rows[i][0..D) for i in [0, n); weights are wStride bytes apart, rows `stride`. */
@inline function weightedRows(y: usize, w: usize, wStride: usize, rows: usize, stride: usize, n: i32, D: i32): void {
  let d = 0;
  for (; d + 16 <= D; d += 16) {
    const o = <usize>d << 2;
    let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
    let r = rows + o;
    let pw = w;
    for (let i = 0; i < n; i++) {
      const s = v128.load32_splat(pw);
      a0 = f32x4.add(a0, f32x4.mul(s, v128.load(r)));
      a1 = f32x4.add(a1, f32x4.mul(s, v128.load(r, 16)));
      a2 = f32x4.add(a2, f32x4.mul(s, v128.load(r, 32)));
      a3 = f32x4.add(a3, f32x4.mul(s, v128.load(r, 48)));
      r += stride;
      pw += wStride;
    }
    v128.store(y + o, a0); v128.store(y + o, a1, 16); v128.store(y + o, a2, 32); v128.store(y + o, a3, 48);
  }
  for (; d < D; d += 4) {
    const o = <usize>d << 2;
    let a = f32x4.splat(0);
    for (let i = 0; i < n; i++) a = f32x4.add(a, f32x4.mul(v128.load32_splat(w + <usize>i * wStride), v128.load(rows + <usize>i * stride + o)));
    v128.store(y + o, a);
  }
}

@inline function dot(a: usize, b: usize, D: i32): f32 {
  let s = f32x4.splat(0);
  for (let d = 0; d < D; d += 4) s = f32x4.add(s, f32x4.mul(v128.load(at(a, d)), v128.load(at(b, d))));
  return hsum(s);
}

/** row[0..n) = softmax(row[0..n)) in place. */
@inline function softmaxRow(row: usize, n: i32): void {
  let mx = -Infinity as f32;
  for (let t2 = 0; t2 < n; t2++) mx = max(mx, load<f32>(at(row, t2)));
  const mv = f32x4.splat(mx);
  let sv = f32x4.splat(0);
  let t2 = 0;
  for (; t2 + 4 <= n; t2 += 4) {
    const e = expv(f32x4.sub(v128.load(at(row, t2)), mv));
    v128.store(at(row, t2), e);
    sv = f32x4.add(sv, e);
  }
  let sum = hsum(sv);
  for (; t2 < n; t2++) {
    const e = Mathf.exp(load<f32>(at(row, t2)) - mx);
    store<f32>(at(row, t2), e);
    sum += e;
  }
  const inv = <f32>1 / sum;
  for (t2 = 0; t2 < n; t2++) store<f32>(at(row, t2), load<f32>(at(row, t2)) * inv);
}

export function attention_forward(out: usize, att: usize, q: usize, k: usize, v: usize,
  T: i32, C: i32, H: i32, scale: f32, lo: i32, hi: i32): void {
  const D = C / H;
  const stride = <usize>C << 2;
  for (let item = lo; item < hi; item++) {
    const base = (item / H) * T * C + (item % H) * D;
    for (let t = 0; t < T; t++) {
      const row = at(att, (item * T + t) * T);
      dotRows(row, at(q, base + t * C), at(k, base), stride, t + 1, D, scale);
      softmaxRow(row, t + 1);
      weightedRows(at(out, base + t * C), row, 4, at(v, base), stride, t + 1, D);
    }
  }
}

/**
 * Writes dq, dk, dv (no need to clear them) and overwrites att with the score
 * gradients; scratch holds T floats per item. dv and dk are gathered per key
 * over the att column (all queries that saw that key), so every output row is
 * summed in registers and written once.
 */
export function attention_backward(dq: usize, dk: usize, dv: usize, scratch: usize, dout: usize, q: usize, k: usize,
  v: usize, att: usize, T: i32, C: i32, H: i32, scale: f32, lo: i32, hi: i32): void {
  const D = C / H;
  const stride = <usize>C << 2;
  const column = <usize>T << 2;
  for (let item = lo; item < hi; item++) {
    const base = (item / H) * T * C + (item % H) * D;
    const a0 = at(att, item * T * T);
    for (let t2 = 0; t2 < T; t2++) {
      weightedRows(at(dv, base + t2 * C), at(a0, t2 * T + t2), column, at(dout, base + t2 * C), stride, T - t2, D);
    }
    const datt = at(scratch, item * T);
    for (let t = 0; t < T; t++) {
      const row = at(a0, t * T);
      dotRows(datt, at(dout, base + t * C), at(v, base), stride, t + 1, D, 1);
      let dsum: f32 = 0;
      for (let t2 = 0; t2 <= t; t2++) dsum += load<f32>(at(row, t2)) * load<f32>(at(datt, t2));
      for (let t2 = 0; t2 <= t; t2++) store<f32>(at(row, t2), load<f32>(at(row, t2)) * (load<f32>(at(datt, t2)) - dsum) * scale);
      weightedRows(at(dq, base + t * C), row, 4, at(k, base), stride, t + 1, D);
    }
    for (let t2 = 0; t2 < T; t2++) {
      weightedRows(at(dk, base + t2 * C), at(a0, t2 * T + t2), column, at(q, base + t2 * C), stride, T - t2, D);
    }
  }
}

// ---------------------------------------------------------------------------
// Cross-entropy per row: losses[r] = logsumexp(logits[r]) - logits[r, y[r]].
// With gradScale != 0 the logits are replaced by their gradient
// (softmax - onehot) * gradScale.

export function crossentropy(logits: usize, losses: usize, targets: usize, V: i32, gradScale: f32, lo: i32, hi: i32): void {
  for (let r = lo; r < hi; r++) {
    const row = at(logits, r * V);
    let mx = -Infinity as f32;
    for (let j = 0; j < V; j++) mx = max(mx, load<f32>(at(row, j)));
    let sum: f64 = 0;
    for (let j = 0; j < V; j++) sum += <f64>Mathf.exp(load<f32>(at(row, j)) - mx);
    const lse = <f32>Math.log(sum) + mx;
    const y = load<i32>(at(targets, r));
    store<f32>(at(losses, r), lse - load<f32>(at(row, y)));
    if (gradScale != 0) {
      for (let j = 0; j < V; j++) store<f32>(at(row, j), Mathf.exp(load<f32>(at(row, j)) - lse) * gradScale);
      store<f32>(at(row, y), load<f32>(at(row, y)) - gradScale);
    }
  }
}

// ---------------------------------------------------------------------------
// Optimizer.

/** Sum of squares of x[0..n), accumulated in f64 per block of 1024 (clipping's global norm). */
export function sumsq(x: usize, n: i32): f64 {
  let total: f64 = 0;
  let i = 0;
  for (; i + 4 <= n;) {
    const end = min(n & ~3, i + 1024);
    let s = f32x4.splat(0);
    for (; i < end; i += 4) {
      const v = v128.load(at(x, i));
      s = f32x4.add(s, f32x4.mul(v, v));
    }
    total += <f64>hsum(s);
  }
  for (; i < n; i++) {
    const v = <f64>load<f32>(at(x, i));
    total += v * v;
  }
  return total;
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

@inline function adamwRange(p: usize, g: usize, m: usize, v: usize, lr: f32, beta1: f32, beta2: f32, eps: f32, wd: f32,
  bc1: f32, bc2: f32, gradScale: f32, lo: i32, hi: i32): void {
  for (let i = lo; i < hi; i++) {
    const grad = load<f32>(at(g, i)) * gradScale;
    const mi = beta1 * load<f32>(at(m, i)) + (<f32>1 - beta1) * grad;
    const vi = beta2 * load<f32>(at(v, i)) + (<f32>1 - beta2) * (grad * grad);
    store<f32>(at(m, i), mi);
    store<f32>(at(v, i), vi);
    const pi = load<f32>(at(p, i));
    store<f32>(at(p, i), pi - lr * ((mi / bc1) / (Mathf.sqrt(vi / bc2) + eps) + wd * pi));
  }
}
