// lib/gelu.wgsl: exact GELU, gelu(x) = x·Φ(x) with Φ the standard normal CDF (not the tanh form),
// and its derivative gelu'(x) = Φ(x) + x·φ(x): the matmul stores' GELU and GELU_GRAD flags
// (lib/matmul_vec4_store.wgsl, lib/matmul_io.wgsl). Also where GELU's second half starts in c.
//
// WGSL has no erf. Φ(x) = erfc(-x/√2)/2, with erfc from the Chebyshev fit in Press et al.,
// Numerical Recipes §6.2, whose fractional error is below 1.2e-7 for every argument: a relative
// bound, so the tiny negative tail keeps its relative accuracy (1 + erf(x/√2) would cancel to 0).
// Measured in f32 on lavapipe against double-precision erfc: gelu relative error < 6e-7 for
// |x| <= 2, < 2e-6 for |x| <= 4, then growing like 1.3e-7·x² (f32 exp of a large argument),
// 1.9e-5 at x = -12 where |gelu| ~ 2e-32; an H200 gave 1.9e-6 at one random x (its exp differs).
// tests/test_kernels.py holds it to 1e-6 + 1.5e-7·x² (tails) and facts.json's bound (random x).

fn erfc_nonneg(z: elem) -> elem {
  let t = 1.0 / (1.0 + 0.5 * z);
  let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
    + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  return t * exp(-z * z + poly);
}

fn normal_cdf(v: elem) -> elem {
  let half_tail = 0.5 * erfc_nonneg(abs(v) * 0.70710678118654752);
  return select(1.0 - half_tail, half_tail, v < 0.0);
}

fn gelu(v: elem) -> elem {
  return v * normal_cdf(v);
}

fn gelu_grad(v: elem) -> elem {
  let pdf = exp(-0.5 * v * v) * 0.39894228040143268;
  return normal_cdf(v) + v * pdf;
}

fn gelu4(v: vec4<elem>) -> vec4<elem> {
  return vec4<elem>(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w));
}

fn gelu_grad4(v: vec4<elem>) -> vec4<elem> {
  return vec4<elem>(gelu_grad(v.x), gelu_grad(v.y), gelu_grad(v.z), gelu_grad(v.w));
}

// Where GELU stores gelu(o) in c, past the n outputs: at the next multiple of GELU_ALIGN elements,
// an offset the graph can bind on its own.
fn gelu_half(n: u32) -> u32 {
  return (n + GELU_ALIGN - 1u) / GELU_ALIGN * GELU_ALIGN;
}
