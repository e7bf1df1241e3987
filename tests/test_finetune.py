"""python -m tinygpt.finetune: an adapter trained on a frozen gallery model fits a new text, saves as an
adapter file naming its base, resumes, merges into a plain model with the same outputs, and is refused
by any other base."""
import re
from pathlib import Path

import numpy as np
import pytest

from tinygpt import checkpoint, finetune, model
from tinygpt.train import evaluate, split

ROOT = Path(__file__).resolve().parent.parent
BASE, OTHER = ROOT / "gallery" / "shakespeare-tiny.tinygpt", ROOT / "gallery" / "python-tiny.tinygpt"
TEXT = b"".join(b"order %d: %d lemons, %d limes, shipped to bay %d.\n" % (i, i * 7 % 13, i * 5 % 11, i % 4) for i in range(300))


def val_loss(ckpt, params) -> float:
    return evaluate(ckpt.config, params, split(TEXT)[1], 4, 16)


def test_an_adapter_fits_a_new_text_resumes_and_merges(tmp_path, capsys):
    (tmp_path / "orders.txt").write_bytes(TEXT)
    base = checkpoint.load(BASE)
    common = ["--corpus", str(tmp_path / "orders.txt"), "--lr", "0.01", "--seed", "3", "--eval-every", "20"]
    finetune.main([str(BASE), *common, "--steps", "40", "--out", str(tmp_path / "a.tinygpt")])
    saved = checkpoint.load(tmp_path / "a.tinygpt")
    assert saved.adapter == {"rank": 8, "alpha": 16.0, "targets": ["q", "v"], "base_sha256": checkpoint.weights_sha256(base)}
    assert saved.trainer["step"] == 40 and saved.m is not None and [p["step"] for p in saved.history][-1] == 40
    assert (tmp_path / "a.tinygpt").stat().st_size < 100_000  # 4,096 parameters and their moments on Tiny

    finetune.main([str(BASE), *common, "--steps", "20", "--resume", str(tmp_path / "a.tinygpt"), "--out", str(tmp_path / "b.tinygpt")])
    resumed = checkpoint.load(tmp_path / "b.tinygpt")
    assert resumed.trainer["step"] == 60 and [p["step"] for p in resumed.history] == list(range(1, 61))
    before, after = val_loss(base, base.params), resumed.history[-1]["val"]
    assert after < 0.6 * before, f"validation loss on the new text {before:.3f} -> {after:.3f}"

    finetune.main([str(BASE), "--merge", str(tmp_path / "b.tinygpt"), "--out", str(tmp_path / "merged.tinygpt")])
    merged = checkpoint.load(tmp_path / "merged.tinygpt")
    assert merged.adapter is None and merged.trainer is None
    changed = {n for n in base.params if not np.array_equal(base.params[n], merged.params[n])}
    assert changed == {f"blocks.{i}.attn.{p}_proj.weight" for i in range(base.config.n_layer) for p in "qv"}
    adapter = finetune.adapter_of(base, resumed)
    idx = np.frombuffer(TEXT[:64], np.uint8).astype(np.int64)[None]
    assert np.allclose(model.forward(base.config, merged.params, idx)[0],
                       model.forward(base.config, base.params, idx, lora=adapter)[0], rtol=0, atol=1e-4)
    assert "validation loss" in capsys.readouterr().out


def test_an_adapter_for_another_base_or_a_model_is_refused(tmp_path, capsys):
    (tmp_path / "orders.txt").write_bytes(TEXT)
    finetune.main([str(BASE), "--corpus", str(tmp_path / "orders.txt"), "--steps", "1", "--out", str(tmp_path / "a.tinygpt")])
    want, got = (checkpoint.weights_sha256(checkpoint.load(p)) for p in (BASE, OTHER))
    for argv in (["--merge", str(tmp_path / "a.tinygpt")],
                 ["--corpus", str(tmp_path / "orders.txt"), "--resume", str(tmp_path / "a.tinygpt")]):
        with pytest.raises(SystemExit) as e:
            finetune.main([str(OTHER), *argv, "--out", str(tmp_path / "x.tinygpt")])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert re.search(rf"a\.tinygpt belongs to the model whose weights hash to {want[:16]}…, "
                         rf"but .*python-tiny\.tinygpt's hash to {got[:16]}…", err), err
    with pytest.raises(SystemExit):
        finetune.main([str(BASE), "--merge", str(OTHER), "--out", str(tmp_path / "x.tinygpt")])
    assert "python-tiny.tinygpt is a model, not a LoRA adapter" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        finetune.main([str(tmp_path / "a.tinygpt"), "--corpus", str(tmp_path / "orders.txt"), "--out", str(tmp_path / "x.tinygpt")])
    assert "is a LoRA adapter, not a model to fine-tune" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        finetune.main([str(BASE), "--corpus", str(tmp_path / "orders.txt"), "--targets", "q,gate", "--out", str(tmp_path / "x.tinygpt")])
    assert "LoRA targets must be distinct names from q, k, v, o, fc_in, fc_out" in capsys.readouterr().err
    assert not (tmp_path / "x.tinygpt").exists()
