// The plain baseline: one output per invocation, 16x16 tiles of A and B through workgroup
// memory (the "plain tiled kernel" that reached ~1% of cuBLAS on the H200).
// matmul_nn only; bindings as shaders/matmul.wgsl (0 params M,N,K,flags; 1 a; 2 b; 4 c; no bias).
// workgroup 16x16; dispatch (ceil(N/16), ceil(M/16), 1).

struct Params {
  M: u32,
  N: u32,
  K: u32,
  flags: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;

var<workgroup> tile_a: array<array<f32, 16>, 16>;
var<workgroup> tile_b: array<array<f32, 16>, 16>;

@compute @workgroup_size(16, 16)
fn matmul_nn(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = wg.y * 16u + lid.y;
  let col = wg.x * 16u + lid.x;
  var sum = 0.0;
  for (var k0 = 0u; k0 < p.K; k0 += 16u) {
    let ka = k0 + lid.x;
    let kb = k0 + lid.y;
    tile_a[lid.y][lid.x] = select(0.0, a[row * p.K + ka], row < p.M && ka < p.K);
    tile_b[lid.y][lid.x] = select(0.0, b[kb * p.N + col], kb < p.K && col < p.N);
    workgroupBarrier();
    for (var k = 0u; k < 16u; k++) { sum += tile_a[lid.y][k] * tile_b[k][lid.x]; }
    workgroupBarrier();
  }
  if (row < p.M && col < p.N) { c[row * p.N + col] = sum; }
}
