"""One call of a declared op from Python: NumPy arrays and CPU tensors through the CPU
backend (copied in, outputs copied out or written back into the arrays given), CUDA
tensors in place on PyTorch's current stream (outputs not given are allocated with
PyTorch, so its caching allocator and graph pools own them). With PyTorch installed, a
call on tensors with no output given goes through the ``torch.library`` op, so
``torch.compile`` sees it. Plain eager calls on CUDA tensors usually never reach this
module: the generated functions first offer them to the native eager path
(``_tessera.call_torch``, enabled below), and only what it declines comes here."""

import numpy as np

from . import _tessera
from ._arrays import (
    _NUMPY,
    is_torch,
    numpy_dtype,
    numpy_input,
    tessera_dtype_of_torch,
    torch,
    torch_dtype,
    torch_from_bytes,
    torch_host_bytes,
)
from ._decl import _DECLS, Default, given_params, params_text

# op name -> the torch.ops.tessera callable, filled by _torch_ops when PyTorch imports.
TORCH_OPS = {}


def call(op, inputs, params, outputs):
    """Runs `op` on `inputs` ({name: array or None}) with `params` ({name: value or
    None}); `outputs` ({name: array or None}) are written in place where given. Returns
    the outputs in declaration order (one alone, else a tuple)."""
    # Plain loops: torch.compile traces this function on its way to the custom op.
    given_out = {}
    for k, v in outputs.items():
        if v is not None:
            given_out[k] = v
    all_torch = op in TORCH_OPS
    for v in inputs.values():
        if v is not None and not is_torch(v):
            all_torch = False
    if all_torch and not given_out and not _plain_eager(op, inputs, params):
        kwargs = dict(inputs)
        kwargs.update(given_params(params))
        return TORCH_OPS[op](**kwargs)
    return call_eager(op, inputs, params, given_out)


def _probe(path, default):
    """`torch.<path>` when this PyTorch has it, else `default`."""
    obj = torch
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return default
    return obj


_ALWAYS = lambda *args: True  # noqa: E731  (a probe PyTorch lacks: take the custom op)
if torch is not None:
    _is_compiling = _probe("compiler.is_compiling", None) or _probe("_dynamo.is_compiling", _ALWAYS)
    _dispatch_modes = _probe("_C._len_torch_dispatch_stack", _ALWAYS)
    _function_modes = _probe("_C._is_torch_function_mode_enabled", _ALWAYS)
    _tracing_state = _probe("_C._get_tracing_state", _ALWAYS)
    _wrapped = _probe("_C._functorch.is_functorch_wrapped_tensor", _ALWAYS)
    _PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
    _SCHEMA_TYPES = {"bool": (bool,), "uint": (int,), "float": (float,), "choice": (str,), "uint_list": (list, tuple)}
    _PARAM_TYPES = {d["name"]: {p["name"]: _SCHEMA_TYPES[p["kind"]] for p in d["params"]} for d in _DECLS.values()}


def _plain_eager(op, inputs, params):
    """Whether the custom op would only run [`call_eager`] on these values: nothing traces
    or transforms the call (no compile, dispatch or function mode, JIT trace, functorch
    wrapper or fake tensor), no input needs a gradient, and every given parameter has
    exactly its schema's type (so the dispatcher would refuse none). Such a call skips the
    dispatcher, whose round trip is most of an eager call's cost."""
    if _is_compiling() or _dispatch_modes() or _function_modes() or _tracing_state() is not None:
        return False
    grad = torch.is_grad_enabled()
    for v in inputs.values():
        if v is None:
            continue
        if type(v) not in _PLAIN_TYPES or (grad and v.requires_grad) or _wrapped(v):
            return False
    types = _PARAM_TYPES[op]
    for k, v in params.items():
        if v is None or type(v) is Default:
            continue
        if type(v) not in types.get(k, ()):
            return False
        if type(v) is list or type(v) is tuple:
            for item in v:
                if type(item) is not int:
                    return False
    return True


def call_eager(op, inputs, params, outputs):
    """[`call`] without the torch.library detour (what the registered op runs)."""
    decl = _DECLS[op]
    inputs = {k: v for k, v in inputs.items() if v is not None}
    outputs = {k: v for k, v in outputs.items() if v is not None}
    cuda = count = 0
    for values in (inputs.values(), outputs.values()):
        for v in values:
            count += 1
            if is_torch(v) and v.is_cuda:
                cuda += 1
    if cuda:
        if cuda != count:
            raise TypeError(
                f"{op}: some tensors are on CUDA and some are not; pass them all on one device"
            )
        return _call_cuda(op, decl, inputs, params, outputs)
    return _call_cpu(op, decl, inputs, params, outputs)


def _one_or_tuple(results):
    return results[0] if len(results) == 1 else tuple(results)


def _host_input(op, d, x):
    """(dtype name, shape, bytes) of a NumPy array or CPU tensor."""
    if is_torch(x):
        try:
            name = tessera_dtype_of_torch(x, d)
        except TypeError:
            if x.is_floating_point() or x.is_complex():
                raise
            x = x.detach().numpy()  # an integer of another width: narrowed below
        else:
            if name == "u32" and x.dtype == torch.int32 and x.numel() and int(x.min()) < 0:
                raise ValueError(f"{op}: input `{d['name']}` is u32 and has negative values")
            return name, list(x.shape), torch_host_bytes(x)
    a = numpy_input(op, d, x)
    return _NUMPY[a.dtype], list(a.shape), a.tobytes()


