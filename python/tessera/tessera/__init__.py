"""Tessera's LLM-inference kernels from Python.

Every op Tessera declares is ``tessera.ops.<name>``, generated at import from its
declaration: the same input, parameter and output names, defaults and errors as
``tessera run``. NumPy arrays and CPU tensors run on the CPU backend (copied in and out);
PyTorch CUDA tensors run in place on PyTorch's current stream. With PyTorch installed each
op is also the ``torch.library`` custom op ``torch.ops.tessera.<name>``, with a fake
implementation, so ``torch.compile`` traces through it.
"""

from . import _tessera
from ._decl import declarations, output_specs
from . import ops

__version__ = _tessera.__version__
__all__ = ["ops", "declarations", "output_specs", "__version__"]
