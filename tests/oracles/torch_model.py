"""The reference GPT written with PyTorch's own layers and autograd, from the model
description rather than from model.py: the independent check in
tests/test_torch_parity.py and the PyTorch baseline of every benchmark (bench_reference.py,
bench_cpu.py, bench_train.py).
torch is a test and benchmark extra: only callers that have it import this."""
import torch

from tinygpt.facts import FACTS

F = torch.nn.functional


def adamw(params, tc) -> torch.optim.AdamW:
    """PyTorch's AdamW as every engine runs it: tc's betas, eps and weight decay, the decay on 2-D
    tensors only (facts.json tensors' rule); params are the model's tensors, tc a TrainConfig."""
    params = list(params)
    groups = [{"params": [p for p in params if p.dim() == 2], "weight_decay": tc.weight_decay},
              {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=tc.eps)


def torch_loss(config, P, idx, targets):
    """Logits and mean cross-entropy; P maps canonical names to tensors in storage shapes."""
    B, T = idx.shape
    C, H = config.n_embd, config.n_head
    eps = FACTS["model"]["layernorm_eps"]
    x = P["token_embedding.weight"][idx] + P["position_embedding.weight"][:T]
    for i in range(config.n_layer):
        p = lambda n: P[f"blocks.{i}.{n}"]  # noqa: E731
        h = F.layer_norm(x, (C,), p("ln1.weight"), p("ln1.bias"), eps)
        q, k, v = (F.linear(h, p(f"attn.{n}_proj.weight").T, p(f"attn.{n}_proj.bias")).view(B, T, H, C // H).transpose(1, 2)
                   for n in "qkv")
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, p("attn.o_proj.weight").T, p("attn.o_proj.bias"))
        h = F.layer_norm(x, (C,), p("ln2.weight"), p("ln2.bias"), eps)
        h = F.gelu(F.linear(h, p("mlp.fc_in.weight").T, p("mlp.fc_in.bias")), approximate="none")
        x = x + F.linear(h, p("mlp.fc_out.weight").T, p("mlp.fc_out.bias"))
    x = F.layer_norm(x, (C,), P["ln_final.weight"], P["ln_final.bias"], eps)
    logits = x @ P["token_embedding.weight"].T
    return logits, F.cross_entropy(logits.reshape(-1, config.vocab_size), targets.reshape(-1))


def torch_logits_cached(config, P, idx, cache: list):
    """Logits of idx (1, t) at the positions after the ones whose keys and values `cache` holds
    (per layer a (k, v) pair, each (1, heads, positions, head size); an empty list to prefill),
    which it extends: PyTorch sampling with a KV cache. Either the cache is empty or t is 1, so
    causality needs a mask only when prefilling."""
    start = cache[0][0].shape[2] if cache else 0
    t = idx.shape[1]
    assert start == 0 or t == 1, "a cached step takes one token"
    C, H = config.n_embd, config.n_head
    eps = FACTS["model"]["layernorm_eps"]
    x = P["token_embedding.weight"][idx] + P["position_embedding.weight"][start:start + t]
    for i in range(config.n_layer):
        p = lambda n: P[f"blocks.{i}.{n}"]  # noqa: E731
        h = F.layer_norm(x, (C,), p("ln1.weight"), p("ln1.bias"), eps)
        q, k, v = (F.linear(h, p(f"attn.{n}_proj.weight").T, p(f"attn.{n}_proj.bias")).view(1, t, H, C // H).transpose(1, 2)
                   for n in "qkv")
        if start:
            k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            cache[i] = (k, v)
        else:
            cache.append((k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=start == 0).transpose(1, 2).reshape(1, t, C)
        x = x + F.linear(y, p("attn.o_proj.weight").T, p("attn.o_proj.bias"))
        h = F.layer_norm(x, (C,), p("ln2.weight"), p("ln2.bias"), eps)
        h = F.gelu(F.linear(h, p("mlp.fc_in.weight").T, p("mlp.fc_in.bias")), approximate="none")
        x = x + F.linear(h, p("mlp.fc_out.weight").T, p("mlp.fc_out.bias"))
    x = F.layer_norm(x, (C,), P["ln_final.weight"], P["ln_final.bias"], eps)
    return x @ P["token_embedding.weight"].T
