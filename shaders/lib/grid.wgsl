// lib/grid.wgsl: the element index of the kernels that run one invocation per element, in
// workgroups of 256 over a grid folded into y past 65535 workgroups: dispatch
// x = min(G, 65535), y = ceil(G / x) with G = ceil(n / 256). An entry point takes a Grid as its
// parameter; not one with barriers, as Tint's uniformity analysis takes the whole struct as
// varying per invocation.

struct Grid {
  @builtin(workgroup_id) wg: vec3<u32>,
  @builtin(num_workgroups) groups: vec3<u32>,
  @builtin(local_invocation_index) t: u32,
}

fn index(g: Grid) -> u32 {
  return (g.wg.y * g.groups.x + g.wg.x) * 256u + g.t;
}
