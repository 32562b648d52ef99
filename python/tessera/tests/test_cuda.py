"""tessera.ops on CUDA tensors, in place on PyTorch's current stream: a small decoder
block (RMSNorm → decode attention over a KV cache → RMSNorm) against the same block in
plain PyTorch, eagerly, under torch.compile and replayed from a captured CUDA graph.
Skipped without PyTorch or a GPU."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from tessera import ops  # noqa: E402

HQ, HKV, D, S = 32, 8, 128, 1024


def torch_rms_norm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


class TorchBlock(torch.nn.Module):
    def __init__(self, w1, w2):
        super().__init__()
        self.w1, self.w2 = w1, w2

    def forward(self, x, k, v):
        h = torch_rms_norm(x, self.w1)
        kk = k.repeat_interleave(HQ // HKV, 0).float()
        vv = v.repeat_interleave(HQ // HKV, 0).float()
        p = torch.softmax((kk @ h.float().unsqueeze(-1)).squeeze(-1) / D**0.5, -1)
        a = (p.unsqueeze(1) @ vv).squeeze(1).to(x.dtype)
        return torch_rms_norm(a, self.w2)


class TesseraBlock(TorchBlock):
    def forward(self, x, k, v):
        h = ops.rms_norm(x, self.w1)
        a = ops.sdpa_decode(h, k, v)
        return ops.rms_norm(a, self.w2)


def inputs(dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, device="cuda").to(dtype)
    return r(HQ, D), r(HKV, S, D), r(HKV, S, D), r(D), r(D)


TOL = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 4e-2}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_eager_matches_pytorch(dtype):
    x, k, v, w1, w2 = inputs(dtype, 1)
    want = TorchBlock(w1, w2)(x, k, v)
    got = TesseraBlock(w1, w2)(x, k, v)
    torch.testing.assert_close(got.float(), want.float(), rtol=TOL[dtype], atol=TOL[dtype])


def test_outputs_given_are_written_in_place_without_a_copy():
    x, k, v, w1, _ = inputs(torch.bfloat16, 2)
    out = torch.empty_like(x)
    ptr = out.data_ptr()
    assert ops.rms_norm(x, w1, out=out) is out and out.data_ptr() == ptr
    torch.testing.assert_close(out.float(), torch_rms_norm(x, w1).float(), rtol=4e-2, atol=4e-2)
    with pytest.raises(ValueError, match="contiguous"):
        ops.rms_norm(x, w1, out=torch.empty(D, HQ, device="cuda", dtype=x.dtype).t())


def test_runs_on_the_current_stream():
    x, k, v, w1, w2 = inputs(torch.float16, 3)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = TesseraBlock(w1, w2)(x, k, v)
    torch.cuda.current_stream().wait_stream(side)
    want = TorchBlock(w1, w2)(x, k, v)
    torch.testing.assert_close(got.float(), want.float(), rtol=5e-3, atol=5e-3)


def test_errors_are_exceptions_not_crashes():
    x, k, v, w1, _ = inputs(torch.float16, 4)
    # Through torch.ops.tessera the exception comes back as raised, or as the dispatcher's
    # RuntimeError carrying the op's message.
    with pytest.raises((ValueError, RuntimeError), match="rms_norm"):
        ops.rms_norm(x, w1[:-1])
    with pytest.raises((TypeError, RuntimeError)):
        ops.rms_norm(x, w1.cpu())
    with pytest.raises((ValueError, RuntimeError), match="head_dim"):
        ops.sdpa_decode(x[:, :48].contiguous(), k[..., :48].contiguous(), v[..., :48].contiguous())
    # The context is still usable.
    torch.testing.assert_close(ops.rms_norm(x, w1).float(), torch_rms_norm(x, w1).float(), rtol=5e-3, atol=5e-3)


def test_torch_compile_fullgraph():
    x, k, v, w1, w2 = inputs(torch.bfloat16, 5)
    block = TesseraBlock(w1, w2)
    compiled = torch.compile(block, fullgraph=True)
    want = TorchBlock(w1, w2)(x, k, v)
    torch.testing.assert_close(compiled(x, k, v).float(), want.float(), rtol=4e-2, atol=4e-2)


def test_cuda_graph_capture_and_replay():
    x, k, v, w1, w2 = inputs(torch.bfloat16, 6)
    block = TesseraBlock(w1, w2)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: kernels compiled and loaded before capture
        for _ in range(2):
            block(x, k, v)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = block(x, k, v)
    for seed in (7, 8):
        nx, nk, nv, _, _ = inputs(torch.bfloat16, seed)
        x.copy_(nx), k.copy_(nk), v.copy_(nv)
        graph.replay()
        want = TorchBlock(w1, w2)(x, k, v)
        torch.testing.assert_close(out.float(), want.float(), rtol=4e-2, atol=4e-2)


def test_decode_scratch_kept_between_calls_follows_shapes_and_streams():
    # The split-KV scratch is kept per (op, stream) while the shapes stay the same: calls
    # that change the cache length, move to another stream and come back must each see
    # scratch of their own shape, in their own stream's order.
    side = torch.cuda.Stream()
    for seed, keys, stream in [(11, S, None), (12, 256, None), (13, S, side), (14, S, None), (15, 4 * S, None)]:
        x, _, _, w1, w2 = inputs(torch.bfloat16, seed)
        g = torch.Generator(device="cuda").manual_seed(seed + 100)
        k = torch.randn(HKV, keys, D, generator=g, device="cuda").to(torch.bfloat16)
        v = torch.randn(HKV, keys, D, generator=g, device="cuda").to(torch.bfloat16)
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream or torch.cuda.current_stream()):
            got = TesseraBlock(w1, w2)(x, k, v)
        torch.cuda.current_stream().wait_stream(stream or torch.cuda.current_stream())
        want = TorchBlock(w1, w2)(x, k, v)
        torch.testing.assert_close(got.float(), want.float(), rtol=4e-2, atol=4e-2)


def test_eager_calls_between_graph_replays_do_not_share_the_graphs_scratch():
    x, k, v, w1, w2 = inputs(torch.bfloat16, 21)
    block = TesseraBlock(w1, w2)
    block(x, k, v)  # eager first: its scratch is kept for the current stream
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        block(x, k, v)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = block(x, k, v)
    ex, ek, ev, _, _ = inputs(torch.bfloat16, 22)
    for seed in (23, 24):
        nx, nk, nv, _, _ = inputs(torch.bfloat16, seed)
        x.copy_(nx), k.copy_(nk), v.copy_(nv)
        graph.replay()
        eager = block(ex, ek, ev)
        torch.testing.assert_close(out.float(), TorchBlock(w1, w2)(x, k, v).float(), rtol=4e-2, atol=4e-2)
        torch.testing.assert_close(eager.float(), TorchBlock(w1, w2)(ex, ek, ev).float(), rtol=4e-2, atol=4e-2)


def test_calls_that_skip_the_dispatcher_match_those_through_it():
    # Plain tensors, no gradient: the call goes straight to the native module; a weight
    # that needs a gradient (or a parameter given with another type) goes through
    # torch.ops.tessera. Both give the same numbers.
    x, _, _, w, _ = inputs(torch.float32, 31)
    want = torch_rms_norm(x, w, 1e-3)
    direct = ops.rms_norm(x, w, eps=1e-3)
    through = ops.rms_norm(x, torch.nn.Parameter(w.clone()), eps=1e-3)
    torch.testing.assert_close(direct, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(through.detach(), want, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        torch.testing.assert_close(ops.rms_norm(x, torch.nn.Parameter(w.clone()), eps=1e-3), want, rtol=1e-4, atol=1e-4)
