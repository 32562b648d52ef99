//! What a chunked prefill needs besides its tensors, made by the caller once per batch
//! shape so the op call itself allocates and uploads nothing (and so can be captured in a
//! CUDA graph): the chunk table planned from the sequence boundaries, the per-chunk
//! scratch, and a zero initial state.
//!
//! The chunk table is built on the host from `cu_seqlens` and uploaded when the workspace
//! is made or re-planned ([`GdnPrefillWorkspace::plan`]), not on the device inside the
//! call: the number of chunks sets the launches' grids, which a kernel could not size
//! without an upper-bound grid of early-exiting threadgroups, and the boundaries are
//! checked (offsets from 0 to T, non-decreasing) with a clear error before anything runs.
//! A graph replay therefore depends on no host work per call; replaying for another batch
//! shape means planning it first.

use super::prefill::{staging_dtype, CHUNK, STAGED_DK_MAX};
use crate::error::{runtime, OpError};
use crate::validate::fits_u32;
use tessera_runtime::{Context, DType, Tensor};

const OP: &str = "GdnPrefillWorkspace";

/// The shape a prefill workspace is sized for: the activations' dtype, the value heads,
/// the head sizes and the sequence boundaries (N + 1 offsets from 0 to T).
#[derive(Clone, Copy, Debug)]
pub struct PrefillShape<'a> {
    pub dtype: DType,
    pub hv: usize,
    pub dk: usize,
    pub dv: usize,
    pub cu_seqlens: &'a [usize],
}

/// The boundaries of `batch` sequences of `len` tokens each.
pub fn equal_sequences(batch: usize, len: usize) -> Vec<usize> {
    (0..=batch).map(|i| i * len).collect()
}

/// The chunk table of one batch: `[start, len]` per chunk of at most [`CHUNK`] tokens, and
/// each sequence's first chunk (N + 1 entries).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ChunkPlan {
    cu: Vec<usize>,
    table: Vec<u32>,
    seq_chunks: Vec<u32>,
}

impl ChunkPlan {
    fn new(cu: &[usize]) -> Result<ChunkPlan, OpError> {
        if cu.len() < 2 || cu[0] != 0 || cu.windows(2).any(|w| w[1] < w[0]) {
            return Err(OpError::invalid(
                OP,
                format!(
                    "`cu_seqlens` must be N + 1 >= 2 non-decreasing offsets from 0, got {cu:?}"
                ),
            ));
        }
        fits_u32(OP, "the token count", cu[cu.len() - 1])?;
        let mut table = Vec::new();
        let mut seq_chunks = vec![0u32];
        for w in cu.windows(2) {
            let mut t0 = w[0];
            while t0 < w[1] {
                let len = CHUNK.min(w[1] - t0);
                table.extend([t0 as u32, len as u32]);
                t0 += len;
            }
            seq_chunks.push((table.len() / 2) as u32);
        }
        Ok(ChunkPlan {
            cu: cu.to_vec(),
            table,
            seq_chunks,
        })
    }

    fn chunks(&self) -> usize {
        self.table.len() / 2
    }

    fn seqs(&self) -> usize {
        self.cu.len() - 1
    }
}

/// Element counts of each part of the workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sizes {
    chunks: usize,
    seqs: usize,
    ops: usize,
    u: usize,
    decay: usize,
    hs: usize,
    vn: usize,
}

impl Sizes {
    /// What `chunks` chunks and `seqs` sequences of `hv` heads need.
    fn of(chunks: usize, seqs: usize, hv: usize, dk: usize, dv: usize) -> Sizes {
        let rows = chunks.max(1) * hv * CHUNK;
        let staged = dk <= STAGED_DK_MAX;
        Sizes {
            chunks: chunks.max(1),
            seqs,
            ops: rows * (3 * dk / CHUNK + 1) * CHUNK,
            u: rows * dv,
            decay: chunks.max(1) * hv,
            hs: if staged {
                chunks.max(1) * hv * dv * dk
            } else {
                0
            },
            vn: if staged { rows * dv } else { 0 },
        }
    }

    fn fits_in(&self, cap: &Sizes) -> bool {
        self.chunks <= cap.chunks
            && self.seqs <= cap.seqs
            && self.ops <= cap.ops
            && self.u <= cap.u
            && self.decay <= cap.decay
            && self.hs <= cap.hs
            && self.vn <= cap.vn
    }

