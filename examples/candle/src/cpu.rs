//! candle CPU tensors through Tessera's CPU backend: inputs copied in, the output copied out.

use crate::bridge::{contiguous, error, TesseraOp};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout, Result, Shape};
use half::{bf16, f16};
use std::sync::OnceLock;
use tessera::prelude::{Context, DType, Tensor as TesseraTensor};

fn context() -> &'static Context {
    static CPU: OnceLock<Context> = OnceLock::new();
    CPU.get_or_init(Context::cpu)
}

fn to_tessera<O: TesseraOp>(ctx: &Context, s: &CpuStorage, l: &Layout) -> Result<TesseraTensor> {
    let (a, b) = contiguous(O::NAME, l)?;
    let t = match s {
        CpuStorage::F32(v) => ctx.tensor(&v[a..b], l.dims()),
        CpuStorage::F16(v) => ctx.tensor(&v[a..b], l.dims()),
        CpuStorage::BF16(v) => ctx.tensor(&v[a..b], l.dims()),
        other => {
            return Err(error(
                O::NAME,
                format!("takes f32, f16 or bf16 tensors, got {:?}", other.dtype()),
            ))
        }
    };
    t.map_err(|e| error(O::NAME, e))
}

/// Runs `op` on CPU storages.
pub(crate) fn run<O: TesseraOp>(
    op: &O,
    inputs: &[(&CpuStorage, &Layout)],
) -> Result<(CpuStorage, Shape)> {
    let ctx = context();
    let tensors = inputs
        .iter()
        .map(|(s, l)| to_tessera::<O>(ctx, s, l))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&TesseraTensor> = tensors.iter().collect();
    let shape = op.output_shape(&refs);
    let dtype = refs[0].dtype();
    let out = ctx.zeros(dtype, &shape).map_err(|e| error(O::NAME, e))?;
    op.call(ctx, &refs, &out).map_err(|e| error(O::NAME, e))?;
    let read = |e| error(O::NAME, e);
    let storage = match dtype {
        DType::F16 => CpuStorage::F16(out.to_vec::<f16>().map_err(read)?),
        DType::BF16 => CpuStorage::BF16(out.to_vec::<bf16>().map_err(read)?),
        _ => CpuStorage::F32(out.to_vec::<f32>().map_err(read)?),
    };
    Ok((storage, Shape::from(shape)))
}
