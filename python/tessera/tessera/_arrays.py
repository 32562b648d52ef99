"""Arrays and tensors in and out of the native module: Tessera's dtype names for NumPy and
PyTorch dtypes, host bytes for the CPU backend, and data-pointer descriptors for CUDA."""

import numpy as np

try:
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bf16 NumPy arrays need ml_dtypes; everything else works without it
    _BF16 = None

try:
    import torch
except ImportError:
    torch = None

_NUMPY = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.int32): "i32",
    np.dtype(np.uint8): "u8",
    np.dtype(np.int8): "i8",
    np.dtype(np.bool_): "bool",
}
if _BF16 is not None:
    _NUMPY[_BF16] = "bf16"
_NUMPY_OF = {v: k for k, v in _NUMPY.items()}

_INT_RANGE = {"u32": (0, 2**32 - 1), "i32": (-(2**31), 2**31 - 1), "u8": (0, 255), "i8": (-128, 127)}


def is_torch(x):
    return torch is not None and isinstance(x, torch.Tensor)


def numpy_dtype(name):
    """The NumPy dtype of a Tessera dtype name."""
    if name not in _NUMPY_OF:
        raise TypeError(f"a {name} array needs the ml_dtypes package (pip install ml_dtypes)")
    return _NUMPY_OF[name]


def _declared_ints(decl):
    """The integer dtypes a declared tensor takes, if its rule lists them."""
    names = decl["dtype"].get("one_of") or []
    return [n for n in names if n in _INT_RANGE]


def numpy_input(op, decl, x):
    """An input as a C-contiguous NumPy array of a Tessera dtype: integers of another
    width narrow to the declared integer dtype when their values fit (as ``tessera
    run`` does); other dtypes are refused."""
    a = np.ascontiguousarray(x)
    name = _NUMPY.get(a.dtype)
    wanted = _declared_ints(decl)
    if a.dtype.kind in "iu" and wanted and name not in wanted:
        lo, hi = _INT_RANGE[wanted[0]]
        if a.size and (int(a.min()) < lo or int(a.max()) > hi):
            raise ValueError(
                f"{op}: input `{decl['name']}` has values in {a.min()}..={a.max()}, "
                f"outside the {wanted[0]} the op takes"
            )
        return np.ascontiguousarray(a.astype(numpy_dtype(wanted[0])))
    if name is None:
        raise TypeError(
            f"{op}: input `{decl['name']}` has dtype {a.dtype}, which Tessera does not run; "
            f"it takes {decl['dtype']['text']}"
        )
    return a


def tessera_dtype_of_torch(t, decl=None):
    """Tessera's name for a torch dtype: int32 reads as u32 where the declaration takes
    u32 and not i32 (PyTorch's usual integer type, the same bits for values below 2³¹)."""
    d = t.dtype
    name = _TORCH_NAMES.get(d)
    if name == "i32" and decl is not None:
        ints = _declared_ints(decl)
        if ints and "i32" not in ints and "u32" in ints:
            name = "u32"
    if name is None:
        what = f"input `{decl['name']}`" if decl else "a tensor"
        raise TypeError(
            f"{what} has dtype {d}, which Tessera does not run"
            + (f"; it takes {decl['dtype']['text']}" if decl else "")
        )
    return name


def _torch_names():
    """Tessera's name of each torch dtype it runs, made once (a lookup per call)."""
    if torch is None:
        return {}
    table = {
        torch.float32: "f32",
        torch.float16: "f16",
        torch.bfloat16: "bf16",
        torch.int32: "i32",
        torch.uint8: "u8",
        torch.int8: "i8",
        torch.bool: "bool",
    }
    if getattr(torch, "uint32", None) is not None:
        table[torch.uint32] = "u32"
    return table


_TORCH_NAMES = _torch_names()


def torch_dtype(name):
    """The torch dtype an output of Tessera dtype `name` is allocated as (u32 as int32)."""
    return {
        "f32": torch.float32,
        "f16": torch.float16,
        "bf16": torch.bfloat16,
        "u32": torch.int32,
        "i32": torch.int32,
        "u8": torch.uint8,
        "i8": torch.int8,
        "bool": torch.bool,
    }[name]


def torch_host_bytes(t):
    """A CPU tensor's row-major bytes, whatever its strides."""
    flat = t.detach().contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy().tobytes()


def torch_from_bytes(data, name, shape):
    """A CPU tensor of Tessera dtype `name` holding `data`."""
    dtype = torch_dtype(name)
    if len(data) == 0:
        return torch.zeros(shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)
