// lib/gelu.wgsl: exact GELU of one value, gelu(x) = x·Φ(x) with Φ the standard normal CDF (not
// the tanh form): gelu.wgsl's kernels and matvec.wgsl's fused fc_in of a decoding step.
//
// WGSL has no erf. Φ(x) = erfc(-x/√2)/2, with erfc from the Chebyshev fit in Press et al.,
// Numerical Recipes §6.2, whose fractional error is below 1.2e-7 for every argument: a relative
// bound, so the tiny negative tail keeps its relative accuracy (1 + erf(x/√2) would cancel to 0).
// Measured in f32 on lavapipe against double-precision erfc: gelu relative error < 6e-7 for
// |x| <= 2, < 2e-6 for |x| <= 4, then growing like 1.3e-7·x² (f32 exp of a large argument),
// 1.9e-5 at x = -12 where |gelu| ~ 2e-32; an H200 gave 1.9e-6 at one random x (its exp differs).
// tests/test_kernels.py holds it to 1e-6 + 1.5e-7·x² (tails) and facts.json's bound (random x).

fn erfc_nonneg(z: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.5 * z);
  let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
    + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  return t * exp(-z * z + poly);
}

fn normal_cdf(v: f32) -> f32 {
  let half_tail = 0.5 * erfc_nonneg(abs(v) * 0.70710678118654752);
  return select(1.0 - half_tail, half_tail, v < 0.0);
}

fn gelu(v: f32) -> f32 {
  return v * normal_cdf(v);
}
