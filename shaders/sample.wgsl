// sample.wgsl: the next token chosen on the GPU from a row of logits, by the rule pickToken
// applies on the CPU (webapp/engine/sample.ts): greedy at temperature 0 (the argmax, lowest id on
// ties), else softmax(logits / temperature) over the top k, cut to the top-p nucleus (most likely
// first, lower id first on ties, at least one), then one uniform draw against the kept tokens in
// id order. The uniform is the counter-based hash of (seed, counter) (derive_seed, the engine's
// deriveSeed), so a sample's text depends on its seed and not on how many tokens went into each
// submission. The sums run in id order in one invocation, as on the CPU; f32 here and f64 there
// can still part on a draw that falls within rounding of a boundary between two tokens.
//
// sample_token
//   bindings 0 params, 1 logits [rows, V] (read): row state[4];
//            2 state (read_write) u32 [position, token, drawn, counter, row]: the token picked
//              becomes the next decode's input (decode.wgsl reads [position, token]) one position
//              on (state[0] += 1, state[1] = token), goes to drawn[state[2]] (state[2] += 1), drew
//              the uniform of counter state[3] + state[2], and row returns to 0 (a decode's logits
//              are row 0; after a prefill the host points it at the last token's row);
//            3 drawn (read_write) u32: the tokens picked since the host last zeroed state[2].
//   workgroup 256 (V <= 256); dispatch (1, 1, 1).
//
// Params: V, top_k (0: all), temperature (f32; 0: greedy), top_p (f32, in (0, 1]; 1: all), seed.

struct Params {
  V: u32,
  top_k: u32,
  temperature: f32,
  top_p: f32,
  seed: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> state: array<u32, 5>;
@group(0) @binding(3) var<storage, read_write> drawn: array<u32>;

var<workgroup> lg: array<f32, 256>; // the row's logits
var<workgroup> w: array<f32, 256>; // each token's weight, 0 once dropped
var<workgroup> by_weight: array<u32, 256>; // the kept tokens, most likely first
var<workgroup> best: u32;
var<workgroup> cut: f32; // the k-th largest logit: those below are dropped
var<workgroup> nucleus: u32; // how many of by_weight the nucleus keeps
var<workgroup> total: f32; // the kept weights' sum, which the draw is scaled by

// deriveSeed of webapp/engine/rng.ts: a well-mixed u32 of (seed, stream).
fn derive_seed(seed: u32, stream: u32) -> u32 {
  var h = ((seed ^ RNG_SEED_XOR) * RNG_SEED_MUL) ^ (stream * RNG_STREAM_MUL);
  h ^= h >> 16u;
  h *= RNG_MIX1;
  h ^= h >> 15u;
  h *= RNG_MIX2;
  return h ^ (h >> 16u);
}

@compute @workgroup_size(256)
fn sample_token(@builtin(local_invocation_index) i: u32) {
  let mine = i < p.V;
  let x = select(-3.0e38, logits[state[4] * p.V + min(i, p.V - 1u)], mine);
  lg[i] = x;
  if (i == 0u) { cut = -3.0e38; }
  workgroupBarrier();
  // Its place by (logit descending, id ascending): 0 is the argmax, k - 1 the k-th largest.
  var rank = 0u;
  for (var j = 0u; j < p.V; j++) { rank += u32(lg[j] > x || (lg[j] == x && j < i)); }
  if (mine && rank == 0u) { best = i; }
  if (mine && p.top_k > 0u && p.top_k < p.V && rank == p.top_k - 1u) { cut = x; }
  workgroupBarrier();
  let greedy = p.temperature <= 0.0;
  let weight = select(0.0, exp((x - lg[best]) / p.temperature), mine && !greedy && x >= cut);
  w[i] = weight;
  workgroupBarrier();
  if (i == 0u) {
    var sum = 0.0;
    for (var j = 0u; j < p.V; j++) { sum += w[j]; }
    total = sum;
  }
  if (p.top_p < 1.0) {
    // Its place among the kept by (weight descending, id ascending).
    var place = 0u;
    for (var j = 0u; j < p.V; j++) { place += u32(w[j] > weight || (w[j] == weight && j < i)); }
    if (weight > 0.0) { by_weight[place] = i; }
    workgroupBarrier();
    if (i == 0u) {
      var kept_n = 0u;
      for (var j = 0u; j < p.V; j++) { kept_n += u32(w[j] > 0.0); }
      let mass = total * p.top_p;
      var kept = 0.0;
      var n = 0u;
      while (n < kept_n && (n == 0u || kept < mass)) {
        kept += w[by_weight[n]];
        n++;
      }
      nucleus = n;
      total = kept;
    }
    workgroupBarrier();
    if (weight > 0.0 && place >= nucleus) { w[i] = 0.0; }
    workgroupBarrier();
  }
  if (i == 0u) {
    var token = best;
    if (!greedy) {
      let u = f32(derive_seed(p.seed, state[3] + state[2]) >> 8u) / 16777216.0;
      var r = u * total;
      for (var j = 0u; j < p.V; j++) {
        if (w[j] == 0.0) { continue; }
        r -= w[j];
        if (r <= 0.0) {
          token = j;
          break;
        }
      }
    }
    state[0] += 1u;
    state[1] = token;
    drawn[state[2]] = token;
    state[2] += 1u;
    state[4] = 0u;
  }
}