    fn bytes(&self, dtype: DType) -> usize {
        let p = staging_dtype(dtype).size_bytes();
        // The decays and redo flags, two u32 per chunk, N + 1 sequence starts, two
        // one-element zero states.
        (self.ops + self.u + self.hs.max(1) + self.vn.max(1)) * p
            + self.decay * 8
            + (2 * self.chunks + self.seqs + 1) * 4
            + 4
            + dtype.size_bytes()
    }
}

impl PrefillShape<'_> {
    fn sizes(&self) -> Result<Sizes, OpError> {
        let plan = ChunkPlan::new(self.cu_seqlens)?;
        let s = Sizes::of(plan.chunks(), plan.seqs(), self.hv, self.dk, self.dv);
        fits_u32(OP, "the scratch size", s.ops.max(s.u).max(s.hs))?;
        Ok(s)
    }

    /// The bytes a workspace for this shape holds on the device.
    pub fn workspace_bytes(&self) -> Result<usize, OpError> {
        Ok(self.sizes()?.bytes(self.dtype))
    }
}

/// A prefill's workspace: scratch sized for the largest call it serves, and the chunk table
/// of the batch it is planned for. Calls of any shape that fits reuse it.
pub struct GdnPrefillWorkspace {
    dtype: DType,
    cap: Sizes,
    plan: ChunkPlan,
    pub(super) chunks: Tensor,
    pub(super) seq_chunks: Tensor,
    /// The planned boundaries as u32 `[seqs + 1]`, for the f32 token-by-token walk.
    pub(super) cu: Tensor,
    pub(super) ops: Tensor,
    pub(super) u: Tensor,
    pub(super) decay: Tensor,
    /// Per (chunk, value head): whether the chunked kernels saw a non-finite output there,
    /// so the pair is redone in f32.
    pub(super) redo: Tensor,
    pub(super) hs: Tensor,
    pub(super) vn: Tensor,
    zero_f32: Tensor,
    zero_act: Tensor,
}

impl GdnPrefillWorkspace {
    /// A workspace sized for `shape` and planned for its sequence boundaries.
    pub fn new(ctx: &Context, shape: &PrefillShape) -> Result<GdnPrefillWorkspace, OpError> {
        let cap = shape.sizes()?;
        let plan = ChunkPlan::new(shape.cu_seqlens)?;
        let p = staging_dtype(shape.dtype);
        let rt = runtime(OP);
        // The kernels write the scratch in full before reading it: no zero-fill.
        let ws = GdnPrefillWorkspace {
            dtype: shape.dtype,
            chunks: ctx.zeros(DType::U32, &[cap.chunks, 2]).map_err(&rt)?,
            seq_chunks: ctx.zeros(DType::U32, &[cap.seqs + 1]).map_err(&rt)?,
            cu: ctx.zeros(DType::U32, &[cap.seqs + 1]).map_err(&rt)?,
            ops: ctx.scratch(p, &[cap.ops]).map_err(&rt)?,
            u: ctx.scratch(p, &[cap.u]).map_err(&rt)?,
            decay: ctx.scratch(DType::F32, &[cap.decay]).map_err(&rt)?,
            // Zero until a chunked call writes them, so a diagnostic read is never garbage.
            redo: ctx.zeros(DType::U32, &[cap.decay]).map_err(&rt)?,
            hs: ctx.scratch(p, &[cap.hs.max(1)]).map_err(&rt)?,
            vn: ctx.scratch(p, &[cap.vn.max(1)]).map_err(&rt)?,
            zero_f32: ctx.zeros(DType::F32, &[1]).map_err(&rt)?,
            zero_act: ctx.zeros(shape.dtype, &[1]).map_err(&rt)?,
            cap,
            plan: plan.clone(),
        };
        ws.upload(&plan)?;
        Ok(ws)
    }

