"""A narrow wgpu-py runner for shaders/*.wgsl, used by the kernel tests and benches.

One adapter and device per process; pipelines built once per (file, entry point).
`run` takes numpy arrays for the storage bindings and a tuple for the uniform
params (binding 0), dispatches, and reads back the bindings asked for.
"""
import statistics
import struct
import time
from functools import cache
from pathlib import Path

import numpy as np
import wgpu

SHADERS = Path(__file__).resolve().parent.parent / "shaders"
STORAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


@cache
def adapter():
    found = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if found is None:
        raise RuntimeError("no WebGPU adapter found (install a Vulkan driver, e.g. mesa-vulkan-drivers)")
    return found


@cache
def device():
    """The device, with the adapter's own buffer-size limits (4096^3 benches need > 128 MiB)
    and timestamp queries where offered; every other limit stays at the WebGPU default
    so a kernel that runs here also runs in a browser."""
    a = adapter()
    limits = {k: a.limits[k] for k in ("max-buffer-size", "max-storage-buffer-binding-size")}
    features = [f for f in ("timestamp-query",) if f in a.features]
    return a.request_device_sync(required_features=features, required_limits=limits)


def describe() -> str:
    info = adapter().info
    return f"{info['device']} ({info['backend_type']}, {info['description']})".strip()


@cache
def module(shader):
    """shader: a name in shaders/ ("matmul"), or a Path to a .wgsl elsewhere (bench variants)."""
    path = shader if isinstance(shader, Path) else SHADERS / f"{shader}.wgsl"
    try:
        return device().create_shader_module(label=str(path), code=path.read_text())
    except wgpu.GPUValidationError as e:
        raise ValueError(f"{path}: WGSL does not compile:\n{e}") from None


@cache
def pipeline(shader, entry: str):
    return device().create_compute_pipeline(layout="auto", compute={"module": module(shader), "entry_point": entry})


def pack_params(params) -> bytes:
    """Params structs hold only 4-byte scalars: Python int -> u32, float -> f32, in order."""
    words = []
    for value in params:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError("pass flags as int, not bool")
        if isinstance(value, (int, np.integer)):
            if not 0 <= value < 2**32:
                raise ValueError(f"param {value} does not fit a u32")
            words.append(struct.pack("<I", int(value)))
        else:
            words.append(struct.pack("<f", float(value)))
    data = b"".join(words) or b"\0" * 4
    return data + b"\0" * (-len(data) % 16)


def upload(array: np.ndarray):
    data = np.ascontiguousarray(array)
    if data.dtype not in (np.float32, np.uint32):
        raise TypeError(f"storage arrays must be float32 or uint32, got {data.dtype}")
    return device().create_buffer_with_data(data=data.tobytes() if data.size else b"\0" * 4, usage=STORAGE)


def uniform(params):
    return device().create_buffer_with_data(data=pack_params(params), usage=wgpu.BufferUsage.UNIFORM)


def bind_group(shader, entry: str, buffers: dict):
    """buffers: binding index -> GPUBuffer (binding 0 being the params uniform)."""
    entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in sorted(buffers.items())]
    return device().create_bind_group(layout=pipeline(shader, entry).get_bind_group_layout(0), entries=entries)


def dispatch(encoder, shader, entry: str, group, workgroups):
    pass_ = encoder.begin_compute_pass()
    pass_.set_pipeline(pipeline(shader, entry))
    pass_.set_bind_group(0, group)
    pass_.dispatch_workgroups(*workgroups)
    pass_.end()


def read(buffer, dtype=np.float32) -> np.ndarray:
    return np.frombuffer(device().queue.read_buffer(buffer), dtype=dtype).copy()


def run(shader, entry: str, params, arrays: dict, workgroups, out=()) -> dict:
    """Run one entry point once. arrays: binding -> numpy array (read_write bindings start
    with the array's contents); returns binding -> flat array for each binding in `out`."""
    buffers = {0: uniform(params)} | {i: upload(a) for i, a in arrays.items()}
    encoder = device().create_command_encoder()
    dispatch(encoder, shader, entry, bind_group(shader, entry, buffers), workgroups)
    device().queue.submit([encoder.finish()])
    return {i: read(buffers[i], np.asarray(arrays[i]).dtype)[: np.asarray(arrays[i]).size] for i in out}


def seconds_per_dispatch(shader, entry: str, buffers: dict, workgroups, passes=5, min_pass_s=0.05) -> float:
    """Median GPU seconds of one dispatch, from passes of back-to-back dispatches (GPU timestamps
    around each pass where the device has them, else wall clock to queue completion)."""
    dev = device()
    group = bind_group(shader, entry, buffers)
    stamps = "timestamp-query" in dev.features
    if stamps:
        queries = dev.create_query_set(type="timestamp", count=2)
        resolved = dev.create_buffer(size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)

    def one_pass(reps):
        encoder = dev.create_command_encoder()
        writes = {"query_set": queries, "beginning_of_pass_write_index": 0, "end_of_pass_write_index": 1} if stamps else None
        cpass = encoder.begin_compute_pass(timestamp_writes=writes)
        cpass.set_pipeline(pipeline(shader, entry))
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
