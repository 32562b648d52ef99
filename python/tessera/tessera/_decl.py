"""The op declarations as the native module reports them, and the conversions of Python
values to the ``name=value`` text ``tessera run`` parses (so both surfaces accept and
refuse the same values with the same messages)."""

from . import _tessera

_DECLS = {d["name"]: d for d in _tessera.ops()}


def declarations():
    """Every declared op's declaration, by name (a dict of plain Python data)."""
    return dict(_DECLS)


def param_text(value):
    """A parameter value as ``tessera run --param`` text: booleans as true/false, lists
    of integers comma-separated, everything else as ``str``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(param_text(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    if hasattr(value, "item") and not isinstance(value, str):
        return param_text(value.item())
    return str(value)


def params_text(params):
    """The given parameters (None or a Default: not given) as (name, text) pairs."""
    out = []
    for k, v in params.items():
        if v is not None and type(v) is not Default:
            out.append((k, param_text(v)))
    return out


class Default:
    """A parameter left at its declared default: shown as the value in signatures, and
    not passed to the op, which then fills it in itself (an op may refuse a parameter
    that is given but unused, as `tessera run` does)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return repr(self.value)


def given_params(params):
    """The parameters the caller gave: defaults and None dropped to None."""
    return {k: (None if isinstance(v, Default) else v) for k, v in params.items()}


def default_value(param):
    """A declared default as a Python value (None for a parameter the op decides)."""
    text = param["default"]
    if text is None:
        return None
    kind = param["kind"]
    if kind == "bool":
        return text in ("true", "1")
    if kind == "uint":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "uint_list":
        return [int(t) for t in text.split(",")]
    return text


def output_specs(op, inputs, params=None):
    """Each output's (name, dtype name, shape) for inputs given as {name: (dtype name,
    shape)}: derived by the declaration, no data needed."""
    given = [(n, d, list(s)) for n, (d, s) in inputs.items()]
    return _tessera.output_specs(op, given, params_text(params or {}))
