"""The numpy reference GPT: the slow, readable model every fast path is checked against.

GPT-2 shape over byte tokens: token + learned position embeddings, n_layer
pre-LayerNorm blocks (x += attn(ln1(x)); x += mlp(ln2(x))), a final LayerNorm
and a head tied to the token embedding. Each layer is a *_forward/*_backward
pair of plain functions (as in llm.c); `forward` saves what `backward` needs
and `backward` walks the same layers in reverse. No autograd anywhere: the
tests check every gradient against finite differences.

Parameters live in a dict name -> ndarray in the canonical order of
facts.tensors, with matrices stored [in, out] (y = x @ W). Everything works in
float32 (what the engines match) and float64 (what the gradient check needs);
the dtype of the parameters decides.
"""
import math
import re
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from tinygpt.facts import FACTS, preset


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    n_layer: int
    n_embd: int
    n_head: int
    block_size: int

    def __post_init__(self):
        for key, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig.{key} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")

    @classmethod
    def from_preset(cls, preset_id: str) -> "GPTConfig":
        p = preset(preset_id)
        return cls(FACTS["vocab_size"], p["n_layer"], p["n_embd"], p["n_head"], p["block_size"])

    @classmethod
    def from_dict(cls, d: dict) -> "GPTConfig":
        return cls(**{k: d[k] for k in ("vocab_size", "n_layer", "n_embd", "n_head", "block_size")})

    def to_dict(self) -> dict:
        return dict(vars(self))


# ---------------------------------------------------------------------------
# Parameters: names, shapes and initialisation all come from facts.tensors.

def shape_of(symbols: list[str], config: GPTConfig) -> tuple[int, ...]:
    """A facts.tensors shape (["C", "F"]) in numbers."""
    sizes = {"V": config.vocab_size, "T": config.block_size, "C": config.n_embd, "F": 4 * config.n_embd}
    return tuple(sizes[s] for s in symbols)


def tensor_specs(config: GPTConfig) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, storage shape, init) of every parameter, in canonical order."""
    layout = FACTS["tensors"]
    entries = list(layout["head"])
    for i in range(config.n_layer):
        entries += [{**e, "name": e["name"].format(i=i)} for e in layout["block"]]
    return [(e["name"], shape_of(e["shape"], config), e["init"]) for e in entries]


def noise_gradient(name: str) -> bool:
    """Whether facts.tensors says the tensor's true gradient is exactly 0 (what is computed is rounding noise)."""
    layout = FACTS["tensors"]
    return any(t.get("gradient") == "noise" and re.fullmatch(re.escape(t["name"]).replace(r"\{i\}", r"\d+"), name)
               for t in layout["head"] + layout["block"])


def param_count(config: GPTConfig) -> int:
    """Without listing the layers, so an absurd n_layer costs nothing."""
    size = lambda group: sum(math.prod(shape_of(t["shape"], config)) for t in FACTS["tensors"][group])  # noqa: E731
    return size("head") + config.n_layer * size("block")


def init_params(config: GPTConfig, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """Seeded init: N(0, init_std), residual projections scaled by 1/sqrt(2*n_layer),
    LayerNorm gains ones and biases zeros. Draws happen in canonical order."""
    rng = np.random.default_rng(seed)
    std = FACTS["model"]["init_std"]
    params = {}
    for name, shape, init in tensor_specs(config):
        if init == "normal":
            p = rng.standard_normal(shape) * std
        elif init == "residual":
            p = rng.standard_normal(shape) * (std / math.sqrt(2 * config.n_layer))
        elif init == "ones":
            p = np.ones(shape)
        elif init == "zeros":
            p = np.zeros(shape)
        else:
            raise ValueError(f"facts.tensors: unknown init {init!r} for {name}")
        params[name] = p.astype(dtype)
    return params


def flatten(tensors: dict[str, np.ndarray], config: GPTConfig) -> np.ndarray:
    """All parameters (or gradients, or moments) as one flat array in canonical order."""
    return np.concatenate([tensors[name].ravel() for name, _, _ in tensor_specs(config)])


def unflatten(flat: np.ndarray, config: GPTConfig) -> dict[str, np.ndarray]:
    out, offset = {}, 0
    for name, shape, _ in tensor_specs(config):
        n = math.prod(shape)
        out[name] = flat[offset:offset + n].reshape(shape).copy()
        offset += n
    if offset != flat.size:
        raise ValueError(f"flat array has {flat.size} values, the config needs {offset}")
    return out


# ---------------------------------------------------------------------------
# Layers: each forward returns its output and the cache its backward needs.

def encoder_forward(wte, wpe, idx):
    T = idx.shape[1]
    return wte[idx] + wpe[:T]


def encoder_backward(dout, idx, wte_shape, wpe_shape):
    dwte = np.zeros(wte_shape, dout.dtype)
    np.add.at(dwte, idx.ravel(), dout.reshape(-1, dout.shape[-1]))
    dwpe = np.zeros(wpe_shape, dout.dtype)
    dwpe[:idx.shape[1]] = dout.sum(axis=0)
    return dwte, dwpe


def layernorm_forward(x, w, b):
    eps = FACTS["model"]["layernorm_eps"]
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased, as GPT-2
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    return xhat * w + b, (xhat, rstd)


def layernorm_backward(dout, cache, w):
    xhat, rstd = cache
    dw = (dout * xhat).sum(axis=(0, 1))
    db = dout.sum(axis=(0, 1))
    dxhat = dout * w
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, dw, db


# Linear layers flatten (B, T) into one dimension: one large BLAS call instead of B small ones.
def linear_forward(x, w, b):
    return (x.reshape(-1, x.shape[-1]) @ w + b).reshape(*x.shape[:-1], w.shape[1])


def linear_backward(dout, x, w):
    dout2 = dout.reshape(-1, dout.shape[-1])
    dx = (dout2 @ w.T).reshape(x.shape)
    dw = x.reshape(-1, x.shape[-1]).T @ dout2
    db = dout2.sum(axis=0)
    return dx, dw, db


def _split_heads(x, n_head):  # (B, T, C) -> (B, H, T, C/H)
    B, T, C = x.shape
    return x.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3)


