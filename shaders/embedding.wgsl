// embedding.wgsl: token + position embedding and its gradients, without atomics (every
// output element is summed by one invocation in a fixed order, so results are deterministic).
//
// embedding_forward  out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :]
//   bindings 0 params, 1 tokens [B·T] u32 (read; an Int32Array's bytes upload as is),
//            2 wte [V,C] (read), 3 wpe [>=T,C] (read), 4 out [B,T,C] (read_write).
//   one invocation per element of B·T·C (lib/grid.wgsl: workgroup 256, grid folded into y).
// embedding_backward_wte  dwte[v,c] = sum over positions i with tokens[i] == v of dout[i,c]
//   (+ dwte[v,c] with ACCUMULATE: the tied head's gradient may already be there).
//   bindings 0 params, 1 tokens, 5 dout [B,T,C] (read), 6 dwte [V,C] (read_write).
//   workgroup 256 (columns); dispatch (ceil(C/256), V, S). Each workgroup takes its run of
//   positions 256 at a time: one invocation a position tests its token, a prefix sum over the
//   workgroup lists the matches in order, and then each invocation adds its column of the listed
//   rows, in position order. (Testing every position in every invocation, as a first version
//   did, cost V·B·T·C tests: 1.2 ms of a Huge step on the H200 for 6.3 million additions.)
//   With S > 1 the positions are cut into S runs and workgroup z writes its run's sums to
//   dwte[z·V·C ..] (S·V·C elements, flags 0) for colsum to add (lib/split.wgsl).
// embedding_backward_wpe  dwpe[t,c] = sum_b dout[b,t,c] for t < T (rows >= T untouched).
//   bindings 0 params, 5 dout (read), 7 dwpe [>=T,C] (read_write).
//   one invocation per element of T·C, as embedding_forward.
//
// Params: B, T, C, V, flags (u32 each; flags bit 1 ACCUMULATE).

#include "lib/grid.wgsl"
#include "lib/split.wgsl"

struct Params {
  B: u32,
  T: u32,
  C: u32,
  V: u32,
  flags: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read> wte: array<f32>;
@group(0) @binding(3) var<storage, read> wpe: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> dout: array<f32>;
@group(0) @binding(6) var<storage, read_write> dwte: array<f32>;
@group(0) @binding(7) var<storage, read_write> dwpe: array<f32>;

@compute @workgroup_size(256)
fn embedding_forward(g: Grid) {
  let i = index(g);
  if (i >= p.B * p.T * p.C) { return; }
  let pos = i / p.C;
  let c = i % p.C;
  out[i] = wte[tokens[pos] * p.C + c] + wpe[(pos % p.T) * p.C + c];
}

var<workgroup> matched: array<u32, 256>; // the prefix sum of the chunk's matches
var<workgroup> listed: array<u32, 256>; // the chunk's positions holding the token, in order

@compute @workgroup_size(256)
fn embedding_backward_wte(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) t: u32) {
  let c = wg.x * 256u + t;
  let v = wg.y;
  let run = split_range(wg.z, nwg.z, p.B * p.T, 1u);
  var sum = 0.0;
  for (var i0 = run.x; i0 < run.y; i0 += 256u) {
    let i = i0 + t;
    let hit = i < run.y && tokens[i] == v;
    matched[t] = select(0u, 1u, hit);
    for (var step = 1u; step < 256u; step *= 2u) {
      workgroupBarrier();
      let before = select(0u, matched[max(t, step) - step], t >= step);
      workgroupBarrier();
      matched[t] += before;
    }
    workgroupBarrier();
    if (hit) { listed[matched[t] - 1u] = i; }
    let count = matched[255];
    workgroupBarrier();
    if (c < p.C) {
      for (var k = 0u; k < count; k++) { sum += dout[listed[k] * p.C + c]; }
    }
    workgroupBarrier(); // the next chunk rewrites both lists
  }
  if (c >= p.C) { return; }
  let j = (wg.z * p.V + v) * p.C + c;
  if ((p.flags & ACCUMULATE) != 0u) { sum += dwte[j]; }
  dwte[j] = sum;
}

@compute @workgroup_size(256)
fn embedding_backward_wpe(g: Grid) {
  let i = index(g);
  if (i >= p.T * p.C) { return; }
  var sum = 0.0;
  for (var b = 0u; b < p.B; b++) { sum += dout[b * p.T * p.C + i]; }
  dwpe[i] = sum;
}
