"""Each declared op as the ``torch.library`` custom op ``torch.ops.tessera.<name>``, when
PyTorch imports: its schema generated from the declaration (tensors, then parameters, all
passed by name), CPU and CUDA kernels that run the op eagerly, and a fake implementation
whose outputs' shapes and dtypes the declaration derives from the inputs', so
``torch.compile`` traces through the op and CUDA graphs capture its launches."""

import warnings

from . import _dispatch, _tessera
from ._arrays import tessera_dtype_of_torch, torch, torch_dtype
from ._decl import _DECLS, params_text

_SCHEMA_TYPES = {"bool": "bool", "uint": "int", "float": "float", "choice": "str", "uint_list": "int[]"}
_LIB = None


def _arg_order(decl):
    """The schema's arguments: required tensors, optional tensors, then parameters."""
    tensors = sorted(decl["inputs"], key=lambda t: t["optional"])
    return tensors, decl["params"]


def schema(decl):
    """The op's schema: every parameter optional (None leaves it at its declared default,
    which the Python function fills in before the call)."""
    tensors, params = _arg_order(decl)
    args = [f"Tensor{'?' if t['optional'] else ''} {t['name']}" for t in tensors]
    args += [f"{_SCHEMA_TYPES[p['kind']]}? {p['name']}" for p in params]
    n = len(decl["outputs"])
    ret = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    return f"({', '.join(args)}) -> {ret}"


def _split(decl, args, kwargs):
    tensors, params = _arg_order(decl)
    names = [t["name"] for t in tensors] + [p["name"] for p in params]
    values = dict(zip(names, args))
    values.update(kwargs)
    inputs = {t["name"]: values.get(t["name"]) for t in tensors}
    return inputs, {p["name"]: values.get(p["name"]) for p in params}


def _kernel(decl):
    def run(*args, **kwargs):
        inputs, params = _split(decl, args, kwargs)
        return _dispatch.call_eager(decl["name"], inputs, params, {})

    return run


def _fake(decl):
    by_name = {t["name"]: t for t in decl["inputs"]}

    def fake(*args, **kwargs):
        inputs, params = _split(decl, args, kwargs)
        given = {k: v for k, v in inputs.items() if v is not None}
        shapes = [
            (k, tessera_dtype_of_torch(v, by_name[k]), [int(s) for s in v.shape])
            for k, v in given.items()
        ]
        specs = _tessera.output_specs(decl["name"], shapes, params_text(params))
        device = next(iter(given.values())).device
        outs = [torch.empty(s, dtype=torch_dtype(dt), device=device) for _, dt, s in specs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    return fake


def register_all():
    """Registers every op once per process; without PyTorch, nothing. An op whose
    registration fails runs eagerly only, and a warning names it."""
    global _LIB
    if torch is None or _LIB is not None:
        return
    register_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
    try:
        _LIB = torch.library.Library("tessera", "DEF")
    except Exception as e:
        warnings.warn(f"tessera: cannot open the torch.library namespace `tessera`: {e}")
        return
    failed = []
    for decl in _DECLS.values():
        name = decl["name"]
        try:
            _LIB.define(name + schema(decl))
            _LIB.impl(name, _kernel(decl), "CPU")
            _LIB.impl(name, _kernel(decl), "CUDA")
            register_fake(f"tessera::{name}", _fake(decl), lib=_LIB)
            _dispatch.TORCH_OPS[name] = getattr(torch.ops.tessera, name)
        except Exception as e:
            failed.append(f"{name} ({e})")
    if failed:
        warnings.warn("tessera: these ops run eagerly only, their torch.library registration failed: " + "; ".join(failed))
