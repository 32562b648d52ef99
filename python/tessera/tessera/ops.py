"""``tessera.ops.<name>`` for every declared op, generated at import from the
declarations: inputs first (required ones positional, optional ones defaulting to None),
then the parameters as keywords with their declared defaults (a parameter the op decides
defaults to None, a required one has none), then each output as a keyword: an array to
write in place, or None to have it made. The docstring is the declaration's. Outside
torch.compile each function first offers the call to the native eager path (the op's
``_tessera.EagerOp`` handle, called with the arguments flat: CUDA tensors in one call);
what it declines takes ``_call``."""

import keyword

from . import _tessera
from ._decl import _DECLS, Default, default_value
from ._dispatch import EAGER_COMPILING as _compiling
from ._dispatch import call as _call

__all__ = []


def _ident(name, taken):
    """`name` as a Python parameter name not in `taken`."""
    out = name + "_" if keyword.iskeyword(name) else name
    while out in taken:
        out += "_out"
    return out


def _doc(decl):
    lines = [decl["summary"], ""]
    lines.append("Inputs:")
    for t in decl["inputs"]:
        opt = ", optional" if t["optional"] else ""
        lines.append(f"    {t['name']}: [{', '.join(t['shape'])}] {t['dtype']['text']}{opt} — {t['doc']}")
    if decl["params"]:
        lines.append("Parameters (keywords):")
        for p in decl["params"]:
            lines.append(f"    {p['name']}: {p['kind_text']}, {p['default_text']} — {p['doc']}")
    lines.append("Outputs (keywords: an array to write in place, else made):")
    for t in decl["outputs"]:
        lines.append(f"    {t['name']}: [{', '.join(t['shape'])}] {t['dtype']['text']} — {t['doc']}")
    if decl["workspace"]:
        lines.append(f"Workspace: {decl['workspace']}")
    if decl["invariants"]:
        lines.append("Checked before anything runs:")
        lines.extend(f"    {i}" for i in decl["invariants"])
    return "\n".join(lines)


def _generate(decl):
    """The Python function of one op."""
    taken, args, env = set(), [], {"_call": _call}
    inputs, params, outputs = [], [], []
    for t in sorted(decl["inputs"], key=lambda t: t["optional"]):
        py = _ident(t["name"], taken)
        taken.add(py)
        inputs.append((t["name"], py))
        args.append(f"{py}=None" if t["optional"] else py)
    args.append("*")
    for p in decl["params"]:
        py = _ident(p["name"], taken)
        taken.add(py)
        params.append((p["name"], py))
        if p["required"]:
            args.append(py)
        else:
            value = default_value(p)
            env[f"_default_{py}"] = None if value is None else Default(value)
            args.append(f"{py}=_default_{py}")
    for t in decl["outputs"]:
        py = _ident(t["name"], taken)
        taken.add(py)
        outputs.append((t["name"], py))
        args.append(f"{py}=None")
    as_dict = lambda pairs: "{" + ", ".join(f"{n!r}: {py}" for n, py in pairs) + "}"
    name = decl["name"]
    src = f"def {name}({', '.join(args)}):\n"
    if _compiling is not None:
        # CUDA tensors in one native call; it returns None for anything else (NumPy, CPU
        # tensors, a call torch.library must see), which the general path below takes.
        # The op's native handle takes the arguments flat, so the call makes no tuples.
        env.update(_compiling=_compiling, _eager=_tessera.EagerOp(name, [n for n, _ in inputs]))
        flat = ", ".join(py for _, py in inputs + params + outputs)
        src += (
            "    if not _compiling():\n"
            f"        r = _eager({flat})\n"
            "        if r is not None:\n"
            "            return r\n"
        )
    src += f"    return _call({name!r}, {as_dict(inputs)}, {as_dict(params)}, {as_dict(outputs)})\n"
    exec(compile(src, f"<tessera.ops.{name}>", "exec"), env)
    fn = env[name]
    fn.__doc__ = _doc(decl)
    fn.__module__ = __name__
    fn.__qualname__ = name
    return fn


for _decl in _DECLS.values():
    globals()[_decl["name"]] = _generate(_decl)
    __all__.append(_decl["name"])

from . import _torch_ops  # noqa: E402  (registers torch.ops.tessera.* when PyTorch imports)

_torch_ops.register_all()
