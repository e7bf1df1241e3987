// levers/storage-f16/optimizer.wgsl: optimizer.wgsl plus adamw_halves, AdamW that also refreshes
// the packed-half mirror of the parameters the storage-f16 matmuls read their weights from, in
// the same dispatch (so in the same command buffer as the step that needs it).
// adamw_halves  AdamW (optimizer.wgsl adamw_at) on the elements of [offset, offset + n), one
//   invocation per u32 word w of the mirror that holds any of them (elements 2w and 2w + 1), which
//   then writes both elements' parameters packed: halves[w] = pack2x16float(param[2w], param[2w+1]).
//   A word's other element, when outside the range, belongs to another dispatch of the step: an
//   earlier one has left its final value, a later one rewrites the word.
//   bindings as adamw's (0 params, 1 grad, 5 norm, 6 param, 7 m, 8 v), and
//            9 halves (storage, read_write) array<u32>: the whole mirror, param's element offsets.
//   param must hold an even number of elements.
//   dispatch: lib/grid.wgsl over ceil((offset + n) / 2) - floor(offset / 2) invocations.
// Params: optimizer.wgsl's.

#include "optimizer.wgsl"

@group(0) @binding(9) var<storage, read_write> halves: array<u32>;

@compute @workgroup_size(256)
fn adamw_halves(grid: Grid) {
  let w = p.offset / 2u + index(grid);
  let end = p.offset + p.n;
  if (2u * w >= end) { return; }
  for (var i = max(2u * w, p.offset); i < min(2u * w + 2u, end); i++) { adamw_at(i); }
  halves[w] = pack2x16float(vec2<f32>(param[2u * w], param[2u * w + 1u]));
}
