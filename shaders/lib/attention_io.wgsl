// lib/attention_io.wgsl: what attention.wgsl and its lever variant (levers/coop-attention/
// attention.wgsl) share: the params, the bindings (attention.wgsl's header says which entry point
// uses which), a head's place in the [B,T,C] buffers, and one guarded loader per buffer.

struct Params {
  B: u32,
  T: u32,
  C: u32,
  n_head: u32,
}

const NEG_BIG = -3.0e38;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dy: array<f32>;
@group(0) @binding(7) var<storage, read_write> delta: array<f32>;
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;
@group(0) @binding(9) var<storage, read_write> dk: array<f32>;
@group(0) @binding(10) var<storage, read_write> dv: array<f32>;
@group(0) @binding(11) var<storage, read> y_in: array<f32>;
@group(0) @binding(12) var<storage, read> lse_in: array<f32>;
@group(0) @binding(13) var<storage, read> delta_in: array<f32>;

struct Head {
  D: u32,
  scale: f32,
  bh: u32,   // b·n_head + h: the head's block of lse and delta
  base: u32, // offset of (b, t=0, column h·D)
}

// Global indices of 4 elements of the head, and which exist: the others read as 0 (from index
// 0, so that no load leaves its buffer).
struct Fetch {
  at: vec4<u32>,
  ok: vec4<bool>,
}

// The head dimension, from params alone so loops bounded by it keep barriers uniform.
fn head_dim() -> u32 {
  return p.C / p.n_head;
}

fn head(wg: vec3<u32>) -> Head {
  let D = head_dim();
  return Head(D, 1.0 / sqrt(f32(D)), wg.y, (wg.y / p.n_head) * p.T * p.C + (wg.y % p.n_head) * D);
}

fn fetch(h: Head, t: vec4<u32>, d: vec4<u32>) -> Fetch {
  let ok = (t < vec4<u32>(p.T)) & (d < vec4<u32>(h.D));
  return Fetch(select(vec4<u32>(0u), vec4<u32>(h.base) + t * p.C + d, ok), ok);
}

// One loader per buffer, as an entry point's bindings are the buffers its code names.
fn q4(f: Fetch) -> vec4<f32> {
  return select(vec4<f32>(0.0), vec4<f32>(q[f.at.x], q[f.at.y], q[f.at.z], q[f.at.w]), f.ok);
}

fn k4(f: Fetch) -> vec4<f32> {
  return select(vec4<f32>(0.0), vec4<f32>(k[f.at.x], k[f.at.y], k[f.at.z], k[f.at.w]), f.ok);
}

fn v4(f: Fetch) -> vec4<f32> {
  return select(vec4<f32>(0.0), vec4<f32>(v[f.at.x], v[f.at.y], v[f.at.z], v[f.at.w]), f.ok);
}

fn dy4(f: Fetch) -> vec4<f32> {
  return select(vec4<f32>(0.0), vec4<f32>(dy[f.at.x], dy[f.at.y], dy[f.at.z], dy[f.at.w]), f.ok);
}

fn y4(f: Fetch) -> vec4<f32> {
  return select(vec4<f32>(0.0), vec4<f32>(y_in[f.at.x], y_in[f.at.y], y_in[f.at.z], y_in[f.at.w]), f.ok);
}

// Where the per-row statistics (lse, delta) of rows r0 + step·i (i < 4) are, and which rows
// exist; a row past T reads the last row's.
fn stats_at(h: Head, r0: u32, step: u32) -> Fetch {
  let r = vec4<u32>(r0) + step * vec4<u32>(0u, 1u, 2u, 3u);
  return Fetch(vec4<u32>(h.bh * p.T) + min(r, vec4<u32>(p.T - 1u)), r < vec4<u32>(p.T));
}
