//! The CUDA C dialect of the C-family emitter: the `extern "C" __global__` entry (tensor
//! pointers and runtime scalars in `Kernel::params` order), threadgroup arrays as
//! `__shared__` (dynamic above [`STATIC_SHARED_LIMIT`]), vectors as the prelude's aligned
//! structs, warp collectives and lane shuffles as generated helpers, and fragments as
//! `mma.sync` registers.

use super::helpers::{define, helper_name, Helper, ShuffleKindKey, SimdOpKey};
use super::names::{ident, literal, scalar_type, vector_type};
use super::{prelude, uses_scalar, CudaSource, NVRTC_OPTIONS};
use crate::c_family::{plain_copy, AsyncCopy, Dialect, Emitter, Idents, Mem, Val, R};
use std::collections::{BTreeSet, HashSet};
use std::fmt::Write;
use tessera_ir::{
    AtomicOp, Builtin, Kernel, Literal, ParamKind, Scalar, ShuffleKind, SimdOp, ValueId,
};

/// Threadgroup memory above this many bytes is declared dynamic (`extern __shared__`),
/// which the launch must opt into; below it, arrays are static `__shared__`.
pub const STATIC_SHARED_LIMIT: usize = 48 * 1024;

/// The helpers the body calls, collected while it is emitted.
#[derive(Default)]
pub(crate) struct Cuda {
    helpers: BTreeSet<Helper>,
}

/// Distinct identifiers for a list of names, each `prefix` + the sanitised name, with the
/// index appended where two would collide.
fn unique_idents<'a>(prefix: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .enumerate()
        .map(|(i, n)| {
            let mut id = ident(prefix, n);
            if !seen.insert(id.clone()) {
                id = format!("{id}_{i}");
                seen.insert(id.clone());
            }
            id
        })
        .collect()
}

/// All threadgroup memory, each array rounded up to 16 bytes, and whether it is dynamic.
fn shared_layout(k: &Kernel) -> (usize, bool) {
    let align = shared_align(k);
    let total: usize = k
        .body
        .shared
        .iter()
        .map(|a| a.size_bytes().next_multiple_of(align))
        .sum();
    (total, total > STATIC_SHARED_LIMIT)
}

/// The alignment of every threadgroup array: 16 bytes, or 1024 in a kernel with tile
/// products (a swizzled tile starts on a 1024-byte boundary of shared memory).
fn shared_align(k: &Kernel) -> usize {
    if k.uses_warpgroups() {
        1024
    } else {
        16
    }
}

impl Dialect for Cuda {
    type Output = CudaSource;
    const TARGET: &'static str = "CUDA";
    const INDENT: &'static str = "  ";
    const INLINE_VIEWS: bool = false;
    const STEP_TRAP: &'static str = "__trap();";
    const BARRIER: &'static str = "__syncthreads();";
    const SIMD_BARRIER: &'static str = "__syncwarp();";

    fn names(k: &Kernel) -> Idents {
        let b = &k.body;
        Idents {
            entry: ident("tessera_", &k.name),
            params: unique_idents("p_", k.params.iter().map(|p| p.name.as_str())),
            shared: unique_idents("s_", b.shared.iter().map(|a| a.name.as_str())),
            locals: unique_idents("l_", b.locals.iter().map(|a| a.name.as_str())),
            frags: unique_idents("f_", b.frags.iter().map(|f| f.name.as_str())),
        }
    }

