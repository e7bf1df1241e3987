"""Where a training step's GPU time goes: every WGSL kernel timed at one preset's real shapes,
times how often one step (forward, loss, backward, clipping, AdamW) calls it.

The call list follows the model in tinygpt/model.py with the matmul the docs recommend
(matmul_vec4, 128 or 64 block by grid size). The engine may fuse or reorder, so treat the
total as an estimate of the kernels' share, not as the engine's step time.

Writes content/data/kernels.json (or --out) and prints a table.

    python bench/bench_kernels.py --preset huge
"""
import argparse
import datetime
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tinygpt import gpu, model  # noqa: E402
from tinygpt.facts import FACTS, preset  # noqa: E402


def matmul_call(orientation, M, N, K):
    """(group, shader, entry, params, sizes of bindings 1..4, workgroups) for one matmul."""
    big = -(-M // 128) * -(-N // 128) >= 128
    edge = 128 if big else 64
    entry = f"matmul_vec4_{orientation}" + ("" if big else "_64")
    return ("matmul", "matmul_vec4", entry, (M, N, K, 0), {1: M * K, 2: K * N, 3: N, 4: M * N},
            (-(-N // edge), -(-M // edge), 1))


def step_calls(p):
    """[(count, call)] of one training step at preset p."""
    B, T, C, H, L, V = p["batch_size"], p["block_size"], p["n_embd"], p["n_head"], p["n_layer"], FACTS["vocab_size"]
    R, F = B * T, 4 * C
    n_params = model.param_count(model.GPTConfig.from_preset(p["id"]))
    eps = FACTS["model"]["layernorm_eps"]
    n_partials = min(-(-n_params // 256), 1024)
    ln = (R, C, eps, 0)
    att = (B, T, C, H)
    att_groups = (-(-T // 64), B * H, 1)
    opt = (n_params, n_partials, 0, 1.0, 1e-3, 0.9, 0.95, 1e-8, 0.1, 0.1, 0.05)
    return [
        (1, ("embedding", "embedding", "embedding_forward", (B, T, C, V, 0), {1: R, 2: V * C, 3: T * C, 4: R * C}, gpu.groups_1d(R * C))),
        (2 * L + 1, ("layernorm", "layernorm", "layernorm_forward", ln, {1: R * C, 2: C, 3: C, 4: R * C, 5: R, 6: R}, (R, 1, 1))),
        (4 * L, matmul_call("nn", R, C, C)),
        (L, matmul_call("nn", R, F, C)),
        (L, matmul_call("nn", R, C, F)),
        (1, matmul_call("nt", R, V, C)),
        (L, ("attention", "attention", "attention_forward", att, {1: R * C, 2: R * C, 3: R * C, 4: R * C, 5: B * H * T}, att_groups)),
        (L, ("gelu", "gelu", "gelu_forward", (R * F,), {1: R * F, 2: R * F}, gpu.groups_1d(R * F))),
        (2 * L, ("residual", "residual", "residual_add", (R * C,), {1: R * C, 2: R * C, 3: R * C}, gpu.groups_1d(R * C))),
        (1, ("cross-entropy", "crossentropy", "crossentropy_forward", (R, V), {1: R * V, 2: R, 3: R, 4: R}, (R, 1, 1))),
        (1, ("cross-entropy", "crossentropy", "crossentropy_mean", (R, V), {7: R, 8: 1}, (1, 1, 1))),
        (1, ("cross-entropy", "crossentropy", "crossentropy_backward", (R, V), {1: R * V, 2: R, 5: R, 6: R * V}, (R, 1, 1))),
        (1, matmul_call("nn", R, C, V)),
        (1, matmul_call("tn", V, C, R)),
        (4 * L, matmul_call("nt", R, C, C)),
        (4 * L, matmul_call("tn", C, C, R)),
        (L, matmul_call("nt", R, C, F)),
        (L, matmul_call("tn", C, F, R)),
        (L, matmul_call("nt", R, F, C)),
        (L, matmul_call("tn", F, C, R)),
        (5 * L, ("matmul", "matmul", "matmul_colsum", (R, C, 0, 0), {1: R * C, 4: C}, (-(-C // 64), 1, 1))),
        (L, ("matmul", "matmul", "matmul_colsum", (R, F, 0, 0), {1: R * F, 4: F}, (-(-F // 64), 1, 1))),
        (L, ("gelu", "gelu", "gelu_backward", (R * F,), {1: R * F, 3: R * F, 4: R * F}, gpu.groups_1d(R * F))),
        (2 * L + 1, ("layernorm", "layernorm", "layernorm_backward_dx", ln, {1: R * C, 2: C, 5: R, 6: R, 7: R * C, 8: R * C}, (R, 1, 1))),
        (2 * L + 1, ("layernorm", "layernorm", "layernorm_backward_params", ln, {1: R * C, 5: R, 6: R, 7: R * C, 9: C, 10: C}, (-(-C // 32), 1, 1))),
        (L, ("attention", "attention", "attention_backward_delta", att, {6: R * C, 11: R * C, 7: B * H * T}, att_groups)),
        (L, ("attention", "attention", "attention_backward_dq", att, {1: R * C, 2: R * C, 3: R * C, 6: R * C, 12: B * H * T, 13: B * H * T, 8: R * C}, att_groups)),
        (L, ("attention", "attention", "attention_backward_dkdv", att, {1: R * C, 2: R * C, 3: R * C, 6: R * C, 12: B * H * T, 13: B * H * T, 9: R * C, 10: R * C}, att_groups)),
        (2 * L, ("residual", "residual", "residual_accumulate", (R * C,), {1: R * C, 3: R * C}, gpu.groups_1d(R * C))),
        (1, ("embedding", "embedding", "embedding_backward_wte", (B, T, C, V, 2), {1: R, 5: R * C, 6: V * C}, (-(-C // 64), V, 1))),
        (1, ("embedding", "embedding", "embedding_backward_wpe", (B, T, C, V, 0), {5: R * C, 7: T * C}, gpu.groups_1d(T * C))),
        (1, ("optimizer", "optimizer", "grad_norm_partial", opt, {1: n_params, 2: n_partials}, (n_partials, 1, 1))),
        (1, ("optimizer", "optimizer", "grad_norm_final", opt, {3: n_partials, 4: 2}, (1, 1, 1))),
        (1, ("optimizer", "optimizer", "adamw", opt, {1: n_params, 5: 2, 6: n_params, 7: n_params, 8: n_params}, gpu.groups_1d(n_params))),
    ]


def buffers_for(rng, shader, params, sizes):
    """Random inputs of the right sizes; token ids (u32 bindings) drawn in range."""
    u32 = {"embedding": {1}, "crossentropy": {2}}.get(shader, set())
    out = {0: gpu.uniform(params)}
    for i, n in sizes.items():
        if i in u32:
            out[i] = gpu.upload(rng.integers(0, FACTS["vocab_size"], n).astype(np.uint32))
        else:
            out[i] = gpu.upload(rng.standard_normal(n).astype(np.float32) * (0.5 if shader == "attention" else 1.0))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="huge", choices=[p["id"] for p in FACTS["presets"]])
    ap.add_argument("--out", type=Path, default=ROOT / "content" / "data" / "kernels.json")
    args = ap.parse_args(argv)
    p = preset(args.preset)
    rng = np.random.default_rng(0)
    rows, per_group = [], defaultdict(float)
    print(f"adapter: {gpu.describe()}; preset {args.preset}")
    print(f"{'kernel':28s} {'shape':22s} {'us/call':>9s} {'calls':>6s} {'ms/step':>8s}")
    for count, (group, shader, entry, params, sizes, groups) in step_calls(p):
        seconds = gpu.seconds_per_dispatch(shader, entry, buffers_for(rng, shader, params, sizes), groups,
                                           passes=3, min_pass_s=0.02)
        shape = "x".join(map(str, params[:3])) if shader.startswith("matmul") else ""
        ms = seconds * count * 1e3
        per_group[group] += ms
        rows.append({"kernel": entry, "shape": shape, "us per call": round(seconds * 1e6, 1), "calls per step": count,
                     "ms per step": round(ms, 3)})
        print(f"{entry:28s} {shape:22s} {seconds * 1e6:9.1f} {count:6d} {ms:8.3f}", flush=True)
    total = sum(per_group.values())
    print(f"\nestimated kernel time per step: {total:.2f} ms")
    for g, ms in sorted(per_group.items(), key=lambda kv: -kv[1]):
        print(f"  {g:14s} {ms:8.2f} ms  {ms / total:6.1%}")
    data = {
        "benchmark": "kernels",
        "title": f"GPU time per training step by kernel family ({p['label']} preset)",
        "hardware": f"WebGPU adapter: {gpu.describe()} via wgpu-py",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python bench/bench_kernels.py --preset {args.preset}",
        "x_label": "kernel family",
        "series": [{"name": "ms per step", "unit": "ms",
                    "points": [{"x": g, "y": round(ms, 3)} for g, ms in sorted(per_group.items(), key=lambda kv: -kv[1])]}],
        "rows": rows,
        "notes": f"Each kernel timed alone at batch {p['batch_size']} x {p['block_size']} tokens, times its calls in one "
                 f"step; total {total:.2f} ms. An estimate of where time goes, not the engine's measured step time.",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
