// matmul.wgsl: C = op(A)·op(B) (+ bias) (+ C) for any M, N, K (no multiple-of-tile or
// multiple-of-4 requirement), plus the column sum a bias gradient needs. The product, its entry
// points (matmul_nn, matmul_nt, matmul_tn), params, override BLOCK and split are
// lib/matmul_tile.wgsl's; its loads and stores, one element at a time with bounds checks on
// each, are lib/matmul_io.wgsl's, B's element read here (b_elem). matmul_vec4.wgsl is the faster path for shapes whose contiguous dimensions are
// multiples of 4.
//   group 0 binding 0: params (uniform Params)
//           binding 1: a    (storage, read)        row-major as lib/matmul_tile.wgsl says
//           binding 2: b    (storage, read)        row-major as lib/matmul_tile.wgsl says
//           binding 3: bias (storage, read)        [N]; read only when flags has BIAS, else bind any
//                                                  buffer but c (a writable binding must not alias)
//           binding 4: c    (storage, read_write)  [M,N]; read first when flags has ACCUMULATE
// colsum  c[n] = sum_m a[m,n] (+ c[n] with ACCUMULATE): the bias gradient, and the sum of a
//   split's partial results (any op's, not only a matmul's), rows summed in a fixed order (deterministic). Bindings 0 params (M rows, N cols), 1 a [M,N], 4 c [N].
//   workgroup 256; dispatch (ceil(N/64), S, P). With S > 1 the rows are cut into S runs and
//   workgroup row y writes its run's sums to c[y·N ..] (S·N elements, flags 0), for a second
//   colsum over those S rows: ceil(N/64) workgroups alone cannot fill a GPU. Grid z walks P
//   matrices stacked in a (q, k and v's gradients; a split's weight and bias partials): matrix z
//   at a[z·M·N ..] writes its S·N sums at c[z·S·N ..], one dispatch for all (lib/colsum.wgsl).

#include "lib/matmul_io.wgsl"
#include "lib/colsum.wgsl"

@group(0) @binding(2) var<storage, read> b: array<elem>;

fn b_elem(i: u32) -> elem { return b[i]; }

var<workgroup> partial: array<elem, 256>;

@compute @workgroup_size(256)
fn colsum(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) t: u32) {
  let n = wg.x * 64u + t % 64u;
  let rows = split_range(wg.y, nwg.y, p.M, 1u);
  let at = stacked_at(wg, nwg, p.M * p.N, p.N);
  var sum = elem(0.0);
  if (n < p.N) {
    for (var m = rows.x + t / 64u; m < rows.y; m += 4u) { sum += a[at.x + m * p.N + n]; }
  }
  partial[t] = sum;
  workgroupBarrier();
  if (t < 64u && n < p.N) {
    var total = ((partial[t] + partial[t + 64u]) + partial[t + 128u]) + partial[t + 192u];
    if ((p.flags & ACCUMULATE) != 0u) { total += c[at.y + n]; }
    c[at.y + n] = total;
  }
}
