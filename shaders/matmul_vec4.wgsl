// matmul_vec4.wgsl: the fast path of matmul.wgsl for shapes whose contiguous dimensions are
// multiples of 4, so that every global load and store moves 16 bytes: a, b, bias and c are
// bound as arrays of vec4<elem>. Same entry points, maths, flags, params, split and binding
// numbers as matmul.wgsl (lib/matmul_tile.wgsl); the loads and stores are lib/matmul_vec4_io.wgsl's, B's
// vec4 read here (b4):
//   matmul_nn and matmul_nt need K % 4 == 0 and N % 4 == 0; matmul_tn needs M % 4 == 0 and N % 4 == 0.
//   bias without BIAS: any buffer but c, of at least 16 bytes.
// BLOCK 128, or 64 for grids too small to fill the GPU: on the H200 the 64 block wins below about
// 128 blocks of 128x128 (e.g. 1024^3: 19.4 vs 13.1 TFLOP/s), the 128 block above (2048^3: 32.7
// vs 21.9).
//
// colsum_vec4  matmul.wgsl's colsum for N % 4 == 0, same params, flags, split and bindings (a and
//   c as vec4s). Workgroup 256 = 16 vec4s of a row (64 columns) x 16 lanes, lane l summing rows
//   l, l+16, .. of the run with four loads in flight (a column sum is a stream through memory:
//   colsum's one 4-byte load at a time per invocation left the H200's bandwidth mostly idle);
//   the 16 lanes are then added in a fixed order. Dispatch (ceil(N/64), S, P).

#include "lib/matmul_vec4_io.wgsl"
#include "lib/colsum.wgsl"

@group(0) @binding(2) var<storage, read> b: array<vec4<elem>>;

fn b4(i: u32) -> vec4<elem> { return b[i]; }

var<workgroup> lanes: array<vec4<elem>, 256>;

@compute @workgroup_size(256)
fn colsum_vec4(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) t: u32) {
  let cols = p.N / 4u;
  let n = wg.x * 16u + t % 16u;
  let rows = split_range(wg.y, nwg.y, p.M, 1u);
  let at = stacked_at(wg, nwg, p.M * cols, cols);
  var s0 = vec4<elem>(0.0);
  var s1 = vec4<elem>(0.0);
  var s2 = vec4<elem>(0.0);
  var s3 = vec4<elem>(0.0);
  if (n < cols) {
    var m = rows.x + t / 16u;
    for (; m + 48u < rows.y; m += 64u) {
      s0 += a[at.x + m * cols + n];
      s1 += a[at.x + (m + 16u) * cols + n];
      s2 += a[at.x + (m + 32u) * cols + n];
      s3 += a[at.x + (m + 48u) * cols + n];
    }
    for (; m < rows.y; m += 16u) { s0 += a[at.x + m * cols + n]; }
  }
  lanes[t] = (s0 + s1) + (s2 + s3);
  workgroupBarrier();
  if (t < 16u && n < cols) {
    var total = lanes[t];
    for (var l = 1u; l < 16u; l++) { total += lanes[l * 16u + t]; }
    let i = at.y + n;
    if ((p.flags & ACCUMULATE) != 0u) { total += c[i]; }
    c[i] = total;
  }
}
