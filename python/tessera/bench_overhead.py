"""Per-call cost of tessera.ops from Python on CUDA: the wall time of an eager call
(Python, argument checks, launch) against the kernel's own time (the same calls replayed
from a CUDA graph), for RMSNorm and decode attention at decode shapes, through the
generated function, through the eager path's native call alone (the op's ``EagerOp``
handle called with its arguments flat, which reads the tensors itself) and through the general path's native call with descriptors
prepared once (``invoke_cuda``).

    python python/tessera/bench_overhead.py [--calls 2000]
"""

import argparse
import time

import torch

import tessera
from tessera import _tessera, ops


def wall_us(fn, calls):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def graph_us(fn, calls):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def native(op, ins, out, params=()):
    """The native call alone: descriptors prepared once, as an engine's binding would."""
    desc = lambda n, t, dt: (n, t.data_ptr(), dt, list(t.shape), list(t.stride()))
    ins = [desc(n, t, dt) for n, t, dt in ins]
    outs = [desc(*out)]
    stream = torch.cuda.current_stream().cuda_stream
    dev = torch.cuda.current_device()
    return lambda: _tessera.invoke_cuda(op, dev, stream, ins, outs, list(params))


def eager_native(op, inputs, out):
    """The eager path's native call alone, as the generated function makes it: the op's
    handle called with the arguments flat, inputs in the function's order (required, then
    optional), parameters at their defaults, the output given."""
    decl = tessera.declarations()[op]
    order = [t["name"] for t in sorted(decl["inputs"], key=lambda t: t["optional"])]
    handle = _tessera.EagerOp(op, order)
    flat = tuple(inputs.get(n) for n in order) + (None,) * len(decl["params"]) + (out,)
    call = lambda: handle(*flat)  # noqa: E731
    if call() is None:
        raise SystemExit(f"{op}: the eager path declined the call (see tessera/_dispatch.py)")
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    bf = torch.bfloat16
    x, w = torch.randn(1, 4096, device="cuda", dtype=bf), torch.randn(4096, device="cuda", dtype=bf)
    q = torch.randn(32, 128, device="cuda", dtype=bf)
    k = torch.randn(8, 4096, 128, device="cuda", dtype=bf)
    v = torch.randn(8, 4096, 128, device="cuda", dtype=bf)
    out_n, out_a = torch.empty_like(x), torch.empty_like(q)
    cases = [
        ("rms_norm [1, 4096] bf16", lambda: ops.rms_norm(x, w, out=out_n),
         lambda: ops.rms_norm(x, w),
         eager_native("rms_norm", {"x": x, "w": w}, out_n),
         native("rms_norm", [("x", x, "bf16"), ("w", w, "bf16")], ("out", out_n, "bf16"))),
        ("sdpa_decode 32/8 heads, 4096 keys, d128 bf16", lambda: ops.sdpa_decode(q, k, v, out=out_a),
         lambda: ops.sdpa_decode(q, k, v),
         eager_native("sdpa_decode", {"q": q, "k": k, "v": v}, out_a),
         native("sdpa_decode", [("q", q, "bf16"), ("k", k, "bf16"), ("v", v, "bf16")], ("out", out_a, "bf16"))),
    ]
    print(f"tessera {tessera.__version__} on {torch.cuda.get_device_name()}, {args.calls} calls each")
    print(f"{'op':48} {'kernel':>8} {'eager out=':>11} {'eager alloc':>12} {'op handle':>11} {'invoke_cuda':>12}  (µs per call)")
    for name, with_out, alloc, eager, raw in cases:
        kernel = graph_us(with_out, min(args.calls, 500))
        print(f"{name:48} {kernel:8.2f} {wall_us(with_out, args.calls):11.2f} "
              f"{wall_us(alloc, args.calls):12.2f} {wall_us(eager, args.calls):11.2f} {wall_us(raw, args.calls):12.2f}")
    # PyTorch's own eager ops on the same host, for scale: what a call of theirs costs here.
    y = torch.empty_like(x)
    peers = [
        ("torch.add(x, x, out=y)", lambda: torch.add(x, x, out=y)),
        ("F.rms_norm(x, (4096,), w)", lambda: torch.nn.functional.rms_norm(x, (4096,), w)),
    ]
    for name, fn in peers:
        print(f"{name:48} {graph_us(fn, min(args.calls, 500)):8.2f} {wall_us(fn, args.calls):11.2f}  (peer: kernel, eager)")
    print("added per call = eager − kernel where the launches do not overlap the Python work")


if __name__ == "__main__":
    main()
