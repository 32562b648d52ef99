"""The eager path of tessera.ops on CUDA tensors (one native call that reads the tensors
itself): repeated calls that change shapes, dtypes, strides, parameters and outputs are
each checked and right, a bad call after good ones still raises and leaves the next call
right, and calls it declines (a view, a tensor that needs a gradient) take the general
path. Skipped without PyTorch or a GPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from tessera import _tessera, ops  # noqa: E402
from tessera._dispatch import EAGER_COMPILING  # noqa: E402

import references as ref  # noqa: E402

TOL = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 4e-2}


def rand(g, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g, device="cuda").to(dtype)


def close(got, want, dtype):
    torch.testing.assert_close(got.double().cpu(), torch.as_tensor(want), rtol=TOL[dtype], atol=TOL[dtype])


def rms(x, w, eps=1e-6):
    return ref.rms_norm(x.double().cpu().numpy(), w.double().cpu().numpy(), eps)


@pytest.fixture
def g():
    seed = int(np.random.SeedSequence().entropy % 2**31)
    print(f"seed {seed}")
    return torch.Generator(device="cuda").manual_seed(seed)


def test_the_native_path_takes_plain_cuda_calls(g):
    if EAGER_COMPILING is None:
        pytest.skip("this PyTorch lacks what the eager path calls")
    op = _tessera.EagerOp("rms_norm", ["x", "w"])
    x, w = rand(g, 4, 256), rand(g, 256)
    out = torch.empty_like(x)
    assert _tessera.call_torch(op, (x, w), (None,), (out,)) is out
    made = _tessera.call_torch(op, (x, w), (None,), (None,))
    assert made is not None and made.shape == x.shape and made.device == x.device
    close(out, rms(x, w), torch.float32)
    close(made, rms(x, w), torch.float32)


def test_repeated_calls_follow_shapes_dtypes_parameters_and_outputs(g):
    calls = [
        ((4, 4096), torch.bfloat16, None),
        ((4, 4096), torch.bfloat16, 1e-3),
        ((1, 4096), torch.bfloat16, 1e-3),
        ((3, 5, 128), torch.float16, None),
        ((3, 5, 128), torch.float32, 0.5),
        ((7, 96), torch.float32, None),
        ((4, 4096), torch.bfloat16, None),
    ]
    for shape, dtype, eps in calls:
        for _ in range(2):
            x, w = rand(g, *shape, dtype=dtype), rand(g, shape[-1], dtype=dtype)
            kw = {} if eps is None else {"eps": eps}
            out = torch.empty_like(x)
            assert ops.rms_norm(x, w, out=out, **kw) is out
            close(out, rms(x, w, 1e-6 if eps is None else eps), dtype)
            made = ops.rms_norm(x, w, **kw)
            assert made.dtype == dtype and made.shape == x.shape
            close(made, rms(x, w, 1e-6 if eps is None else eps), dtype)


def test_a_bad_call_after_good_ones_still_raises_and_changes_nothing(g):
    x, w = rand(g, 4, 512, dtype=torch.float16), rand(g, 512, dtype=torch.float16)
    out = torch.empty_like(x)
    for _ in range(3):
        ops.rms_norm(x, w, out=out)
    keep = out.clone()
    bad = [
        (ValueError, "shape", lambda: ops.rms_norm(x, w[:-8], out=out)),
        (ValueError, "aliases", lambda: ops.rms_norm(x, w, out=x)),
        (ValueError, "eps", lambda: ops.rms_norm(x, w, eps=-1.0, out=out)),
        (ValueError, "eps", lambda: ops.rms_norm(x, w, eps=float("nan"), out=out)),
        (ValueError, "must be", lambda: ops.rms_norm(x, w.float(), out=out)),
        (ValueError, "must be", lambda: ops.rms_norm(x, w, out=out.float())),
        (ValueError, "shape", lambda: ops.rms_norm(x, w, out=out[:2])),
        (ValueError, "contiguous", lambda: ops.rms_norm(x, w, out=torch.empty(512, 4, device="cuda", dtype=x.dtype).t())),
        (ValueError, "no parameter|expected", lambda: ops.rms_norm(x, w, eps="small", out=out)),
    ]
    for error, match, call in bad:
        with pytest.raises((error, RuntimeError), match=match):
            call()
        torch.cuda.synchronize()
        assert torch.equal(out, keep)
    close(ops.rms_norm(x, w, out=out), rms(x, w), torch.float16)


def test_a_repeat_of_the_same_tensors_still_checks_what_changed(g):
    """The eager path keeps the last call's borrowed tensors for a call of the same
    addresses, dtypes, shapes, device and stream; a call that changes any of them (the same
    Python objects changed in place, or other views of the same memory) is bound and
    checked again, and parameters are read on every call."""
    x, w = rand(g, 4, 512), rand(g, 512)
    out = torch.empty_like(x)
    for _ in range(3):
        assert ops.rms_norm(x, w, out=out) is out
    close(out, rms(x, w), torch.float32)
    close(ops.rms_norm(x, w, eps=0.5, out=out), rms(x, w, 0.5), torch.float32)
    keep = out.clone()
    bad = [
        (ValueError, "eps", lambda: ops.rms_norm(x, w, eps=-1.0, out=out)),
        (ValueError, "shape", lambda: ops.rms_norm(x, w[:256], out=out)),
        (ValueError, "shape", lambda: ops.rms_norm(x, w, out=out[:2])),
        (ValueError, "must be", lambda: ops.rms_norm(x, w, out=out.view(torch.int32))),
        (ValueError, "aliases", lambda: ops.rms_norm(x, w, out=x)),
    ]
    for error, match, call in bad:
        ops.rms_norm(x, w, eps=0.5, out=out)
        with pytest.raises((error, RuntimeError), match=match):
            call()
        torch.cuda.synchronize()
        assert torch.equal(out, keep)
    # The same objects, their shape changed in place (same address): checked again.
    out.resize_(2, 512)
    with pytest.raises((ValueError, RuntimeError), match="shape"):
        ops.rms_norm(x, w, out=out)
    out.resize_(4, 512)
    torch.cuda.synchronize()
    assert torch.equal(out, keep)
    x2 = rand(g, 4, 512)
    x.copy_(x2)
    close(ops.rms_norm(x, w, out=out), rms(x2, w), torch.float32)


def test_the_op_handle_takes_its_arguments_flat(g):
    if EAGER_COMPILING is None:
        pytest.skip("this PyTorch lacks what the eager path calls")
    op = _tessera.EagerOp("rms_norm", ["x", "w"])
    x, w = rand(g, 3, 256), rand(g, 256)
    out = torch.empty_like(x)
    assert op(x, w, None, out) is out
    close(out, rms(x, w), torch.float32)
    with pytest.raises(ValueError, match="takes 4 arguments"):
        op(x, w, out)


def test_strided_and_offset_inputs_are_read_right(g):
    base = rand(g, 8, 256 + 8)
    w = rand(g, 256)
    for x in (base[:, :256], base[:, 8:], base[2:6, 4:260], base.t().contiguous().t()[:, :256]):
        out = ops.rms_norm(x, w)
        close(out, rms(x, w), torch.float32)


def test_several_outputs_given_made_or_mixed(g):
    x, r, w = rand(g, 3, 1024, dtype=torch.bfloat16), rand(g, 3, 1024, dtype=torch.bfloat16), rand(g, 1024, dtype=torch.bfloat16)
    s64 = x.double() + r.double()
    want_sum = s64.to(torch.bfloat16)
    want_out = rms(want_sum, w)
    s, o = ops.rms_norm_residual(x, r, w)
    close(s, want_sum.double().cpu(), torch.bfloat16)
    close(o, want_out, torch.bfloat16)
    s2, o2 = torch.empty_like(x), torch.empty_like(x)
    got = ops.rms_norm_residual(x, r, w, sum=s2, out=o2)
    assert got[0] is s2 and got[1] is o2
    close(s2, want_sum.double().cpu(), torch.bfloat16)
    close(o2, want_out, torch.bfloat16)
    s3 = torch.empty_like(x)
    got_s, got_o = ops.rms_norm_residual(x, r, w, sum=s3)
    assert got_s is s3
    close(got_o, want_out, torch.bfloat16)


def test_int32_positions_read_as_the_declared_u32(g):
    tokens, heads, d = 5, 2, 64
    x = rand(g, tokens, heads, d)
    positions = torch.randint(0, 4096, (tokens,), generator=g, device="cuda", dtype=torch.int32)
    for _ in range(2):
        out = ops.rope(x, positions, theta=10000.0)
        close(out, ref.rope_neox(x.double().cpu().numpy(), positions.cpu().numpy(), 10000.0), torch.float32)


def test_calls_it_declines_take_the_general_path(g):
    x, w = rand(g, 2, 128), rand(g, 128)
    want = rms(x, w)
    close(ops.rms_norm(x, torch.nn.Parameter(w.clone())).detach(), want, torch.float32)
    close(ops.rms_norm(x.cpu(), w.cpu()), want, torch.float32)
    with pytest.raises((TypeError, RuntimeError)):
        ops.rms_norm(x, w.cpu())
    with pytest.raises((TypeError, RuntimeError)):
        ops.rms_norm(x.double(), w.double())
