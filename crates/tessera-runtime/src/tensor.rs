//! Typed device tensors: a dtype, a shape and a buffer on one backend, with host
//! conversions in and out.

use crate::backend::{Backend, DeviceBuffer};
use crate::error::{Result, RuntimeError};
use half::{bf16, f16};
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use tessera_ir::Scalar as DType;

/// A host element type a tensor can be created from and read back as.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    const DTYPE: DType;
    /// The value as f64 (exact for every supported type).
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($($t:ty => $d:ident, |$v:ident| $conv:expr;)*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                let $v = self;
                $conv
            }
        }
    )*};
}

element! {
    f32 => F32, |v| v as f64;
    f16 => F16, |v| v.to_f64();
    bf16 => BF16, |v| v.to_f64();
    u32 => U32, |v| v as f64;
    i32 => I32, |v| v as f64;
    u8 => U8, |v| v as f64;
    i8 => I8, |v| v as f64;
}

/// A typed tensor in one backend's memory. Cloning shares the buffer.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) buffer: Arc<dyn DeviceBuffer>,
    dtype: DType,
    shape: Vec<usize>,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor<{}>{:?} on {}",
            self.dtype,
            self.shape,
            self.backend.info().kind
        )
    }
}

/// Number of elements of a shape, or an error if it overflows.
pub(crate) fn element_count(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| RuntimeError::InvalidShape {
            shape: shape.to_vec(),
            reason: "the element count overflows usize".into(),
        })
}

/// Bytes of `shape` elements of `dtype`, or an error if the count overflows.
pub(crate) fn size_in_bytes(dtype: DType, shape: &[usize]) -> Result<usize> {
    element_count(shape)?
        .checked_mul(dtype.size_bytes())
        .ok_or_else(|| RuntimeError::InvalidShape {
            shape: shape.to_vec(),
            reason: "the size in bytes overflows usize".into(),
        })
}

/// The buffer of a [`crate::Context::placeholder`]: a size and no memory. No backend
/// accepts it, so binding, reading or writing it is an error.
#[derive(Debug)]
pub(crate) struct Placeholder {
    pub bytes: usize,
}

