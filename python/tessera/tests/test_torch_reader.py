"""The eager path's reading of PyTorch tensors (one DLPack description per tensor:
address, device, dtype, shape, contiguity) against what PyTorch itself says, on CPU
tensors (the reader does not depend on the device), and the path declining what is not
a CUDA tensor so the general path still takes it. Skipped without PyTorch."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tessera import _tessera, ops  # noqa: E402
from tessera._dispatch import EAGER_COMPILING  # noqa: E402

if EAGER_COMPILING is None:
    pytest.skip("this PyTorch lacks what the eager path calls", allow_module_level=True)

NAMES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int32: "i32",
    torch.uint8: "u8",
    torch.int8: "i8",
    torch.bool: "bool",
}


def described(x):
    address, device, dtype, shape, contiguous = _tessera.describe_tensor(x)
    assert device is None  # a CPU tensor is not CUDA memory
    return address, dtype, shape, contiguous


@pytest.mark.parametrize("dtype", list(NAMES))
def test_reads_address_dtype_and_shape(dtype):
    x = torch.zeros(3, 5, 7, dtype=dtype)
    assert described(x) == (x.data_ptr(), NAMES[dtype], [3, 5, 7], True)


def test_more_dimensions_than_the_path_takes_read_as_none():
    # Shapes are held inline up to 8 dimensions; a tensor of more takes the general path.
    assert described(torch.zeros((2,) * 8))[2] == [2] * 8
    assert _tessera.describe_tensor(torch.zeros((1,) * 9)) is None


def test_a_dtype_tessera_does_not_run_reads_as_none():
    assert described(torch.zeros(4, dtype=torch.float64))[1] is None
    assert described(torch.zeros(4, dtype=torch.int64))[1] is None


def test_views_read_their_offset_and_their_strides():
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    base = torch.randn(6, 8, generator=g)
    for view, contiguous in [
        (base[2:], True),  # an offset into the storage
        (base[:, 3:], False),  # rows no longer adjacent
        (base.t(), False),
        (base[1:2], True),  # one row: its stride does not matter
        (base.unsqueeze(1), True),  # a size-1 dimension of any stride
        (base[:, ::2], False),
        (base.view(48)[5:13].view(2, 4), True),
    ]:
        address, _, shape, got = described(view)
        assert address == view.data_ptr()
        assert shape == list(view.shape)
        assert got == contiguous == view.is_contiguous(), (view.shape, view.stride())


def test_empty_and_zero_dimensional_tensors():
    assert described(torch.zeros(0, 4))[2:] == ([0, 4], True)
    x = torch.tensor(2.5)
    assert described(x) == (x.data_ptr(), "f32", [], True)


def test_the_path_declines_cpu_tensors_numpy_and_other_values():
    op = _tessera.EagerOp("rms_norm", ["x", "w"])
    x, w = torch.randn(2, 64), torch.randn(64)
    assert _tessera.call_torch(op, (x, w), (None,), (None,)) is None
    assert _tessera.call_torch(op, (x.numpy(), w.numpy()), (None,), (None,)) is None
    assert _tessera.call_torch(op, ([1.0], w), (None,), (None,)) is None
    # ...and the general path still runs them.
    out = ops.rms_norm(x, w, eps=1e-3)
    ref = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-3) * w.double()
    torch.testing.assert_close(out.double(), ref, rtol=2e-5, atol=2e-5)
    assert isinstance(ops.rms_norm(x.numpy(), w.numpy()), np.ndarray)


def test_an_eager_op_names_the_ops_inputs():
    with pytest.raises(ValueError, match="no input `y`"):
        _tessera.EagerOp("rms_norm", ["x", "y"])
    with pytest.raises(ValueError, match="takes 2 inputs"):
        _tessera.EagerOp("rms_norm", ["x"])
    with pytest.raises(ValueError, match="no op"):
        _tessera.EagerOp("no_such_op", [])
