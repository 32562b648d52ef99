//! `tessera._tessera`, the native module of the `tessera` Python package: the op
//! declarations as Python data ([`schema`]), output specs derived from shapes alone, and
//! calls of any declared op ([`call`]) — on host bytes through the CPU backend, or on a
//! caller's CUDA memory and stream without a copy ([`cuda`]), and the eager call on
//! PyTorch CUDA tensors that reads them itself ([`eager`]). The Python side
//! (`python/tessera/tessera/`) generates `tessera.ops.<name>` and the `torch.library`
//! registrations from [`schema`]; every error reaches it as a Python exception.

mod cache;
mod call;
mod cuda;
mod dlpack;
mod eager;
mod errors;
mod schema;

use pyo3::prelude::*;

#[pymodule]
fn _tessera(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(schema::ops, m)?)?;
    m.add_function(wrap_pyfunction!(call::output_specs, m)?)?;
    m.add_function(wrap_pyfunction!(call::invoke_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(cuda::invoke_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(eager::enable_torch_eager, m)?)?;
    m.add_function(wrap_pyfunction!(eager::call_torch, m)?)?;
    m.add_function(wrap_pyfunction!(eager::describe_tensor, m)?)?;
    m.add_class::<eager::EagerOp>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
