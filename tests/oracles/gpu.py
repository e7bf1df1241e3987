"""A narrow wgpu-py runner for the shader modules, used by the kernel tests and benches.

One adapter and device per process; modules composed as the build and the bundle compose them
(tinygpt/site_build/wgsl.py), pipelines built once per (module, entry point, override constants).
`run` takes numpy arrays for the storage bindings and the uniform params (binding 0) by name,
packed in the order facts.json's wgsl.params gives (the engine's own table), dispatches, and
reads back the bindings asked for.
"""
import statistics
import struct
import time
from functools import cache
from pathlib import Path

import numpy as np
import wgpu

from tinygpt.facts import FACTS
from tinygpt.site_build import wgsl

ROOT = Path(__file__).resolve().parents[2]
STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


@cache
def adapter():
    found = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if found is None:
        raise RuntimeError("no WebGPU adapter found (install a Vulkan driver, e.g. mesa-vulkan-drivers)")
    return found


@cache
def device():
    """The device, with the adapter's own buffer-size limits (4096^3 benches need > 128 MiB),
    timestamp queries and shader-f16 (the shader-f16 lever's modules) where offered; every other
    limit stays at the WebGPU default so a kernel that runs here also runs in a browser."""
    a = adapter()
    limits = {k: a.limits[k] for k in ("max-buffer-size", "max-storage-buffer-binding-size")}
    features = [f for f in ("timestamp-query", "shader-f16") if f in a.features]
    return a.request_device_sync(required_features=features, required_limits=limits)


def describe() -> str:
    info = adapter().info
    return f"{info['device']} ({info['backend_type']}, {info['description']})".strip()


@cache
def module(shader):
    """shader: a module name ("matmul"), or a Path to a self-contained .wgsl elsewhere (bench variants)."""
    if isinstance(shader, Path):
        label, code = str(shader), shader.read_text()
    else:
        label, code = f"shaders/{shader}.wgsl", wgsl.compose(ROOT, shader).text
    try:
        return device().create_shader_module(label=label, code=code)
    except wgpu.GPUValidationError as e:
        raise ValueError(f"{label}: WGSL does not compile:\n{e}") from None


@cache
def pipeline(shader, entry: str, constants: tuple = ()):
    """constants: the pipeline-override constants as sorted (name, value) pairs."""
    stage = {"module": module(shader), "entry_point": entry, "constants": dict(constants)}
    return device().create_compute_pipeline(layout="auto", compute=stage)


def pack_params(shader, params: dict) -> bytes:
    """The uniform Params of a module, by name, in its facts.json order (u32, or f32 where the
    field says ":f32"); a Path shader's in the order of its own struct Params."""
    if isinstance(shader, Path):
        fields = [field for field, _ in wgsl.struct_params(shader.read_text())[1]]
    else:
        fields = FACTS["wgsl"]["params"][wgsl.params_row(shader)]  # a lever's variant packs its plain module's
    names = [f.split(":")[0] for f in fields]
    if sorted(params) != sorted(names):
        raise KeyError(f"{shader} params are {names}, got {sorted(params)}")
    words = []
    for field in fields:
        name, _, kind = field.partition(":")
        value = params[name]
        if kind == "f32":
            words.append(struct.pack("<f", float(value)))
        elif isinstance(value, (bool, np.bool_)) or not 0 <= value < 2**32 or value != int(value):
            raise ValueError(f"param {name}={value!r} is no u32")
        else:
            words.append(struct.pack("<I", int(value)))
    data = b"".join(words) or b"\0" * 4
    return data + b"\0" * (-len(data) % 16)


def upload(array: np.ndarray):
    data = np.ascontiguousarray(array)
    if data.dtype not in (np.float32, np.uint32):
        raise TypeError(f"storage arrays must be float32 or uint32, got {data.dtype}")
    return device().create_buffer_with_data(data=data.tobytes() if data.size else b"\0" * 4, usage=STORAGE)


