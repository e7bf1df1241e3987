"""bench/bench_cpu.py's summary: medians over rounds, and ratios of each round's back-to-back pair."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import bench_cpu  # noqa: E402


def wasm(tps, simd="relaxed", threads=1, preset="small"):
    return {"backend": "wasm", "preset": preset, "threads": threads, "simd": simd, "tokens_per_s": tps, "seconds_per_step": 1 / tps}


def torch(tps, threads=1, preset="small"):
    return {"backend": "torch", "preset": preset, "threads": threads, "tokens_per_s": tps, "seconds_per_step": 1 / tps}


def test_ratios_pair_each_round_so_drift_between_rounds_cancels():
    # The machine runs twice as fast in round 1 and three times in round 2: each pair still says 0.5.
    runs = [(0, wasm(50)), (0, torch(100)), (1, wasm(100)), (1, torch(200)), (2, wasm(150)), (2, torch(300))]
    results, ratios = bench_cpu.summarise(runs)
    assert ratios == [{"preset": "small", "threads": 1, "simd": "relaxed", "wasm_over_torch": 0.5, "rounds": [0.5, 0.5, 0.5]}]
    by_backend = {r["backend"]: r for r in results}
    assert by_backend["wasm"]["tokens_per_s"] == 100 and by_backend["wasm"]["rounds"] == [50, 100, 150]
    assert by_backend["torch"]["tokens_per_s"] == 200


def test_each_build_and_thread_count_is_its_own_case():
    runs = [(0, wasm(60)), (0, wasm(40, simd="plain")), (0, torch(100)),
            (0, wasm(150, threads=2)), (0, torch(200, threads=2)), (0, wasm(999, preset="tiny"))]
    _, ratios = bench_cpu.summarise(runs)
    got = {(r["preset"], r["threads"], r["simd"]): r["wasm_over_torch"] for r in ratios}
    # Tiny has no PyTorch figure here, so no ratio.
    assert got == {("small", 1, "relaxed"): pytest.approx(0.6), ("small", 1, "plain"): pytest.approx(0.4),
                   ("small", 2, "relaxed"): pytest.approx(0.75)}
