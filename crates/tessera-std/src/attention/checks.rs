//! Validation the attention wrappers share: dtypes, the q/cache/out shapes, head_dim, GQA
//! divisibility, cache depth and the scalar options, each failing with what was expected; and
//! the read-back of a device check's verdict.

use super::plan::DECODE_HEAD_DIMS;
use crate::error::{runtime, OpError};
use crate::validate::{distinct, dtype_in, dtype_is, fits_u32, FLOAT_DTYPES};
use tessera_runtime::Tensor;

/// q, k, v and out share one float dtype; out aliases none of them.
pub(crate) fn same_float_dtype(
    op: &'static str,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    out: &Tensor,
) -> Result<(), OpError> {
    dtype_in(op, "q", q, &FLOAT_DTYPES)?;
    dtype_is(op, "k", k, q.dtype())?;
    dtype_is(op, "v", v, q.dtype())?;
    dtype_is(op, "out", out, q.dtype())?;
    distinct(op, out, &[("q", q), ("k", k), ("v", v)])
}

/// `t` has `dims` dimensions: returns them.
pub(crate) fn dims<'a>(
    op: &'static str,
    name: &str,
    t: &'a Tensor,
    layout: &str,
) -> Result<&'a [usize], OpError> {
    let want = layout.split(',').count();
    if t.shape().len() != want {
        return Err(OpError::invalid(
            op,
            format!(
                "`{name}` must be {want}-D [{layout}], got shape {:?}",
                t.shape()
            ),
        ));
    }
    if t.shape().contains(&0) {
        return Err(OpError::invalid(
            op,
            format!("`{name}` must not be empty, got shape {:?}", t.shape()),
        ));
    }
    Ok(t.shape())
}

/// head_dim is one the decode kernels are specialised for.
pub(crate) fn decode_head_dim(op: &'static str, d: usize) -> Result<u32, OpError> {
    match DECODE_HEAD_DIMS.iter().find(|&&x| x as usize == d) {
        Some(&x) => Ok(x),
        None => Err(OpError::invalid(
            op,
            format!("head_dim {d} is not supported; expected one of {DECODE_HEAD_DIMS:?}"),
        )),
    }
}

/// `n_q_heads` is a whole multiple of `n_kv_heads`.
pub(crate) fn gqa(op: &'static str, n_q_heads: usize, n_kv_heads: usize) -> Result<(), OpError> {
    if n_q_heads.is_multiple_of(n_kv_heads) {
        return Ok(());
    }
    Err(OpError::invalid(
        op,
        format!(
            "n_q_heads = {n_q_heads} must be a multiple of n_kv_heads = {n_kv_heads} (GQA groups)"
        ),
    ))
}

/// A dimension of one tensor equals the matching one of another.
pub(crate) fn same_dim(
    op: &'static str,
    what: &str,
    got: usize,
    want: usize,
    from: &str,
) -> Result<(), OpError> {
    if got == want {
        return Ok(());
    }
    Err(OpError::invalid(
        op,
        format!("{what} is {got} but {from} says {want}"),
    ))
}

/// A finite softmax scale.
pub(crate) fn scale_ok(op: &'static str, scale: f32) -> Result<(), OpError> {
    if scale.is_finite() {
        return Ok(());
    }
    Err(OpError::invalid(
        op,
        format!("`scale` must be finite, got {scale}"),
    ))
}

/// Every index the kernels form fits u32.
pub(crate) fn indexable(op: &'static str, ts: &[(&str, &Tensor)]) -> Result<(), OpError> {
    for (name, t) in ts {
        fits_u32(op, &format!("the element count of `{name}`"), t.len())?;
    }
    Ok(())
}

/// The first word of a device check's `verdict` (u32 words, `u32::MAX` until a check
/// kernel records the first offending sequence or entry in one) that holds a finding, in
/// the priority `order`, as `(word, recorded index)`; the verdict is put back to
/// `u32::MAX` when one did. One read-back of the whole verdict.
pub(super) fn first_finding(
    op: &'static str,
    verdict: &Tensor,
    order: &[usize],
) -> Result<Option<(usize, usize)>, OpError> {
    let words = verdict.to_vec::<u32>().map_err(runtime(op))?;
    let found = order.iter().find_map(|&w| match words.get(w) {
        Some(&x) if x != u32::MAX => Some((w, x as usize)),
        _ => None,
    });
    if found.is_some() {
        verdict
            .write(&vec![u32::MAX; words.len()])
            .map_err(runtime(op))?;
    }
    Ok(found)
}
