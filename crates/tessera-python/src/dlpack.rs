//! A PyTorch tensor's description read in one call: PyTorch exports it as a DLPack capsule
//! (`torch._C._to_dlpack`), whose C struct holds the data pointer, the device (type and
//! index), the dtype, the shape and the strides. The capsule is read and dropped unused,
//! which frees it (its destructor calls PyTorch's deleter); nothing is copied and the
//! tensor's memory is not kept.

use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use std::ffi::c_void;
use tessera_runtime::DType;

/// DLPack's `DLDevice`: `device_type` 2 is `kDLCUDA`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// DLPack's `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// DLPack's `DLTensor`, the head of both managed forms.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

/// DLPack ≥ 1.0's `DLManagedTensorVersioned`: version, manager, deleter and flags first.
#[repr(C)]
struct DlManagedVersioned {
    version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: *mut c_void,
    flags: u64,
    dl_tensor: DlTensor,
}

const KDL_CUDA: i32 = 2;

/// The most dimensions the reader takes (a tensor of more is not read: the general path
/// takes it), so a shape is held without an allocation.
pub const MAX_DIMS: usize = 8;

/// A shape of at most [`MAX_DIMS`] dimensions, held inline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    len: usize,
    dims: [usize; MAX_DIMS],
}

impl Dims {
    /// `shape`, or `None` past [`MAX_DIMS`] dimensions.
    pub fn new(shape: &[usize]) -> Option<Dims> {
        let mut dims = [0; MAX_DIMS];
        dims.get_mut(..shape.len())?.copy_from_slice(shape);
        Some(Dims {
            len: shape.len(),
            dims,
        })
    }

    pub fn as_slice(&self) -> &[usize] {
        &self.dims[..self.len]
    }
}

/// What a call needs of one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorView {
    /// The first element's device address (data + byte offset).
    pub address: u64,
    /// The CUDA device index, or `None` for memory that is not plain CUDA device memory.
    pub cuda_device: Option<usize>,
    /// The dtype, or `None` for one Tessera does not run.
    pub dtype: Option<DType>,
    pub shape: Dims,
    /// Row-major contiguous (size-1 dimensions may have any stride).
    pub contiguous: bool,
}

/// Tessera's dtype of a DLPack `(code, bits, lanes)`: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool.
fn dtype_of(d: DlDataType) -> Option<DType> {
    if d.lanes != 1 {
        return None;
    }
    Some(match (d.code, d.bits) {
        (2, 32) => DType::F32,
        (2, 16) => DType::F16,
        (4, 16) => DType::BF16,
        (0, 32) => DType::I32,
        (1, 32) => DType::U32,
        (1, 8) => DType::U8,
        (0, 8) => DType::I8,
        (6, 8) => DType::Bool,
        _ => return None,
    })
}

/// Row-major contiguity of `shape` with `strides` in elements (`None`: compact row-major).
fn is_contiguous(shape: &[usize], strides: Option<&[i64]>) -> bool {
    let Some(strides) = strides else { return true };
    let mut expected: i64 = 1;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != expected {
            return false;
        }
        expected = expected.saturating_mul(n as i64);
    }
    true
}

/// Reads the capsule `to_dlpack(tensor)` returned. `None` if it is not a DLPack capsule
/// this reader knows, or the tensor has more than [`MAX_DIMS`] dimensions.
pub fn read(capsule: &Bound<'_, PyAny>) -> Option<TensorView> {
    let capsule = capsule.downcast::<PyCapsule>().ok()?;
    let name = capsule.name().ok()??;
    let versioned = match name.to_bytes() {
        b"dltensor" => false,
        b"dltensor_versioned" => true,
        _ => return None,
    };
    let ptr = capsule.pointer();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a live, unconsumed capsule of either name holds a `DLManagedTensor` (whose
    // first field is the `DLTensor`) or a `DLManagedTensorVersioned`, valid until the
    // capsule is dropped, which happens after this function returns.
    let t: &DlTensor = unsafe {
        if versioned {
            let m = &*ptr.cast::<DlManagedVersioned>();
            if m.version[0] != 1 {
                return None;
            }
            &m.dl_tensor
        } else {
            &*ptr.cast::<DlTensor>()
        }
    };
    let ndim = usize::try_from(t.ndim).ok()?;
    if ndim > 0 && t.shape.is_null() {
        return None;
    }
    // SAFETY: `shape` holds `ndim` sizes and `strides`, when not null, `ndim` strides (the
    // DLPack contract); both live as long as the capsule.
    let (shape, strides) = unsafe {
        let shape: &[i64] = if ndim == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(t.shape, ndim)
        };
        let strides =
            (!t.strides.is_null() && ndim > 0).then(|| std::slice::from_raw_parts(t.strides, ndim));
        (shape, strides)
    };
    if ndim > MAX_DIMS {
        return None;
    }
    let mut sizes = [0usize; MAX_DIMS];
    for (slot, &n) in sizes.iter_mut().zip(shape) {
        *slot = usize::try_from(n).ok()?;
    }
    let shape = Dims::new(&sizes[..ndim])?;
    let contiguous = is_contiguous(shape.as_slice(), strides);
    Some(TensorView {
        address: (t.data as u64).checked_add(t.byte_offset)?,
        cuda_device: (t.device.device_type == KDL_CUDA)
            .then(|| usize::try_from(t.device.device_id).ok())
            .flatten(),
        dtype: dtype_of(t.dtype),
        shape,
        contiguous,
    })
}