    /// Plans another batch (sequence boundaries `cu_seqlens`) into this workspace: uploads
    /// its chunk table. Refused, with nothing written, when it needs more chunks or
    /// sequences than the workspace holds.
    pub fn plan(&mut self, cu_seqlens: &[usize]) -> Result<(), OpError> {
        let plan = ChunkPlan::new(cu_seqlens)?;
        if plan.chunks().max(1) > self.cap.chunks || plan.seqs() > self.cap.seqs {
            return Err(OpError::invalid(
                OP,
                format!(
                    "these boundaries need {} chunks of {CHUNK} and {} sequences; the workspace holds {} and {}",
                    plan.chunks(),
                    plan.seqs(),
                    self.cap.chunks,
                    self.cap.seqs
                ),
            ));
        }
        self.upload(&plan)?;
        self.plan = plan;
        Ok(())
    }

    fn upload(&self, plan: &ChunkPlan) -> Result<(), OpError> {
        let rt = runtime(OP);
        let mut table = plan.table.clone();
        table.resize(2 * self.cap.chunks, 0);
        let mut seqs = plan.seq_chunks.clone();
        seqs.resize(self.cap.seqs + 1, plan.chunks() as u32);
        let mut cu: Vec<u32> = plan.cu.iter().map(|&c| c as u32).collect();
        cu.resize(self.cap.seqs + 1, *cu.last().unwrap_or(&0));
        self.chunks.write(&table).map_err(&rt)?;
        self.seq_chunks.write(&seqs).map_err(&rt)?;
        self.cu.write(&cu).map_err(&rt)
    }

    /// The bytes this workspace holds on the device.
    pub fn bytes(&self) -> usize {
        self.cap.bytes(self.dtype)
    }

    /// The sequence boundaries it is planned for.
    pub fn cu_seqlens(&self) -> &[usize] {
        &self.plan.cu
    }

    /// The (chunk, value head) pairs the last f16/bf16 prefill in this workspace found
    /// non-finite (a NaN or ∞ in its data or past the f16 staging's range), whose
    /// (sequence, value head) it therefore redid token by token in f32. Reads the flags back
    /// from the device: a diagnostic, not for the hot path.
    pub fn redone_chunks(&self, hv: usize) -> Result<Vec<(usize, usize)>, OpError> {
        let n = self.plan.chunks() * hv;
        if n > self.cap.decay {
            return Err(OpError::invalid(
                OP,
                format!(
                    "Hv = {hv} does not fit this workspace's {} chunk flags",
                    self.cap.decay
                ),
            ));
        }
        let flags = self.redo.to_vec::<u32>().map_err(runtime(OP))?;
        Ok((0..n)
            .filter(|&i| flags[i] != 0)
            .map(|i| (i / hv, i % hv))
            .collect())
    }

    /// Chunks of the planned batch.
    pub(super) fn n_chunks(&self) -> usize {
        self.plan.chunks()
    }

    /// A zero state of `dtype` (bound where there is no initial state; never read).
    pub(super) fn zero_state(&self, dtype: DType) -> &Tensor {
        if dtype == DType::F32 {
            &self.zero_f32
        } else {
            &self.zero_act
        }
    }

    /// Checks the workspace serves a call on `ctx` with activations of `dtype`, `hv` value
    /// heads and head sizes `dk`, `dv`.
    pub(super) fn check(
        &self,
        op: &'static str,
        ctx: &Context,
        dtype: DType,
        hv: usize,
        dk: usize,
        dv: usize,
    ) -> Result<(), OpError> {
        if !ctx.owns(&self.chunks) {
            return Err(OpError::invalid(
                op,
                "the workspace was made on another context; make it with GdnPrefillWorkspace::new on this one",
            ));
        }
        if dtype != self.dtype {
            return Err(OpError::invalid(
                op,
                format!(
                    "the workspace is for {} activations, this call's are {dtype}",
                    self.dtype
                ),
            ));
        }
        let need = Sizes::of(self.plan.chunks(), self.plan.seqs(), hv, dk, dv);
        if !need.fits_in(&self.cap) {
            return Err(OpError::invalid(
                op,
                format!(
                    "the workspace holds {} bytes, this call needs {} (Hv = {hv}, Dk = {dk}, Dv = {dv}, {} chunks); \
                     make it with GdnPrefillWorkspace::new for the largest shape",
                    self.bytes(),
                    need.bytes(dtype),
                    self.plan.chunks()
                ),
            ));
        }
        Ok(())
    }
}
