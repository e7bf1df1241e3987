// matmul.wgsl: C = op(A)·op(B) (+ bias) (+ C) for any M, N, K (no multiple-of-tile or
// multiple-of-4 requirement), plus the column sum a bias gradient needs. The product, its entry
// points (matmul_nn, matmul_nt, matmul_tn), params, override BLOCK and split are
// lib/matmul_tile.wgsl's; this file loads and stores one element at a time, with bounds checks
// on each. matmul_vec4.wgsl is the faster path for shapes whose contiguous dimensions are
// multiples of 4.
//   group 0 binding 0: params (uniform Params)
//           binding 1: a    (storage, read)        row-major as lib/matmul_tile.wgsl says
//           binding 2: b    (storage, read)        row-major as lib/matmul_tile.wgsl says
//           binding 3: bias (storage, read)        [N]; read only when flags has BIAS, else bind any
//                                                  buffer but c (a writable binding must not alias)
//           binding 4: c    (storage, read_write)  [M,N]; read first when flags has ACCUMULATE
// colsum  c[n] = sum_m a[m,n] (+ c[n] with ACCUMULATE): the bias gradient, and the sum of a
//   split's partial results (any op's, not only a matmul's), rows summed in a fixed order (deterministic). Bindings 0 params (M rows, N cols), 1 a [M,N], 4 c [N].
//   workgroup 256; dispatch (ceil(N/64), S, 1). With S > 1 the rows are cut into S runs and
//   workgroup row y writes its run's sums to c[y·N ..] (S·N elements, flags 0), for a second
//   colsum over those S rows: ceil(N/64) workgroups alone cannot fill a GPU.

#include "lib/matmul_tile.wgsl"

alias staged = elem; // the tiles and the products in elem (lib/matmul_tile.wgsl)
const SPILL = false;

@group(0) @binding(1) var<storage, read> a: array<elem>;
@group(0) @binding(2) var<storage, read> b: array<elem>;
@group(0) @binding(3) var<storage, read> bias: array<elem>;
@group(0) @binding(4) var<storage, read_write> c: array<elem>;

var<workgroup> partial: array<elem, 256>;

// A at (m, k) and B at (n, k), 0 outside the matrix or past the split's kend.
fn a_at(mk: vec2<u32>, kend: u32, transposed: bool) -> elem {
  if (mk.x >= p.M || mk.y >= kend) { return elem(0.0); }
  if (transposed) { return a[mk.y * p.M + mk.x]; }
  return a[mk.x * p.K + mk.y];
}

fn b_at(nk: vec2<u32>, kend: u32, transposed: bool) -> elem {
  if (nk.x >= p.N || nk.y >= kend) { return elem(0.0); }
  if (transposed) { return b[nk.x * p.K + nk.y]; }
  return b[nk.y * p.N + nk.x];
}

fn fetch(t: u32, m0: u32, n0: u32, k0: u32, kend: u32, a_trans: bool, b_trans: bool) -> Fetched {
  let am = origin(t, m0, k0, !a_trans);
  let bn = origin(t, n0, k0, b_trans);
  let da = select(vec2<u32>(1u, 0u), vec2<u32>(0u, 1u), !a_trans); // the step between the 4 values
  let db = select(vec2<u32>(1u, 0u), vec2<u32>(0u, 1u), b_trans);
  return Fetched(
    vec4<elem>(a_at(am, kend, a_trans), a_at(am + da, kend, a_trans), a_at(am + 2u * da, kend, a_trans), a_at(am + 3u * da, kend, a_trans)),
    vec4<elem>(b_at(bn, kend, b_trans), b_at(bn + db, kend, b_trans), b_at(bn + 2u * db, kend, b_trans), b_at(bn + 3u * db, kend, b_trans)));
}

fn store4(out: u32, m: u32, n: u32, v: vec4<elem>) {
  if (m >= p.M) { return; }
  for (var j = 0u; j < 4u; j++) {
    let col = n + j;
    if (col < p.N) {
      var o = v[j];
      if ((p.flags & BIAS) != 0u) { o += bias[col]; }
      let i = out + m * p.N + col;
      if ((p.flags & ACCUMULATE) != 0u) { o += c[i]; }
      c[i] = o;
    }
  }
}

@compute @workgroup_size(256)
fn colsum(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) t: u32) {
  let n = wg.x * 64u + t % 64u;
  let rows = split_range(wg.y, nwg.y, p.M, 1u);
  var sum = elem(0.0);
  if (n < p.N) {
    for (var m = rows.x + t / 64u; m < rows.y; m += 4u) { sum += a[m * p.N + n]; }
  }
  partial[t] = sum;
  workgroupBarrier();
  if (t < 64u && n < p.N) {
    var total = ((partial[t] + partial[t + 64u]) + partial[t + 128u]) + partial[t + 192u];
    if ((p.flags & ACCUMULATE) != 0u) { total += c[wg.y * p.N + n]; }
    c[wg.y * p.N + n] = total;
  }
}
