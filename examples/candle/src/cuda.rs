//! candle CUDA tensors through Tessera's CUDA backend on candle's own stream: inputs read in
//! place, the output written into memory candle allocated, nothing copied or synchronised.

use crate::bridge::{contiguous, error, tessera_dtype, TesseraOp};
use candle_core::backend::BackendStorage;
use candle_core::cuda::cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr};
use candle_core::cuda_backend::{CudaDevice, CudaStorage, CudaStorageSlice};
use candle_core::{Layout, Result, Shape};
use half::{bf16, f16};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use tessera::prelude::{Context, DType, Tensor as TesseraTensor};

/// Tessera's context on candle's device and stream. The device's base context (opened once
/// per GPU) holds the compiled kernels; the stream view shares them.
fn context(dev: &CudaDevice, op: &str) -> Result<Context> {
    static BASE: OnceLock<Mutex<HashMap<usize, Context>>> = OnceLock::new();
    let stream = dev.cuda_stream();
    let ordinal = stream.context().ordinal();
    let base = {
        let mut map = BASE
            .get_or_init(Default::default)
            .lock()
            .map_err(|_| error(op, "a previous call panicked while opening the device"))?;
        match map.get(&ordinal) {
            Some(c) => c.clone(),
            None => {
                let c = Context::cuda(ordinal).map_err(|e| error(op, e))?;
                map.insert(ordinal, c.clone());
                c
            }
        }
    };
    base.on_cuda_stream(stream).map_err(|e| error(op, e))
}

/// The device address of `layout`'s first element in `slice`.
fn address<T: DeviceRepr>(slice: &CudaSlice<T>, dev: &CudaDevice, start: usize) -> u64 {
    let stream = dev.cuda_stream();
    // Same stream as the launch: the guard has nothing to order.
    let (ptr, _guard) = slice.device_ptr(&stream);
    ptr + (start * std::mem::size_of::<T>()) as u64
}

fn borrow<O: TesseraOp>(ctx: &Context, s: &CudaStorage, l: &Layout) -> Result<TesseraTensor> {
    let (start, _) = contiguous(O::NAME, l)?;
    let dtype = tessera_dtype(O::NAME, s.dtype())?;
    let addr = match &s.slice {
        CudaStorageSlice::F32(v) => address(v, &s.device, start),
        CudaStorageSlice::F16(v) => address(v, &s.device, start),
        CudaStorageSlice::BF16(v) => address(v, &s.device, start),
        _ => unreachable!("tessera_dtype admits only f32, f16 and bf16"),
    };
    // SAFETY: `addr` is candle's live allocation of this storage, on this context's GPU,
    // holding the layout's contiguous elements of `dtype`; candle keeps it alive for the
    // call, and every use is ordered on candle's stream.
    unsafe { ctx.borrow_device_memory(addr, dtype, l.dims()) }.map_err(|e| error(O::NAME, e))
}

/// Allocates the output on candle's device, runs the op into it and hands it to candle.
fn run_into<T, O>(
    op: &O,
    ctx: &Context,
    dev: &CudaDevice,
    inputs: &[&TesseraTensor],
    shape: &[usize],
    dtype: DType,
) -> Result<CudaStorage>
where
    T: DeviceRepr + candle_core::cuda_backend::CudaDType,
    O: TesseraOp,
{
    let n: usize = shape.iter().product();
    // SAFETY: every element is written by the op before candle reads it (the op fails
    // before launching otherwise, and the buffer is then dropped unread).
    let mut out: CudaSlice<T> = unsafe { dev.alloc::<T>(n.max(1)) }?;
    {
        let stream = dev.cuda_stream();
        let (ptr, _guard) = out.device_ptr_mut(&stream);
        // SAFETY: as in `borrow`: a fresh allocation of `n` elements of `dtype` on this GPU.
        let t = unsafe { ctx.borrow_device_memory(ptr, dtype, shape) }
            .map_err(|e| error(O::NAME, e))?;
        op.call(ctx, inputs, &t).map_err(|e| error(O::NAME, e))?;
    }
    Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
}

/// Runs `op` on CUDA storages, on candle's stream.
pub(crate) fn run<O: TesseraOp>(
    op: &O,
    inputs: &[(&CudaStorage, &Layout)],
) -> Result<(CudaStorage, Shape)> {
    let dev = inputs[0].0.device.clone();
    let ctx = context(&dev, O::NAME)?;
    let tensors = inputs
        .iter()
        .map(|(s, l)| borrow::<O>(&ctx, s, l))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&TesseraTensor> = tensors.iter().collect();
    let shape = op.output_shape(&refs);
    let dtype = refs[0].dtype();
    let storage = match dtype {
        DType::F16 => run_into::<f16, O>(op, &ctx, &dev, &refs, &shape, dtype)?,
        DType::BF16 => run_into::<bf16, O>(op, &ctx, &dev, &refs, &shape, dtype)?,
        _ => run_into::<f32, O>(op, &ctx, &dev, &refs, &shape, dtype)?,
    };
    Ok((storage, Shape::from(shape)))
}