def _call_cpu(op, decl, inputs, params, outputs):
    as_torch = any(is_torch(v) for v in inputs.values())
    ins = []
    for d in decl["inputs"]:
        if d["name"] in inputs:
            ins.append((d["name"], *_host_input(op, d, inputs[d["name"]])))
    outs = []
    for d in decl["outputs"]:
        if d["name"] in outputs:
            outs.append((d["name"], *_host_input(op, d, outputs[d["name"]])))
    results = _tessera.invoke_cpu(op, ins, outs, params_text(params))
    returned = []
    for name, dtype, shape, data in results:
        target = outputs.get(name)
        if is_torch(target):
            with torch.no_grad():
                target.copy_(torch_from_bytes(data, dtype, shape))
            returned.append(target)
        elif target is not None:
            target[...] = np.frombuffer(data, dtype=numpy_dtype(dtype)).reshape(shape)
            returned.append(target)
        elif as_torch:
            returned.append(torch_from_bytes(data, dtype, shape))
        else:
            returned.append(np.frombuffer(bytearray(data), dtype=numpy_dtype(dtype)).reshape(shape))
    return _one_or_tuple(returned)


def _device_view(x, op, role, name, copy_ok):
    """`x` as a contiguous, 16-byte aligned CUDA tensor: an input is copied when it is not
    one; an output must already be one (it is written in place)."""
    if x.is_contiguous() and x.data_ptr() % 16 == 0:
        return x
    if not copy_ok:
        raise ValueError(
            f"{op}: {role} `{name}` must be contiguous and 16-byte aligned to be written in place "
            f"(strides {tuple(x.stride())}, address 0x{x.data_ptr():x}); pass a fresh tensor"
        )
    return x.clone(memory_format=torch.contiguous_format)


def _call_cuda(op, decl, inputs, params, outputs):
    first = next(iter(inputs.values()))
    index = first.get_device()
    for given in (inputs, outputs):
        for v in given.values():
            if v.get_device() != index:
                name = next(n for n, t in given.items() if t is v)
                raise ValueError(f"{op}: `{name}` is on {v.device}, the first input on {first.device}")
    ins, keep = [], []
    for d in decl["inputs"]:
        x = inputs.get(d["name"])
        if x is None:
            continue
        dtype = tessera_dtype_of_torch(x, d)
        x = _device_view(x, op, "input", d["name"], True)
        keep.append(x)
        ins.append((d["name"], x.data_ptr(), dtype, list(x.shape), list(x.stride())))
    ptext = params_text(params)
    specs = None
    for d in decl["outputs"]:
        if d["name"] not in outputs:
            shapes = [(n, dt, shape) for n, _, dt, shape, _ in ins]
            specs = {n: (dt, s) for n, dt, s in _tessera.output_specs(op, shapes, ptext)}
            break
    outs, returned = [], []
    for d in decl["outputs"]:
        o = outputs.get(d["name"])
        if o is None:
            dt, shape = specs[d["name"]]
            o = torch.empty(shape, dtype=torch_dtype(dt), device=first.device)
        else:
            dt = tessera_dtype_of_torch(o, d)
            o = _device_view(o, op, "output", d["name"], False)
        returned.append(o)
        outs.append((d["name"], o.data_ptr(), dt, list(o.shape), list(o.stride())))
    _tessera.invoke_cuda(op, index, _current_stream(index), ins, outs, ptext)
    return _one_or_tuple(returned)


def _stream_of_stream_object(index):
    return torch.cuda.current_stream(index).cuda_stream


# The handle of PyTorch's current stream on CUDA device `index` (a `CUstream` as an
# integer), read without making a `torch.cuda.Stream` where this PyTorch allows.
_current_stream = (
    _probe("_C._cuda_getCurrentRawStream", None) or _stream_of_stream_object
    if torch is not None
    else None
)


def _eager_path():
    """`_tessera.call_torch`, the eager call on CUDA tensors in one native call, given the
    PyTorch objects it calls; None (every call takes the general path) where this PyTorch
    lacks one of them."""
    if torch is None:
        return None
    hooks = {
        "tensor": torch.Tensor,
        "parameter": torch.nn.Parameter,
        "default": Default,
        "to_dlpack": _probe("_C._to_dlpack", None),
        "current_stream": _probe("_C._cuda_getCurrentRawStream", None),
        "empty": torch.empty,
        "dtypes": {name: torch_dtype(name) for name in ("f32", "f16", "bf16", "u32", "i32", "u8", "i8", "bool")},
        "grad_enabled": torch.is_grad_enabled,
        "dispatch_modes": _probe("_C._len_torch_dispatch_stack", None),
        "function_modes": _probe("_C._is_torch_function_mode_enabled", None),
        "tracing_state": _probe("_C._get_tracing_state", None),
        "wrapped": _probe("_C._functorch.is_functorch_wrapped_tensor", None),
    }
    compiling = _probe("compiler.is_compiling", None)
    if compiling is None or any(v is None for v in hooks.values()):
        return None
    _tessera.enable_torch_eager(hooks)
    return compiling


# torch.compiler.is_compiling where the eager path is on (the generated functions take it
# only outside compilation, so torch.compile traces the general path), else None.
EAGER_COMPILING = _eager_path()