def _merge_heads(x):  # (B, H, T, D) -> (B, T, H*D)
    B, H, T, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, H * D)


def attention_forward(q, k, v, n_head):
    """Causal softmax(q k^T / sqrt(head_dim)) v per head; q, k, v are (B, T, C)."""
    q, k, v = (_split_heads(t, n_head) for t in (q, k, v))
    T, D = q.shape[2], q.shape[3]
    scale = 1.0 / math.sqrt(D)
    att = q @ k.transpose(0, 1, 3, 2)  # the scores, then (in place) their softmax
    att *= scale
    att[:, :, np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf
    att -= att.max(axis=-1, keepdims=True)
    np.exp(att, out=att)
    att /= att.sum(axis=-1, keepdims=True)
    return _merge_heads(att @ v), (q, k, v, att, scale)


def attention_backward(dout, cache, n_head):
    q, k, v, att, scale = cache
    dy = _split_heads(dout, n_head)
    datt = dy @ v.transpose(0, 1, 3, 2)
    dv = att.transpose(0, 1, 3, 2) @ dy
    dscores = att * (datt - (datt * att).sum(axis=-1, keepdims=True))  # zero where masked: att is 0 there
    dq = (dscores @ k) * scale
    dk = (dscores.transpose(0, 1, 3, 2) @ q) * scale
    return _merge_heads(dq), _merge_heads(dk), _merge_heads(dv)


def gelu_forward(x):
    """Exact GELU x * Phi(x), Phi the standard normal CDF (scipy's ndtr: numpy has no erf, and
    ndtr computes in float64 and rounds to x's dtype)."""
    cdf = ndtr(x)
    return x * cdf, cdf


def gelu_backward(dout, x, cdf):
    pdf = np.exp(-0.5 * x * x) * (1 / math.sqrt(2.0 * math.pi))
    return dout * (cdf + x * pdf)


def crossentropy_forward(logits, targets):
    """Mean over all positions of -log softmax(logits)[target]; returns (loss, probs)."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probs = np.exp(shifted)
    probs /= probs.sum(axis=-1, keepdims=True)
    picked = np.take_along_axis(shifted, targets[..., None], axis=-1)[..., 0]
    logsumexp = np.log(np.exp(shifted).sum(axis=-1))
    return float((logsumexp - picked).mean()), probs


def crossentropy_backward(probs, targets):
    dlogits = probs.copy()
    np.put_along_axis(dlogits, targets[..., None], np.take_along_axis(probs, targets[..., None], axis=-1) - 1, axis=-1)
    return dlogits / targets.size


# ---------------------------------------------------------------------------
# The model: forward through every layer, backward in reverse.

def _check_tokens(config, idx, what):
    if idx.ndim != 2:
        raise ValueError(f"{what} must be (batch, time) token ids, got shape {idx.shape}")
    if idx.shape[1] > config.block_size:
        raise ValueError(f"{what} has {idx.shape[1]} positions, block_size is {config.block_size}")
    if idx.size and (idx.min() < 0 or idx.max() >= config.vocab_size):
        raise ValueError(f"{what} holds ids outside [0, {config.vocab_size})")


def forward(config: GPTConfig, params: dict, idx: np.ndarray, targets: np.ndarray | None = None, lora=None):
    """Logits (B, T, V), the mean loss when targets are given (else None), and the
    saved activations for `backward`. `lora` (a tinygpt.lora.Adapter) adds its
    low-rank terms to the projections it has tensors for."""
    idx = np.asarray(idx)
    _check_tokens(config, idx, "idx")
    acts = {"idx": idx, "blocks": [], "lora": lora}
    x = encoder_forward(params["token_embedding.weight"], params["position_embedding.weight"], idx)
    for i in range(config.n_layer):
        p = lambda name: params[f"blocks.{i}.{name}"]  # noqa: E731
        a = {"x_in": x}

        def linear(proj, inp):
            y = linear_forward(inp, p(f"{proj}.weight"), p(f"{proj}.bias"))
            if lora is not None and (pair := lora.pair(i, proj)) is not None:
                a[f"{proj}.xa"] = inp.reshape(-1, inp.shape[-1]) @ pair[0]
                y += lora.scale * (a[f"{proj}.xa"] @ pair[1]).reshape(y.shape)
            return y

        a["ln1"], a["ln1_cache"] = layernorm_forward(x, p("ln1.weight"), p("ln1.bias"))
        q, k, v = (linear(f"attn.{name}_proj", a["ln1"]) for name in "qkv")
        a["att_y"], a["att_cache"] = attention_forward(q, k, v, config.n_head)
        x = x + linear("attn.o_proj", a["att_y"])
        a["x_mid"] = x
        a["ln2"], a["ln2_cache"] = layernorm_forward(x, p("ln2.weight"), p("ln2.bias"))
        a["fc_in"] = linear("mlp.fc_in", a["ln2"])
        a["gelu"], a["gelu_cdf"] = gelu_forward(a["fc_in"])
        x = x + linear("mlp.fc_out", a["gelu"])
        acts["blocks"].append(a)
    acts["lnf"], acts["lnf_cache"] = layernorm_forward(x, params["ln_final.weight"], params["ln_final.bias"])
    logits = acts["lnf"] @ params["token_embedding.weight"].T
    loss = None
    if targets is not None:
        targets = np.asarray(targets)
        _check_tokens(config, targets, "targets")
        if targets.shape != idx.shape:
            raise ValueError(f"targets shape {targets.shape} differs from idx shape {idx.shape}")
        loss, acts["probs"] = crossentropy_forward(logits, targets)
        acts["targets"] = targets
    return logits, loss, acts


def backward(config: GPTConfig, params: dict, acts: dict) -> dict[str, np.ndarray]:
    """Gradients of the mean loss of the last `forward` (which needs targets): of every
    parameter, and of the adapter's tensors when the forward had one."""
    if "probs" not in acts:
        raise ValueError("backward needs a forward pass that was given targets")
    grads = {}
    lora = acts["lora"]
    wte = params["token_embedding.weight"]
    dlogits = crossentropy_backward(acts["probs"], acts["targets"])
    dwte_head = dlogits.reshape(-1, dlogits.shape[-1]).T @ acts["lnf"].reshape(-1, acts["lnf"].shape[-1])
    dx, grads["ln_final.weight"], grads["ln_final.bias"] = layernorm_backward(
        dlogits @ wte, acts["lnf_cache"], params["ln_final.weight"])
    for i in reversed(range(config.n_layer)):
        p = lambda name: params[f"blocks.{i}.{name}"]  # noqa: E731
        g = lambda name: f"blocks.{i}.{name}"  # noqa: E731
        a = acts["blocks"][i]

        def linear(proj, dout, inp):
            dinp, grads[g(f"{proj}.weight")], grads[g(f"{proj}.bias")] = linear_backward(dout, inp, p(f"{proj}.weight"))
            if lora is not None and (pair := lora.pair(i, proj)) is not None:
                # y += s (x A) B: dB = s (x A)^T dy, d(xA) = s dy B^T, dA = x^T d(xA), dx += d(xA) A^T
                dout2 = dout.reshape(-1, dout.shape[-1])
                dxa = lora.scale * (dout2 @ pair[1].T)
                grads[g(f"{proj}.lora_b")] = lora.scale * (a[f"{proj}.xa"].T @ dout2)
                grads[g(f"{proj}.lora_a")] = inp.reshape(-1, inp.shape[-1]).T @ dxa
                dinp = dinp + (dxa @ pair[0].T).reshape(inp.shape)
            return dinp

        # x_out = x_mid + fc_out(gelu(fc_in(ln2(x_mid))))
        dgelu = linear("mlp.fc_out", dx, a["gelu"])
        dfc_in = gelu_backward(dgelu, a["fc_in"], a["gelu_cdf"])
        dln2 = linear("mlp.fc_in", dfc_in, a["ln2"])
        dmid, grads[g("ln2.weight")], grads[g("ln2.bias")] = layernorm_backward(dln2, a["ln2_cache"], p("ln2.weight"))
        dx = dx + dmid
        # x_mid = x_in + o_proj(attention(q, k, v)), q/k/v = proj(ln1(x_in))
        datt_y = linear("attn.o_proj", dx, a["att_y"])
        dq, dk, dv = attention_backward(datt_y, a["att_cache"], config.n_head)
        dln1 = sum(linear(f"attn.{name}_proj", d, a["ln1"]) for name, d in (("q", dq), ("k", dk), ("v", dv)))
        din, grads[g("ln1.weight")], grads[g("ln1.bias")] = layernorm_backward(dln1, a["ln1_cache"], p("ln1.weight"))
        dx = dx + din
    dwte, grads["position_embedding.weight"] = encoder_backward(
        dx, acts["idx"], wte.shape, params["position_embedding.weight"].shape)
    grads["token_embedding.weight"] = dwte + dwte_head
    out = {name: grads[name] for name, _, _ in tensor_specs(config)}
    if lora is not None:
        out.update((name, grads[name]) for name in lora.tensors)
    return out


# ---------------------------------------------------------------------------
# Sampling.

def next_logits(config: GPTConfig, params: dict, tokens) -> np.ndarray:
    """Logits for the token after `tokens` (1 to block_size of them)."""
    context = np.asarray(tokens, dtype=np.int64)
    if not 0 < context.size <= config.block_size:
        raise ValueError(f"next_logits takes 1 to {config.block_size} tokens, got {context.size}")
    logits, _, _ = forward(config, params, context[None, :])
    return logits[0, -1]


def window_start(start: int, length: int, block_size: int) -> int:
    """Where the sampling window of a `length`-token text begins, given where it began before
    (facts.json sampling): unchanged while it holds at most block_size tokens, else the last
    floor(block_size * slide_keep), which a KV cache prefills again."""
    if length - start <= block_size:
        return start
    return length - max(1, int(block_size * FACTS["sampling"]["slide_keep"]))


def draw_weights(logits: np.ndarray, temperature: float, top_k: int, top_p: float = 1.0) -> np.ndarray:
    """The unnormalised probabilities a token is drawn from at temperature > 0: softmax(logits /
    temperature) over the top_k largest (0 = all), then only the nucleus: the fewest most likely
    tokens (the lower id first on ties, at least one) whose probabilities reach top_p of the rest."""
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    scaled = np.asarray(logits, dtype=np.float64) / temperature
    if 0 < top_k < scaled.size:
        kth = np.sort(scaled)[-top_k]
        scaled = np.where(scaled < kth, -np.inf, scaled)
    weights = np.exp(scaled - scaled.max())
    if top_p < 1:
        order = sorted(np.flatnonzero(weights), key=lambda i: (-weights[i], i))
        n = min(len(order), int(np.searchsorted(np.cumsum(weights[order]), top_p * weights.sum(), side="left")) + 1)
        weights[order[n:]] = 0
    return weights


def pick_token(logits: np.ndarray, temperature: float, top_k: int, rng: np.random.Generator, top_p: float = 1.0) -> int:
    """Temperature 0 is greedy: the argmax (lowest id on ties), no randomness used. Otherwise one
    uniform draw against the cumulative draw_weights, in id order (webapp/engine/sample.ts pickToken)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return int(np.argmax(logits))
    weights = draw_weights(logits, temperature, top_k, top_p)
    cdf = np.cumsum(weights / weights.sum())
    return int(min(np.searchsorted(cdf, rng.random(), side="right"), weights.size - 1))


def generate(config: GPTConfig, params: dict, prompt, max_new_tokens: int,
             temperature: float = 1.0, top_k: int = 0, seed: int = 0, top_p: float = 1.0) -> list[int]:
    """The prompt's continuation, max_new_tokens token ids long."""
    rng = np.random.default_rng(seed)
    tokens = [int(t) for t in prompt]
    if not tokens:
        raise ValueError("sampling needs at least one prompt token")
    start, out = max(0, len(tokens) - config.block_size), []
    for _ in range(max_new_tokens):
        start = window_start(start, len(tokens), config.block_size)
        token = pick_token(next_logits(config, params, tokens[start:]), temperature, top_k, rng, top_p)
        tokens.append(token)
        out.append(token)
    return out
