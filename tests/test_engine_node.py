"""The web engine in Node: bundle webapp/engine/test/*.test.ts and
webapp/levers/*.test.ts with esbuild, run `node --test` on Dawn with
SwiftShader's Vulkan driver, and each GPU lever's webapp/levers/<id>/*.test.ts. The Node tests run the backend conformance suite
(webapp/engine/test/conformance.ts: the golden fixture, a resumed run, the
shapes tests/oracles/conformance.py writes here) on the WebGPU backend, and check the
lever framework (the GPU gate's mutation proof), checkpoint round trips,
version 1 files, corrupt-file messages; this file adds the Python side: Node
reads the Python writer's file and re-saves it, Python reads both back, and
Python's reference gets the same loss from a file the engine trained and saved; and
the Node CLI trains a file Python reads, with the reference's validation metric, and
samples a gallery model's bytes as the reference does."""
import hashlib
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.oracles import conformance
from tinygpt import checkpoint, finetune, lora, model
from tinygpt.facts import FACTS
from tinygpt.site_build import node
from tinygpt.train import Trainer, TrainConfig
from tinygpt.validation import validation_loss

ROOT = Path(__file__).resolve().parent.parent
ENV = node.dawn_env()
NO_DRIVER = None if node.dawn_driver(ENV) else "Dawn has no Vulkan driver here (SwiftShader's comes with the chromium package)"


def python_checkpoint(path: Path) -> checkpoint.Checkpoint:
    """A few reference steps on a small model, saved with Adam state: a file with nothing default in it."""
    config = model.GPTConfig(vocab_size=256, n_layer=1, n_embd=16, n_head=2, block_size=8)
    trainer = Trainer(config, TrainConfig(batch_size=2, lr=1e-2, warmup_steps=2, seed=3))
    tokens = np.frombuffer(b"to be or not to be, that is the question", dtype=np.uint8)
    for i in range(3):
        x = np.stack([tokens[i:i + 8], tokens[i + 9:i + 17]]).astype(np.int64)
        y = np.stack([tokens[i + 1:i + 9], tokens[i + 10:i + 18]]).astype(np.int64)
        loss = trainer.train_step(x, y, 1e-2)["loss"]
        trainer.history.append({"step": trainer.step, "train": loss, **({"val": loss + 0.25} if i == 2 else {})})
    ckpt = checkpoint.from_trainer(trainer, dataset={"name": "hamlet", "bytes": len(tokens), "sha256": "0" * 64},
                                   include_optimizer=True)
    checkpoint.save(path, ckpt)
    return ckpt


@pytest.fixture(scope="module")
def node_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("engine")
    # Each folder's tests bundled into a folder of their own: the engine's gpu.test.ts and the levers' share a name.
    bundles = []
    # and each GPU lever's own (webapp/levers/<id>/*.test.ts), which need only Dawn.
    gpu_levers = [f"webapp/levers/{lever['id']}" for lever in FACTS["levers"]
                  if lever["backend"] == "webgpu" and (ROOT / "webapp" / "levers" / lever["id"]).is_dir()]
    for folder, out in (("webapp/engine/test", tmp), ("webapp/levers", tmp / "levers"),
                        *((f, tmp / "levers" / Path(f).name) for f in gpu_levers)):
        tests = sorted((ROOT / folder).glob("*.test.ts"))
        assert tests, f"no {folder}/*.test.ts found"
        bundles += node.node_bundle(ROOT, [t.relative_to(ROOT) for t in tests], out, link_modules=True)
    paths = {"py": tmp / "python.tinygpt", "resaved": tmp / "node-resaved.tinygpt", "trained": tmp / "node-trained.tinygpt"}
    written = python_checkpoint(paths["py"])
    conformance.write(tmp / "conformance")
    env = {**ENV, "TINYGPT_ROOT": str(ROOT), "TINYGPT_CONFORMANCE": str(tmp / "conformance"),
           "TINYGPT_PY_CHECKPOINT": str(paths["py"]), "TINYGPT_NODE_CHECKPOINT_OUT": str(paths["resaved"]),
           "TINYGPT_NODE_TRAINED_OUT": str(paths["trained"])}
    run = subprocess.run(["node", "--test", *map(str, bundles)], cwd=tmp, env=env,
                         capture_output=True, text=True, timeout=3600)
    return run, paths, written


def test_engine_node_tests_pass(node_run):
    run, _, _ = node_run
    assert run.returncode == 0, f"node --test exited {run.returncode}\n{run.stdout}\n{run.stderr}"
    if NO_DRIVER:
        pytest.skip(f"the WebGPU tests skipped: {NO_DRIVER}")
    # A GPU lever whose feature the adapter lacks (SwiftShader: shader-f16) is the only skip allowed.
    skipped = int(re.search(r"^# skipped (\d+)", run.stdout, re.M)[1])
    lacking = len(re.findall(r"# SKIP the adapter lacks ", run.stdout))
    assert skipped == lacking, f"a Node test was skipped:\n{run.stdout}"