impl DeviceBuffer for Placeholder {
    fn size_bytes(&self) -> usize {
        self.bytes
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Tensor {
    /// A tensor over a buffer someone made (borrowed memory, a placeholder).
    pub(crate) fn from_buffer(
        backend: &Arc<dyn Backend>,
        buffer: Arc<dyn DeviceBuffer>,
        dtype: DType,
        shape: &[usize],
    ) -> Tensor {
        Tensor {
            backend: backend.clone(),
            buffer,
            dtype,
            shape: shape.to_vec(),
        }
    }

    /// Allocates a zero-filled tensor.
    pub(crate) fn alloc(
        backend: &Arc<dyn Backend>,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor> {
        Self::alloc_with(backend, dtype, shape, false)
    }

    /// [`Tensor::alloc`] with unspecified contents (see [`Backend::alloc_uninit`]).
    pub(crate) fn alloc_uninit(
        backend: &Arc<dyn Backend>,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor> {
        Self::alloc_with(backend, dtype, shape, true)
    }

    fn alloc_with(
        backend: &Arc<dyn Backend>,
        dtype: DType,
        shape: &[usize],
        uninit: bool,
    ) -> Result<Tensor> {
        let bytes = size_in_bytes(dtype, shape)?;
        let buffer = if uninit {
            backend.alloc_uninit(bytes)?
        } else {
            backend.alloc(bytes)?
        };
        Ok(Tensor {
            backend: backend.clone(),
            buffer,
            dtype,
            shape: shape.to_vec(),
        })
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn size_bytes(&self) -> usize {
        self.len() * self.dtype.size_bytes()
    }

    /// The device buffer (for backends and advanced callers).
    pub fn buffer(&self) -> &Arc<dyn DeviceBuffer> {
        &self.buffer
    }

    /// True if both tensors share memory: one buffer, or device address ranges that
    /// overlap (two borrowed views of a caller's block, or a view of one the runtime owns).
    pub fn same_buffer(&self, other: &Tensor) -> bool {
        if std::ptr::addr_eq(Arc::as_ptr(&self.buffer), Arc::as_ptr(&other.buffer)) {
            return true;
        }
        match (self.buffer.address_range(), other.buffer.address_range()) {
            (Some(a), Some(b)) => a.overlaps(&b),
            _ => false,
        }
    }

    /// A tensor of `shape` over this one's first `shape.product()` elements: the same
    /// memory (nothing copied, nothing allocated), as a reshape when the counts are equal
    /// or as the leading rows of a buffer made once for the largest call. The two alias,
    /// and launches refuse them together where an op forbids aliasing. A shape with more
    /// elements than this tensor holds is refused.
    pub fn view(&self, shape: &[usize]) -> Result<Tensor> {
        let n = element_count(shape)?;
        if n > self.len() {
            return Err(RuntimeError::InvalidShape {
                shape: shape.to_vec(),
                reason: format!(
                    "a view of {n} elements over a {}{:?} tensor of {}",
                    self.dtype,
                    self.shape,
                    self.len()
                ),
            });
        }
        Ok(Tensor {
            backend: self.backend.clone(),
            buffer: self.buffer.clone(),
            dtype: self.dtype,
            shape: shape.to_vec(),
        })
    }

    /// True if this tensor lives on `backend`.
    pub(crate) fn is_on(&self, backend: &Arc<dyn Backend>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.backend), Arc::as_ptr(backend))
    }

    fn check_type<T: Element>(&self, what: &str) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(RuntimeError::DTypeMismatch {
                what: format!("{what} a {}{:?} tensor", self.dtype, self.shape),
                expected: self.dtype,
                got: T::DTYPE,
            });
        }
        Ok(())
    }

    /// Overwrites the whole tensor with host data of its dtype and length.
    pub fn write<T: Element>(&self, data: &[T]) -> Result<()> {
        self.check_type::<T>("writing host data into")?;
        if data.len() != self.len() {
            return Err(RuntimeError::LengthMismatch {
                what: format!("writing into a {}{:?} tensor", self.dtype, self.shape),
                expected: self.len(),
                got: data.len(),
            });
        }
        self.backend
            .upload(&*self.buffer, 0, bytemuck::cast_slice(data))
    }

    /// Overwrites the tensor with raw bytes (exactly its size).
    pub fn write_bytes(&self, bytes: &[u8]) -> Result<()> {
        if bytes.len() != self.size_bytes() {
            return Err(RuntimeError::LengthMismatch {
                what: format!("writing bytes into a {}{:?} tensor", self.dtype, self.shape),
                expected: self.size_bytes(),
                got: bytes.len(),
            });
        }
        self.backend.upload(&*self.buffer, 0, bytes)
    }

    /// The raw bytes of the tensor.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.size_bytes()];
        self.backend.download(&*self.buffer, 0, &mut out)?;
        Ok(out)
    }

    /// Reads the tensor back as host values of its own dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_type::<T>("reading back")?;
        let mut out = vec![T::zeroed(); self.len()];
        self.backend
            .download(&*self.buffer, 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }

    /// Reads the tensor back as f64, whatever its dtype (bools as 0 / 1): for references.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let bytes = self.to_bytes()?;
        Ok(bytes_to_f64(self.dtype, &bytes))
    }
}

/// Decodes little-endian elements of `dtype` to f64.
pub(crate) fn bytes_to_f64(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    let w = dtype.size_bytes();
    bytes
        .chunks_exact(w)
        .map(|c| match dtype {
            DType::Bool => (c[0] != 0) as u8 as f64,
            DType::U8 => c[0] as f64,
            DType::I8 => c[0] as i8 as f64,
            DType::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::BF16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            DType::U32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            DType::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            DType::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
        })
        .collect()
}