    fn scalar_type(s: Scalar) -> &'static str {
        scalar_type(s)
    }

    fn literal(l: Literal) -> String {
        literal(l)
    }

    fn to_u32(x: &str) -> String {
        format!("(unsigned int){x}")
    }

    fn vector_type(&mut self, s: Scalar, width: u8) -> Option<String> {
        self.helpers.insert(Helper::Vector(s, width));
        Some(vector_type(s, width))
    }

    fn lane_of(var: &str, k: usize) -> String {
        format!("{var}.e[{k}]")
    }

    fn builtin(_: &mut Emitter<Self>, b: Builtin) -> String {
        match b {
            Builtin::ThreadId => "threadIdx.x",
            Builtin::GroupSize => "blockDim.x",
            Builtin::GroupIdX => "blockIdx.x",
            Builtin::GroupIdY => "blockIdx.y",
            Builtin::GroupIdZ => "blockIdx.z",
            Builtin::NumGroupsX => "gridDim.x",
            Builtin::NumGroupsY => "gridDim.y",
            Builtin::NumGroupsZ => "gridDim.z",
            Builtin::GlobalId => "blockIdx.x * blockDim.x + threadIdx.x",
            Builtin::SimdLane => "threadIdx.x & 31u",
            Builtin::SimdId => "threadIdx.x >> 5",
            Builtin::SimdGroups => "(blockDim.x + 31u) >> 5",
        }
        .to_string()
    }

    fn prologue(e: &mut Emitter<Self>) -> R<()> {
        // Threadgroup arrays: static up to the default limit, one dynamic block above it.
        let (_, dynamic) = shared_layout(e.k);
        let align = shared_align(e.k);
        let mut decls = Vec::new();
        let mut offset = 0usize;
        if dynamic {
            decls.push(format!(
                "extern __shared__ __attribute__((aligned({align}))) unsigned char ts_smem[];"
            ));
        }
        for (a, n) in e.k.body.shared.iter().zip(&e.names.shared) {
            let t = scalar_type(a.elem);
            if dynamic {
                decls.push(format!(
                    "{t}* const {n} = reinterpret_cast<{t}*>(ts_smem + {offset}); // {} x {}",
                    a.len, a.elem
                ));
                offset += a.size_bytes().next_multiple_of(align);
            } else {
                decls.push(format!(
                    "__shared__ __attribute__((aligned({align}))) {t} {n}[{}];",
                    a.len
                ));
            }
        }
        for (a, n) in e.k.body.locals.iter().zip(&e.names.locals) {
            decls.push(format!(
                "__attribute__((aligned(16))) {} {n}[{}];",
                scalar_type(a.elem),
                a.len
            ));
        }
        decls.extend(Self::frag_decls(e));
        for d in &decls {
            e.line(d);
        }
        e.line("TS_AFTER_PREVIOUS_GRID();");
        Ok(())
    }

    fn finish(e: Emitter<Self>) -> R<CudaSource> {
        let k = e.k;
        let mut sig = Vec::new();
        for (p, n) in k.params.iter().zip(&e.names.params) {
            sig.push(match p.kind {
                ParamKind::Tensor {
                    elem,
                    writable: false,
                } => format!("const {}* __restrict__ {n}", scalar_type(elem)),
                ParamKind::Tensor {
                    elem,
                    writable: true,
                } => format!("{}* {n}", scalar_type(elem)),
                ParamKind::Scalar(s) => format!("const {} {n}", scalar_type(s)),
            });
        }
        let mut source = String::new();
        source.push_str("// Generated by Tessera from ");
        source.push_str(&k.specialized_name());
        source.push_str(". Self-contained: needs no CUDA headers.\n");
        source.push_str(prelude::CORE);
        if uses_scalar(k, Scalar::F16) {
            source.push_str(prelude::F16);
        }
        if uses_scalar(k, Scalar::BF16) {
            source.push_str(prelude::BF16);
        }
        if uses_async_copies(k) {
            source.push_str(prelude::ASYNC_COPY);
        }
        if k.uses_warpgroups() {
            source.push_str(prelude::TILE_MMA);
        }
        for &h in &e.d.helpers {
            define(h, &mut source);
        }
        let _ = writeln!(source, "// {}", k.specialized_name());
        // A declared occupancy caps the registers per thread, so that many groups fit.
        let bounds = k
            .occupancy
            .map(|o| {
                format!(
                    "__launch_bounds__({}, {}) ",
                    o.group_size, o.groups_per_core
                )
            })
            .unwrap_or_default();
        let entry = e.names.entry;
        let _ = writeln!(source, "extern \"C\" __global__ void {bounds}{entry}(");
        let _ = writeln!(source, "    {}) {{", sig.join(",\n    "));
        source.push_str(&e.out);
        source.push_str("}\n");
        let (total, dynamic) = shared_layout(k);
        Ok(CudaSource {
            source,
            entry,
            static_shared_bytes: if dynamic { 0 } else { total },
            dynamic_shared_bytes: if dynamic { total } else { 0 },
            uses_simdgroups: k.uses_simdgroups(),
            options: NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect(),
        })
    }

    fn vec_load(e: &mut Emitter<Self>, r: ValueId, m: &Mem, i: &str) -> R<()> {
        let width = e.ty(r)?.width();
        let vt = e.d.vector_type(m.elem, width as u8).unwrap_or_default();
        let n = format!("v{}", r.0);
        e.line(&format!(
            "const {vt} {n} = *reinterpret_cast<const {vt}*>(&{}[{i}]);",
            m.name
        ));
        let lanes = (0..width).map(|k| Self::lane_of(&n, k)).collect();
        e.bind(
            r,
            Val {
                lanes,
                var: Some(n),
            },
        )
    }

    fn vec_store(e: &mut Emitter<Self>, m: &Mem, i: &str, value: ValueId) -> R<()> {
        let v = e.value(value)?.clone();
        let Some(var) = v.var else {
            return Err(e.malformed("a vector stored whole has no variable"));
        };
        let vt =
            e.d.vector_type(m.elem, v.lanes.len() as u8)
                .unwrap_or_default();
        e.line(&format!(
            "*reinterpret_cast<{vt}*>(&{}[{i}]) = {var};",
            m.name
        ));
        Ok(())
    }

    fn atomic(e: &mut Emitter<Self>, op: AtomicOp, m: &Mem, i: &str, v: &str) -> R<String> {
        let ok = match op {
            AtomicOp::Add | AtomicOp::Exchange => {
                matches!(m.elem, Scalar::F32 | Scalar::U32 | Scalar::I32)
            }
            _ => matches!(m.elem, Scalar::U32 | Scalar::I32),
        };
        if !ok {
            return Err(e.unsupported(format!("`{}` on {}", op.name(), m.elem)));
        }
        let f = match op {
            AtomicOp::Add => "atomicAdd",
            AtomicOp::Max => "atomicMax",
            AtomicOp::Min => "atomicMin",
            AtomicOp::And => "atomicAnd",
            AtomicOp::Or => "atomicOr",
            AtomicOp::Exchange => "atomicExch",
        };
        Ok(format!("{f}(&{}[{i}], {v})", m.name))
    }

    fn simd(e: &mut Emitter<Self>, op: SimdOp, t: Scalar, x: &str) -> R<String> {
        let h = Helper::Simd(SimdOpKey::new(op), t);
        e.d.helpers.insert(h);
        Ok(format!("{}({x})", helper_name(h)))
    }

    fn shuffle(
        e: &mut Emitter<Self>,
        kind: ShuffleKind,
        t: Scalar,
        x: &str,
        a: &str,
        arg_const: Option<u32>,
    ) -> R<String> {
        // A constant delta below 32 maps onto the hardware's up / down exactly.
        let native = matches!(kind, ShuffleKind::Up | ShuffleKind::Down)
            && arg_const.is_some_and(|d| d < 32);
        let h = Helper::Shuffle {
            kind: ShuffleKindKey::new(kind),
            ty: t,
            native,
        };
        e.d.helpers.insert(h);
        Ok(format!("{}({x}, {a})", helper_name(h)))
    }

    /// `cp.async` from sm_80 (a source size of 0 where the zero-fill flag is false), the
    /// plain copy before.
    fn copy_async(e: &mut Emitter<Self>, c: &AsyncCopy<'_>) {
        let bytes = c.width as usize * c.dst.elem.size_bytes();
        let size = match c.valid {
            Some(v) => format!("({v}) ? {bytes}u : 0u"),
            None => format!("{bytes}u"),
        };
        e.line("#if TS_CP_ASYNC");
        e.line(&format!(
            "ts_cp_async{bytes}(&{}[{}], &{}[{}], {size});",
            c.dst.name, c.dst_index, c.src.name, c.src_index
        ));
        e.line("#else");
        plain_copy(e, c);
        e.line("#endif");
    }

    fn commit_copies(e: &mut Emitter<Self>) {
        e.line("TS_CP_ASYNC_COMMIT();");
    }

    fn wait_copies(e: &mut Emitter<Self>, pending: u32) {
        e.line(&format!("TS_CP_ASYNC_WAIT({pending});"));
    }
}

/// True if the kernel issues, commits or waits for asynchronous copies.
fn uses_async_copies(k: &Kernel) -> bool {
    let mut any = false;
    k.body.block.walk(&mut |i| any |= i.op.is_async_copy());
    any
}