def test_python_reads_the_engines_resave_of_its_file(node_run):
    _, paths, written = node_run
    back = checkpoint.load(paths["resaved"])
    assert back.config == written.config
    assert back.trainer == written.trainer
    assert back.history == written.history
    assert back.dataset == written.dataset
    for name in written.params:
        np.testing.assert_array_equal(back.params[name], written.params[name], err_msg=name)
        np.testing.assert_array_equal(back.m[name], written.m[name], err_msg=name)
        np.testing.assert_array_equal(back.v[name], written.v[name], err_msg=name)


def test_python_reference_gets_the_engines_loss_from_its_file(node_run):
    _, paths, _ = node_run
    if not paths["trained"].exists():
        pytest.skip("the engine's WebGPU test did not run here (see test_engine_node_tests_pass)")
    golden = json.loads((ROOT / "tests" / "fixtures" / "golden_tiny.json").read_text())
    ckpt = checkpoint.load(paths["trained"])
    engine_loss = json.loads(Path(f"{paths['trained']}.json").read_text())["loss"]
    T = ckpt.config.block_size
    x = np.array(golden["steps"][0]["x"], dtype=np.int64).reshape(-1, T)
    y = np.array(golden["steps"][0]["y"], dtype=np.int64).reshape(-1, T)
    loss = model.forward(ckpt.config, ckpt.params, x, y)[1]
    assert abs(loss - engine_loss) <= 1e-4 * abs(loss), f"reference loss {loss} vs engine {engine_loss}"