def uniform(shader, params: dict):
    return device().create_buffer_with_data(data=pack_params(shader, params), usage=wgpu.BufferUsage.UNIFORM)


def bind_group(shader, entry: str, buffers: dict, constants: tuple = ()):
    """buffers: binding index -> GPUBuffer (binding 0 being the params uniform)."""
    entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in sorted(buffers.items())]
    layout = pipeline(shader, entry, constants).get_bind_group_layout(0)
    return device().create_bind_group(layout=layout, entries=entries)


def dispatch(encoder, shader, entry: str, group, workgroups, constants: tuple = ()):
    pass_ = encoder.begin_compute_pass()
    pass_.set_pipeline(pipeline(shader, entry, constants))
    pass_.set_bind_group(0, group)
    pass_.dispatch_workgroups(*workgroups)
    pass_.end()


def read(buffer, dtype=np.float32) -> np.ndarray:
    return np.frombuffer(device().queue.read_buffer(buffer), dtype=dtype).copy()


def run(shader, entry: str, params: dict, arrays: dict, workgroups, out=(), constants: dict | None = None) -> dict:
    """Run one entry point once. arrays: binding -> numpy array (read_write bindings start
    with the array's contents); returns binding -> flat array for each binding in `out`.
    constants: pipeline-override constants (a matmul's BLOCK)."""
    consts = tuple(sorted((constants or {}).items()))
    buffers = {0: uniform(shader, params)} | {i: upload(a) for i, a in arrays.items()}
    encoder = device().create_command_encoder()
    dispatch(encoder, shader, entry, bind_group(shader, entry, buffers, consts), workgroups, consts)
    device().queue.submit([encoder.finish()])
    return {i: read(buffers[i], np.asarray(arrays[i]).dtype)[: np.asarray(arrays[i]).size] for i in out}


def seconds_per_dispatch(shader, entry: str, buffers: dict, workgroups, passes=5, min_pass_s=0.05,
                         constants: dict | None = None) -> float:
    """Median GPU seconds of one dispatch, from passes of back-to-back dispatches (GPU timestamps
    around each pass where the device has them, else wall clock to queue completion)."""
    dev = device()
    consts = tuple(sorted((constants or {}).items()))
    group = bind_group(shader, entry, buffers, consts)
    stamps = "timestamp-query" in dev.features
    if stamps:
        queries = dev.create_query_set(type="timestamp", count=2)
        resolved = dev.create_buffer(size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)

    def one_pass(reps):
        encoder = dev.create_command_encoder()
        writes = {"query_set": queries, "beginning_of_pass_write_index": 0, "end_of_pass_write_index": 1} if stamps else None
        cpass = encoder.begin_compute_pass(timestamp_writes=writes)
        cpass.set_pipeline(pipeline(shader, entry, consts))
        cpass.set_bind_group(0, group)
        for _ in range(reps):
            cpass.dispatch_workgroups(*workgroups)
        cpass.end()
        if stamps:
            encoder.resolve_query_set(queries, 0, 2, resolved, 0)
        start = time.perf_counter()
        dev.queue.submit([encoder.finish()])
        if stamps:
            t0, t1 = np.frombuffer(dev.queue.read_buffer(resolved), np.uint64)
            return (int(t1) - int(t0)) * 1e-9 / reps
        dev.queue.on_submitted_work_done_sync()
        return (time.perf_counter() - start) / reps

    one_pass(2)  # warm-up: pipeline creation, first touch of the buffers
    reps = max(3, min(1000, int(min_pass_s / max(one_pass(3), 1e-7))))
    return statistics.median(one_pass(reps) for _ in range(passes))


def groups_1d(n: int, per_group: int = 256) -> tuple[int, int, int]:
    """Workgroup grid for the kernels that index linearly: x up to 65535, y for the rest."""
    total = max(1, -(-n // per_group))
    x = min(total, 65535)
    return (x, -(-total // x), 1)
