"""tessera.ops on PyTorch CPU tensors, the torch.library registration and torch.compile
tracing through it; skipped where PyTorch is not installed."""

import pytest

torch = pytest.importorskip("torch")

from tessera import ops  # noqa: E402


def torch_rms_norm(x, w, eps=1e-6):
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.float16, 4e-3), (torch.bfloat16, 3e-2)])
def test_cpu_tensors_in_and_out(dtype, tol):
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    x = torch.randn(5, 96, generator=g).to(dtype)
    w = torch.randn(96, generator=g).to(dtype)
    out = ops.rms_norm(x, w)
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), torch_rms_norm(x, w), rtol=tol, atol=tol)
    # Strided inputs are read by their strides.
    xt = torch.randn(96, 5, generator=g).to(dtype).t()
    torch.testing.assert_close(ops.rms_norm(xt, w).double(), torch_rms_norm(xt, w), rtol=tol, atol=tol)


def test_every_op_is_a_registered_custom_op():
    import tessera

    for name in tessera.declarations():
        assert hasattr(torch.ops.tessera, name), name


def test_the_custom_op_passes_opcheck():
    opcheck = getattr(torch.library, "opcheck", None)
    if opcheck is None:
        pytest.skip("this PyTorch has no torch.library.opcheck")
    x, w = torch.randn(3, 64), torch.randn(64)
    opcheck(torch.ops.tessera.rms_norm.default, (x, w, None))
    q, k, v = torch.randn(4, 64), torch.randn(2, 9, 64), torch.randn(2, 9, 64)
    opcheck(torch.ops.tessera.sdpa_decode.default, (q, k, v, None))


def test_torch_compile_traces_through_an_op():
    w = torch.randn(64)

    def block(x, gate, up):
        h = ops.silu_mul(gate, up) + x
        return ops.rms_norm(h, w, eps=1e-5) * 2

    x, gate, up = torch.randn(3, 64), torch.randn(3, 64), torch.randn(3, 64)
    want = block(x, gate, up)
    h = torch.nn.functional.silu(gate) * up + x
    torch.testing.assert_close(want.double(), torch_rms_norm(h, w, 1e-5) * 2, rtol=1e-4, atol=1e-4)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, gate, up), want)


def test_errors_reach_python_through_the_custom_op():
    with pytest.raises((ValueError, RuntimeError), match="rms_norm"):
        ops.rms_norm(torch.randn(2, 64), torch.randn(63))