def test_cli_trains_and_writes_a_file_python_reads(tmp_path):
    if NO_DRIVER:
        pytest.skip(f"the CLI trains on WebGPU: {NO_DRIVER}")
    train = node.build_cli(ROOT, tmp_path / "dist-cli")["train"]  # what `python build.py cli` writes
    text = b"Shall I compare thee to a summer's day? Thou art more lovely and more temperate.\n" * 20
    (tmp_path / "sonnet.txt").write_bytes(text)
    def cli(*args):
        return subprocess.run(["node", str(train), *args], cwd=tmp_path, env=ENV,
                              capture_output=True, text=True, timeout=300)

    bad = cli("--preset", "enormous", "--corpus", "sonnet.txt", "--steps", "1", "--out", "x.tinygpt")
    assert bad.returncode == 2 and 'unknown preset "enormous"' in bad.stderr, bad.stderr
    # Batch size 1 keeps a step quick on SwiftShader; the file must still be a whole run. The runs here
    # gate no lever (--levers none): a gate trains its own shapes, minutes on SwiftShader, and the
    # levers' gates have their own tests.
    run = cli("--preset", "tiny", "--corpus", "sonnet.txt", "--steps", "2", "--batch-size", "1", "--eval-every", "2",
              "--eval-batches", "1", "--out", "tiny.tinygpt", "--f16", "--val-metric", "--stats", "stats.json", "--levers", "none")
    assert run.returncode == 0, run.stdout + run.stderr
    ckpt = checkpoint.load(tmp_path / "tiny.tinygpt")
    # The engine's metric on its f32 weights, the reference's on the file's f16 copy of them.
    metric = json.loads((tmp_path / "stats.json").read_text())["val_metric"]
    assert metric == pytest.approx(validation_loss(ckpt.config, ckpt.params, text), rel=1e-3)
    assert ckpt.config == model.GPTConfig.from_preset("tiny")
    assert ckpt.dtype == "f16" and ckpt.m is not None
    assert ckpt.trainer["step"] == 2 and ckpt.trainer["config"]["batch_size"] == 1
    assert [p["step"] for p in ckpt.history] == [1, 2] and "val" in ckpt.history[1]
    assert ckpt.dataset == {"name": "sonnet.txt", "bytes": len(text), "sha256": hashlib.sha256(text).hexdigest()}
    assert ckpt.provenance["producer"] == "tinygpt-node"

    # An anneal as the gallery's: on from that file, keeping the model with the best metric seen.
    wrong = cli("--preset", "small", "--init", "tiny.tinygpt", "--corpus", "sonnet.txt", "--steps", "1", "--out", "x.tinygpt")
    assert wrong.returncode == 2 and "--init tiny.tinygpt is shaped" in wrong.stderr, wrong.stderr
    blind = cli("--preset", "tiny", "--corpus", "sonnet.txt", "--steps", "1", "--eval-every", "0", "--keep-best", "--out", "x.tinygpt")
    assert blind.returncode == 2 and "--keep-best needs evaluations" in blind.stderr, blind.stderr
    run = cli("--preset", "tiny", "--init", "tiny.tinygpt", "--corpus", "sonnet.txt", "--steps", "4", "--batch-size", "1",
              "--lr", "0.05", "--eval-every", "2", "--eval-batches", "1", "--keep-best", "--no-optimizer",
              "--out", "best.tinygpt", "--stats", "best.json", "--levers", "none")
    assert run.returncode == 0, run.stdout + run.stderr
    best = json.loads((tmp_path / "best.json").read_text())["best"]
    kept = checkpoint.load(tmp_path / "best.tinygpt")
    assert best["step"] in (2, 4) and kept.trainer["step"] == 2 + best["step"] and kept.m is None
    assert best["metric"] == pytest.approx(validation_loss(kept.config, kept.params, text), rel=1e-3)
    assert f"holds step {best['step']} of this run, the best validation metric seen" in run.stdout

    # Fine-tuning, as the app's Fine-tune: an adapter on the frozen first file (its f16 weights as decoded).
    bad = cli("--preset", "tiny", "--corpus", "sonnet.txt", "--steps", "1", "--lora", "--out", "x.tinygpt")
    assert bad.returncode == 2 and "name it with --init" in bad.stderr, bad.stderr
    bad = cli("--preset", "tiny", "--init", "tiny.tinygpt", "--corpus", "sonnet.txt", "--steps", "1", "--lora", "--lora-targets", "q,w", "--out", "x.tinygpt")
    assert bad.returncode == 2 and "--lora-targets: no projection w" in bad.stderr, bad.stderr
    run = cli("--preset", "tiny", "--init", "tiny.tinygpt", "--corpus", "sonnet.txt", "--steps", "2", "--batch-size", "1", "--lr", "0.05",
              "--eval-every", "0", "--levers", "none", "--lora", "--lora-rank", "2", "--lora-targets", "v,fc_in", "--val-metric",
              "--out", "adapter.tinygpt", "--stats", "adapter.json")
    assert run.returncode == 0, run.stdout + run.stderr
    adapter = checkpoint.load(tmp_path / "adapter.tinygpt")
    assert adapter.adapter == {"rank": 2, "alpha": FACTS["lora"]["alpha"], "targets": ["v", "fc_in"], "base_sha256": checkpoint.weights_sha256(ckpt)}
    assert adapter.trainer["step"] == 2 and adapter.m is not None
    merged = finetune.adapter_of(ckpt, adapter).merge(ckpt.params)
    assert any(not np.array_equal(merged[n], ckpt.params[n]) for n in ckpt.params), "two steps at lr 0.05 left the model unchanged"
    stats = json.loads((tmp_path / "adapter.json").read_text())
    assert stats["val_metric"] == pytest.approx(validation_loss(ckpt.config, merged, text), rel=1e-3)
    assert stats["adapter_params"] == sum(r * c for _, (r, c) in lora.adapter_specs(ckpt.config, lora.LoraConfig.from_header(adapter.adapter)))
    other = cli("--preset", "tiny", "--init", "best.tinygpt", "--adapter", "adapter.tinygpt", "--corpus", "sonnet.txt", "--steps", "1",
                "--levers", "none", "--out", "x.tinygpt")
    assert other.returncode == 1 and "adapter.tinygpt was trained on another base" in other.stderr and "not on best.tinygpt" in other.stderr, other.stderr


def test_cli_samples_a_gallery_model_as_the_reference_does(tmp_path):
    if NO_DRIVER:
        pytest.skip(f"the CLI samples on WebGPU: {NO_DRIVER}")
    sample = node.build_cli(ROOT, tmp_path / "dist-cli")["sample"]
    path, prompt, _ = conformance.SAMPLE
    n = 40  # past block_size (64) once
    ckpt = checkpoint.load(ROOT / path)
    want = conformance.greedy_sample(ckpt.config, ckpt.params, prompt, n)
    assert want["min_margin"] > 1e-3
    def cli(*args):
        return subprocess.run(["node", str(sample), *args], cwd=tmp_path, env=ENV, capture_output=True, timeout=300)

    bad = cli("--model", str(ROOT / path), "--preset", "tiny")
    assert bad.returncode == 2 and b"give one of --model and --preset" in bad.stderr, bad.stderr
    bad = cli("--model", str(ROOT / path), "--top-p", "1.5")
    assert bad.returncode == 2 and b"--top-p must be in (0, 1]" in bad.stderr, bad.stderr
    run = cli("--model", str(ROOT / path), "--prompt", prompt.decode(), "--tokens", str(n), "--temperature", "0",
              "--levers", "none", "--stats", "stats.json")
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout == bytes(want["tokens"]) + b"\n"
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["path"] == "KV cache" and stats["tokens"] == n and stats["levers"] == []