/// The byte pattern `full_nan` fills one element with: a quiet NaN for floats, all ones
/// (an implausible value) for integers and bools.
pub(crate) fn nan_pattern(dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => f32::NAN.to_le_bytes().to_vec(),
        DType::F16 => f16::NAN.to_le_bytes().to_vec(),
        DType::BF16 => bf16::NAN.to_le_bytes().to_vec(),
        other => vec![0xFF; other.size_bytes()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{AddressRange, BackendKind};
    use crate::Context;

    /// A buffer at a chosen device address, as a borrowed block would report it.
    #[derive(Debug)]
    struct AtAddress(AddressRange);

    impl DeviceBuffer for AtAddress {
        fn size_bytes(&self) -> usize {
            self.0.len as usize
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
        fn address_range(&self) -> Option<AddressRange> {
            Some(self.0)
        }
    }

    fn at(ctx: &Context, backend: BackendKind, start: u64, len: u64) -> Tensor {
        let range = AddressRange {
            backend,
            start,
            len,
        };
        Tensor::from_buffer(
            ctx.backend(),
            Arc::new(AtAddress(range)),
            DType::U8,
            &[len as usize],
        )
    }

    #[test]
    fn views_of_one_block_alias_by_address_range() {
        let ctx = Context::cpu();
        // Every pair of small ranges, against a byte-by-byte search for a common address.
        for (a0, a1, b0, b1) in (0..12u64).flat_map(|a0| {
            (0..5u64).flat_map(move |a1| {
                (0..12u64).flat_map(move |b0| (0..5u64).map(move |b1| (a0, a1, b0, b1)))
            })
        }) {
            let a = at(&ctx, BackendKind::Cuda, a0, a1);
            let b = at(&ctx, BackendKind::Cuda, b0, b1);
            let shared = (a0..a0 + a1).any(|x| (b0..b0 + b1).contains(&x));
            assert_eq!(a.same_buffer(&b), shared, "{a0}+{a1} vs {b0}+{b1}");
        }
        // At the top of the address space the end does not wrap around.
        let top = at(&ctx, BackendKind::Cuda, u64::MAX - 4, 8);
        assert!(top.same_buffer(&at(&ctx, BackendKind::Cuda, u64::MAX - 1, 1)));
        assert!(!top.same_buffer(&at(&ctx, BackendKind::Cuda, 0, 8)));
        // One range in two address spaces is two places.
        let cuda = at(&ctx, BackendKind::Cuda, 0, 8);
        let metal = at(&ctx, BackendKind::Metal, 0, 8);
        assert!(!cuda.same_buffer(&metal));
        // A clone shares its buffer even when it is empty.
        let empty = at(&ctx, BackendKind::Cuda, 32, 0);
        assert!(empty.same_buffer(&empty.clone()));
    }

    #[test]
    fn buffers_without_addresses_alias_only_themselves() {
        let ctx = Context::cpu();
        let a = ctx.zeros(DType::F32, &[4]).expect("alloc");
        let b = ctx.zeros(DType::F32, &[4]).expect("alloc");
        assert!(a.same_buffer(&a.clone()));
        assert!(!a.same_buffer(&b));
    }

    #[test]
    fn a_placeholder_has_a_shape_and_refuses_every_access() {
        let ctx = Context::cpu();
        let before = ctx.allocations();
        let p = ctx.placeholder(DType::BF16, &[3, 5]).expect("placeholder");
        assert_eq!(
            (p.dtype(), p.shape(), p.size_bytes()),
            (DType::BF16, &[3, 5][..], 30)
        );
        assert_eq!(ctx.allocations(), before, "a placeholder is no allocation");
        assert!(p.to_bytes().is_err());
        assert!(p.write_bytes(&[0; 30]).is_err());
        assert!(ctx.placeholder(DType::F32, &[usize::MAX, 2]).is_err());
    }

    #[test]
    fn a_backend_without_caller_memory_refuses_to_borrow() {
        let ctx = Context::cpu();
        // SAFETY: the CPU backend refuses before it would touch the address.
        let e = unsafe { ctx.borrow_device_memory(0x1000, DType::F32, &[4]) }
            .expect_err("the cpu backend has no caller memory");
        assert!(e.to_string().contains("caller's memory"), "{e}");
        // SAFETY: refused before the backend is asked.
        let e =
            unsafe { ctx.borrow_device_memory(0x1004, DType::F32, &[4]) }.expect_err("misaligned");
        assert!(e.to_string().contains("16-byte"), "{e}");
        // SAFETY: a CPU context refuses before the stream is used.
        let e = unsafe { ctx.on_raw_cuda_stream(std::ptr::null_mut()) }
            .expect_err("a cpu context has no CUDA stream");
        assert!(e.to_string().contains("only a CUDA context"), "{e}");
    }
}
