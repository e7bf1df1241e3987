"""Test oracles: the reference-side code that tests and benchmarks check the product
against, kept out of the product package (tinygpt/). Each regenerating module runs
from the repository root:

    python -m tests.oracles.golden              # rewrites tests/fixtures/golden_tiny.json
    python -m tests.oracles.checkpoint_corpus   # rewrites tests/fixtures/checkpoints/

- golden: the numpy reference's golden 20-step run, which every engine replays;
- conformance: short reference runs on other shapes, written at test time for the
  backend conformance suite (webapp/engine/test/conformance.ts);
- checkpoint_corpus: the good and bad .tinygpt files both readers are tested on;
- gpu: a WGSL kernel runner through wgpu-py (tests/test_kernels.py, bench/bench_matmul.py);
- torch_model: the model in PyTorch's own layers (parity test, benchmark baselines).
"""
