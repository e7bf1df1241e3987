"""Fine-tune a frozen model with a LoRA adapter in the numpy reference, or merge an adapter into its base:

    python -m tinygpt.finetune gallery/shakespeare-tiny.tinygpt --corpus notes.txt --steps 300 --out notes.tinygpt
    python -m tinygpt.finetune gallery/shakespeare-tiny.tinygpt --merge notes.tinygpt --out merged.tinygpt

The adapter file names its base by the hash of the base's weights (facts.json
format.adapter); one trained on another base is refused, with both hashes.
"""
import argparse
import hashlib
import time
from pathlib import Path

import numpy as np

from tinygpt import checkpoint, lora
from tinygpt.checkpoint import Checkpoint
from tinygpt.facts import FACTS
from tinygpt.train import TrainConfig, evaluate, get_batch, load_corpus, split


def adapter_of(base: Checkpoint, ckpt: Checkpoint, base_name: str = "the base", name: str = "the adapter") -> lora.Adapter:
    """The adapter `ckpt` holds, once it is known to be one and to belong to `base`."""
    if ckpt.adapter is None:
        raise ValueError(f"{name} is a model, not a LoRA adapter")
    got, want = checkpoint.weights_sha256(base), ckpt.adapter["base_sha256"]
    if got != want:
        raise ValueError(f"{name} belongs to the model whose weights hash to {want[:16]}…, "
                              f"but {base_name}'s hash to {got[:16]}…")
    return lora.Adapter(lora.LoraConfig.from_header(ckpt.adapter), {n: ckpt.params[n].copy() for n in ckpt.params})


def adapter_file(base: Checkpoint, trainer: lora.LoraTrainer, history: list[dict], dataset: dict | None,
                 include_optimizer: bool = True) -> Checkpoint:
    return Checkpoint(config=base.config, params=trainer.adapter.tensors,
                      adapter=trainer.adapter.lc.header(checkpoint.weights_sha256(base)),
                      m=trainer.m if include_optimizer else None, v=trainer.v if include_optimizer else None,
                      trainer={"step": trainer.step, "config": trainer.tc.to_dict()}, history=history, dataset=dataset,
                      provenance={"producer": checkpoint.PRODUCER, **({"corpus_sha256": dataset["sha256"]} if dataset else {})})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base", help="the frozen model, a .tinygpt file")
    ap.add_argument("--corpus", help="the text to fine-tune on: a prepared corpus id or a text file")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rank", type=int, default=FACTS["lora"]["rank"])
    ap.add_argument("--alpha", type=float, default=FACTS["lora"]["alpha"])
    ap.add_argument("--targets", default=",".join(FACTS["lora"]["targets"]),
                    help=f"projections to adapt, from {','.join(lora.PROJECTIONS)}")
    ap.add_argument("--lr", type=float, default=FACTS["lora"]["lr"])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--resume", help="an adapter file to train further (its settings and Adam state)")
    ap.add_argument("--merge", help="instead of training: fold this adapter into the base and write a plain model")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    def read(path: str) -> Checkpoint:
        try:
            return checkpoint.load(path)
        except (OSError, checkpoint.CheckpointError) as e:
            ap.exit(2, f"finetune: {path}: {e}\n")

    base = read(args.base)
    if base.adapter is not None:
        ap.exit(2, f"finetune: {args.base} is a LoRA adapter, not a model to fine-tune\n")
    try:
        if args.merge:
            adapter = adapter_of(base, read(args.merge), args.base, args.merge)
            merged = Checkpoint(config=base.config, params=adapter.merge(base.params), history=base.history,
                                dataset=base.dataset, provenance={"producer": checkpoint.PRODUCER})
            checkpoint.save(args.out, merged)
            print(f"wrote {args.out}: {args.base} with {args.merge} folded in")
            return
        if not args.corpus:
            ap.error("--corpus is needed to fine-tune (or --merge ADAPTER)")
        tc = TrainConfig(batch_size=args.batch_size, lr=args.lr, seed=args.seed)
        if args.resume:
            saved = read(args.resume)
            trainer = lora.LoraTrainer(base.config, base.params, adapter_of(base, saved, args.base, args.resume), tc)
            trainer.step = saved.trainer["step"] if saved.trainer else 0
            if saved.m is not None:
                trainer.m, trainer.v = saved.m, saved.v
            history = list(saved.history)
        else:
            lc = lora.LoraConfig(args.rank, args.alpha, tuple(t for t in args.targets.split(",") if t))
            trainer = lora.LoraTrainer(base.config, base.params, lora.Adapter.init(base.config, lc, args.seed), tc)
            history = []
    except ValueError as e:  # settings out of range, or an adapter that is not this base's
        ap.exit(2, f"finetune: {e}\n")

    name, data = load_corpus(args.corpus)
    train_tokens, val_tokens = split(data)
    block = base.config.block_size
    if len(train_tokens) <= block or len(val_tokens) <= block:
        ap.exit(2, f"finetune: {name} is too short: its training and validation parts need more than {block} bytes each\n")
    rng = np.random.default_rng([args.seed, trainer.step])
    val = lambda: evaluate(base.config, trainer.adapter.merge(base.params), val_tokens,  # noqa: E731
                           FACTS["app"]["eval_batches"], args.batch_size)
    print(f"{sum(t.size for t in trainer.adapter.tensors.values()):,} adapter parameters on a frozen "
          f"{sum(p.size for p in base.params.values()):,}; validation loss {val():.4f} before")
    t0 = time.time()
    for i in range(args.steps):
        out = trainer.train_step(*get_batch(train_tokens, args.batch_size, block, rng))
        point = {"step": trainer.step, "train": out["loss"]}
        if trainer.step % args.eval_every == 0 or i == args.steps - 1:
            point["val"] = val()
            print(f"step {trainer.step:5d}  train {out['loss']:.4f}  val {point['val']:.4f}  {time.time() - t0:.1f}s")
        history.append(point)
    dataset = {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    checkpoint.save(args.out, adapter_file(base, trainer, history, dataset))
    print(f"wrote {args.out} ({Path(args.out).stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
