//! The MSL dialect of the C-family emitter: Metal's types (`half`, `bfloat`, vectors of at
//! most 4 lanes, so a vector value is one variable per lane), address-space qualifiers,
//! thread positions as `[[…]]` attributes of the `kernel void` entry, `simd_*`
//! collectives, `simdgroup_matrix` fragments and the few helpers whose Metal expression
//! would not have the IR's meaning.

use super::helpers::Helper;
use super::names::Names;
use super::source::{MslArg, MslBuiltin, MslSource};
use super::types::{as_f32, from_f32, literal, scalar, vector};
use crate::c_family::{Dialect, Emitter, Idents, Mem, Space, Val, R};
use std::collections::BTreeSet;
use std::fmt::Write;
use tessera_ir::{
    AtomicOp, Builtin, Kernel, Literal, ParamKind, Scalar, ShuffleKind, SimdOp, ValueId,
};

/// What the MSL dialect collects while the body is emitted.
#[derive(Default)]
pub(crate) struct Msl {
    pub(super) helpers: BTreeSet<Helper>,
    builtins: BTreeSet<MslBuiltin>,
    /// The body reads the global thread index.
    uses_global_id: bool,
}

/// The local holding `group_id_x * group_size + thread_id` (wrapping).
const GLOBAL_ID: &str = "tsr_gid";

impl Msl {
    pub(super) fn builtin(&mut self, b: MslBuiltin) -> &'static str {
        self.builtins.insert(b);
        b.var()
    }
}

fn space_kw(space: Space) -> &'static str {
    match space {
        Space::Device => "device",
        Space::Threadgroup => "threadgroup",
        Space::Thread => "thread",
    }
}

/// The chunks (offset, width) a vector access of `width` elements is split into: MSL
/// vectors have at most 4 elements.
fn chunks(width: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < width {
        let w = match width - off {
            n if n >= 4 => 4,
            n if n >= 2 => 2,
            _ => 1,
        };
        out.push((off, w));
        off += w;
    }
    out
}

impl Dialect for Msl {
    type Output = MslSource;
    const TARGET: &'static str = "MSL";
    const INDENT: &'static str = "    ";
    const INLINE_VIEWS: bool = true;
    // TESSERA_TRAP is a no-op on Metal (the loop is skipped); the emulator reports it.
    const STEP_TRAP: &'static str = "TESSERA_TRAP(2);";
    const BARRIER: &'static str =
        "threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);";
    const SIMD_BARRIER: &'static str = "simdgroup_barrier(mem_flags::mem_threadgroup);";

    fn names(k: &Kernel) -> Idents {
        let mut names = Names::default();
        let entry = names.fresh(&k.name);
        let params = k.params.iter().map(|p| names.fresh(&p.name)).collect();
        let mut arrays = |prefix: &str, list: &[tessera_ir::ArrayDecl]| -> Vec<String> {
            list.iter()
                .map(|a| names.fresh(&format!("{prefix}{}", a.name)))
                .collect()
        };
        let shared = arrays("tg_", &k.body.shared);
        let locals = arrays("loc_", &k.body.locals);
        let frags = k
            .body
            .frags
            .iter()
            .map(|f| names.fresh(&format!("frag_{}", f.name)))
            .collect();
        Idents {
            entry,
            params,
            shared,
            locals,
            frags,
        }
    }

    fn scalar_type(s: Scalar) -> &'static str {
        scalar(s)
    }

    fn literal(l: Literal) -> String {
        literal(l)
    }

    fn to_u32(x: &str) -> String {
        format!("uint({x})")
    }

    fn vector_type(&mut self, _: Scalar, _: u8) -> Option<String> {
        None
    }

    fn lane_of(var: &str, k: usize) -> String {
        format!("{var}[{k}]")
    }

    fn builtin(e: &mut Emitter<Self>, b: Builtin) -> String {
        use MslBuiltin as M;
        let d = &mut e.d;
        match b {
            Builtin::ThreadId => format!("{}.x", d.builtin(M::ThreadPositionInThreadgroup)),
            Builtin::GroupSize => format!("{}.x", d.builtin(M::ThreadsPerThreadgroup)),
            Builtin::GroupIdX => format!("{}.x", d.builtin(M::ThreadgroupPositionInGrid)),
            Builtin::GroupIdY => format!("{}.y", d.builtin(M::ThreadgroupPositionInGrid)),
            Builtin::GroupIdZ => format!("{}.z", d.builtin(M::ThreadgroupPositionInGrid)),
            Builtin::NumGroupsX => format!("{}.x", d.builtin(M::ThreadgroupsPerGrid)),
            Builtin::NumGroupsY => format!("{}.y", d.builtin(M::ThreadgroupsPerGrid)),
            Builtin::NumGroupsZ => format!("{}.z", d.builtin(M::ThreadgroupsPerGrid)),
            Builtin::GlobalId => {
                d.builtin(M::ThreadgroupPositionInGrid);
                d.builtin(M::ThreadsPerThreadgroup);
                d.builtin(M::ThreadPositionInThreadgroup);
                d.uses_global_id = true;
                GLOBAL_ID.to_string()
            }
            Builtin::SimdLane => d.builtin(M::ThreadIndexInSimdgroup).to_string(),
            Builtin::SimdId => d.builtin(M::SimdgroupIndexInThreadgroup).to_string(),
            Builtin::SimdGroups => d.builtin(M::SimdgroupsPerThreadgroup).to_string(),
        }
    }

    fn prologue(e: &mut Emitter<Self>) -> R<()> {
        // Threadgroup and stack arrays are declared first, at the top of the body.
        for (a, name) in e.k.body.shared.iter().zip(e.names.shared.clone()) {
            e.line(&format!(
                "TESSERA_THREADGROUP_ARRAY {} {name}[{}];",
                scalar(a.elem),
                a.len
            ));
        }
        for (a, name) in e.k.body.locals.iter().zip(e.names.locals.clone()) {
            e.line(&format!("{} {name}[{}];", scalar(a.elem), a.len));
        }
        Self::frag_decls(e);
        Ok(())
    }

    fn finish(e: Emitter<Self>) -> R<MslSource> {
        let k = e.k;
        let mut body = e.out;
        if e.d.uses_global_id {
            body.insert_str(
                0,
                &format!("    const uint {GLOBAL_ID} = tsr_tgid.x * tsr_tpg.x + tsr_tid.x;\n"),
            );
        }
        let mut args = Vec::new();
        let mut sig = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            let name = e.names.params[i].clone();
            match p.kind {
                ParamKind::Tensor { elem, writable } => {
                    let c = if writable { "" } else { "const " };
                    sig.push(format!(
                        "{c}device {}* {name} [[buffer({i})]]",
                        scalar(elem)
                    ));
                    args.push(MslArg::Tensor {
                        param: i,
                        buffer: i as u32,
                        elem,
                        writable,
                        name,
                    });
                }
                ParamKind::Scalar(ty) => {
                    sig.push(format!("constant {}& {name} [[buffer({i})]]", scalar(ty)));
                    args.push(MslArg::Scalar {
                        param: i,
                        buffer: i as u32,
                        ty,
                        name,
                    });
                }
            }
        }
        for &b in &e.d.builtins {
            let ty = if b.is_vector() { "uint3" } else { "uint" };
            sig.push(format!("{ty} {} [[{}]]", b.var(), b.attribute()));
            args.push(MslArg::Builtin(b));
        }
        let mut code = String::new();
        let _ = writeln!(
            code,
            "// {} — generated by Tessera from its IR.",
            k.specialized_name()
        );
        code.push_str(PRELUDE);
        for h in &e.d.helpers {
            code.push('\n');
            code.push_str(h.source());
        }
        code.push('\n');
        if let Some(o) = k.occupancy {
            let _ = write!(
                code,
                "[[max_total_threads_per_threadgroup({})]] ",
                o.group_size
            );
        }
        let _ = write!(code, "kernel void {}(", e.names.entry);
        for (i, s) in sig.iter().enumerate() {
            let sep = if i + 1 < sig.len() { "," } else { "" };
            let _ = write!(code, "\n    {s}{sep}");
        }
        code.push_str(")\n{\n");
        code.push_str(&body);
        code.push_str("}\n");
        Ok(MslSource {
            kernel_name: k.specialized_name(),
            entry: e.names.entry,
            code,
            args,
            threadgroup_bytes: k.body.shared_bytes(),
            uses_simdgroups: k.uses_simdgroups(),
        })
    }

    fn vec_load(e: &mut Emitter<Self>, r: ValueId, m: &Mem, i: &str) -> R<()> {
        let width = e.ty(r)?.width();
        let c = if m.writable { "" } else { "const " };
        let kw = space_kw(m.space);
        let base = format!("v{}", r.0);
        let mut lanes = Vec::new();
        let mut whole = None;
        let chunks = chunks(width);
        for &(off, w) in &chunks {
            let at = if off == 0 {
                i.to_string()
            } else {
                format!("{i} + {off}u")
            };
            let var = if chunks.len() == 1 {
                base.clone()
            } else {
                format!("{base}_{off}")
            };
            let vt = vector(m.elem, w);
            if w == 1 {
                e.line(&format!("const {vt} {var} = {}[{at}];", m.name));
                lanes.push(var);
            } else {
                e.line(&format!(
                    "const {vt} {var} = *(({c}{kw} {vt}*)({} + {at}));",
                    m.name
                ));
                lanes.extend((0..w).map(|k| Self::lane_of(&var, k)));
                if chunks.len() == 1 {
                    whole = Some(var);
                }
            }
        }
        e.bind(r, Val { lanes, var: whole })
    }

    fn vec_store(e: &mut Emitter<Self>, m: &Mem, i: &str, value: ValueId) -> R<()> {
        let kw = space_kw(m.space);
        let v = e.value(value)?.clone();
        if let Some(var) = &v.var {
            let vt = vector(m.elem, v.lanes.len());
            e.line(&format!("*(({kw} {vt}*)({} + {i})) = {var};", m.name));
            return Ok(());
        }
        for (off, w) in chunks(v.lanes.len()) {
            let at = if off == 0 {
                i.to_string()
            } else {
                format!("{i} + {off}u")
            };
            let parts = v.lanes[off..off + w].join(", ");
            if w == 1 {
                e.line(&format!("{}[{at}] = {parts};", m.name));
            } else {
                let vt = vector(m.elem, w);
                e.line(&format!(
                    "*(({kw} {vt}*)({} + {at})) = {vt}({parts});",
                    m.name
                ));
            }
        }
        Ok(())
    }

    fn atomic(e: &mut Emitter<Self>, op: AtomicOp, m: &Mem, i: &str, v: &str) -> R<String> {
        let kw = space_kw(m.space);
        let ptr = |atype: &str| format!("({kw} {atype}*)({} + {i})", m.name);
        let relaxed = "memory_order_relaxed";
        let int_atype = match m.elem {
            Scalar::U32 => Some("atomic_uint"),
            Scalar::I32 => Some("atomic_int"),
            _ => None,
        };
        Ok(match (op, m.elem, int_atype) {
            (AtomicOp::Add, Scalar::F32, _) if m.space == Space::Threadgroup => {
                e.d.helpers.insert(Helper::AtomicAddF32Threadgroup);
                format!("tsr_atomic_add_f32({}, {v})", ptr("atomic_uint"))
            }
            (AtomicOp::Add, Scalar::F32, _) => format!(
                "atomic_fetch_add_explicit({}, {v}, {relaxed})",
                ptr("atomic_float")
            ),
            (AtomicOp::Exchange, Scalar::F32, _) => format!(
                "as_type<float>(atomic_exchange_explicit({}, as_type<uint>({v}), {relaxed}))",
                ptr("atomic_uint")
            ),
            (AtomicOp::Exchange, _, Some(at)) => {
                format!("atomic_exchange_explicit({}, {v}, {relaxed})", ptr(at))
            }
            (_, _, Some(at)) => {
                let f = match op {
                    AtomicOp::Add => "add",
                    AtomicOp::Max => "max",
                    AtomicOp::Min => "min",
                    AtomicOp::And => "and",
                    AtomicOp::Or => "or",
                    AtomicOp::Exchange => "exchange",
                };
                format!("atomic_fetch_{f}_explicit({}, {v}, {relaxed})", ptr(at))
            }
            _ => return Err(e.unsupported(format!("`{}` on {} elements", op.name(), m.elem))),
        })
    }

    fn simd(e: &mut Emitter<Self>, op: SimdOp, t: Scalar, x: &str) -> R<String> {
        let f = match op {
            SimdOp::Sum => "simd_sum",
            SimdOp::Prod => "simd_product",
            SimdOp::Max => "simd_max",
            SimdOp::Min => "simd_min",
            SimdOp::And => "simd_and",
            SimdOp::Or => "simd_or",
            SimdOp::Xor => "simd_xor",
            SimdOp::PrefixSum => "simd_prefix_inclusive_sum",
            SimdOp::PrefixExclusiveSum => "simd_prefix_exclusive_sum",
            SimdOp::All => "simd_all",
            SimdOp::Any => "simd_any",
        };
        let bad = || e.unsupported(format!("`{}` on {t}", op.name()));
        Ok(match (op, t) {
            (SimdOp::All | SimdOp::Any, Scalar::Bool) => format!("{f}({x})"),
            (SimdOp::All | SimdOp::Any, _) => return Err(bad()),
            (SimdOp::And | SimdOp::Or | SimdOp::Xor, Scalar::Bool) => {
                format!("{f}(uint({x})) != 0u")
            }
            (SimdOp::And | SimdOp::Or | SimdOp::Xor, _) if t.is_float() => return Err(bad()),
            (_, Scalar::Bool) => return Err(bad()),
            (_, Scalar::F16 | Scalar::BF16) => from_f32(t, &format!("{f}({})", as_f32(t, x))),
            (_, Scalar::I8) => format!("char({f}(int({x})))"),
            (_, Scalar::U8) => format!("uchar({f}(uint({x})))"),
            _ => format!("{f}({x})"),
        })
    }

    fn shuffle(
        e: &mut Emitter<Self>,
        kind: ShuffleKind,
        t: Scalar,
        x: &str,
        a: &str,
        constant: Option<u32>,
    ) -> R<String> {
        // Carry every type through a type simd_shuffle takes on all Apple GPUs.
        let (into, back): (String, fn(&str) -> String) = match t {
            Scalar::F32 | Scalar::F16 | Scalar::I32 | Scalar::U32 => {
                (x.to_string(), |s| s.to_string())
            }
            Scalar::BF16 => (format!("uint(as_type<ushort>({x}))"), |s| {
                format!("as_type<bfloat>(ushort({s}))")
            }),
            Scalar::I8 => (format!("int({x})"), |s| format!("char({s})")),
            Scalar::U8 => (format!("uint({x})"), |s| format!("uchar({s})")),
            Scalar::Bool => (format!("uint({x})"), |s| format!("{s} != 0u")),
        };
        let call = match kind {
            ShuffleKind::Index => format!("simd_shuffle({into}, {a})"),
            ShuffleKind::Xor => format!("simd_shuffle_xor({into}, {a})"),
            // The IR keeps a lane's own value where the source lane is outside the
            // simdgroup, whatever the delta; Metal's intrinsics do for deltas below 32.
            ShuffleKind::Up if constant.is_some_and(|c| c < 32) => {
                format!("simd_shuffle_up({into}, {a})")
            }
            ShuffleKind::Down if constant.is_some_and(|c| c < 32) => {
                format!("simd_shuffle_down({into}, {a})")
            }
            ShuffleKind::Up => {
                let l = e.d.builtin(MslBuiltin::ThreadIndexInSimdgroup);
                format!("simd_shuffle({into}, {a} <= {l} ? {l} - {a} : {l})")
            }
            ShuffleKind::Down => {
                let l = e.d.builtin(MslBuiltin::ThreadIndexInSimdgroup);
                format!("simd_shuffle({into}, {a} < 32u - {l} ? {l} + {a} : {l})")
            }
        };
        Ok(back(&call))
    }
}

/// What the generated code relies on before the kernel: the Metal standard library, and two
/// hooks the Linux emulator redefines (they are no-ops or plain qualifiers on Metal).
const PRELUDE: &str = "#include <metal_stdlib>
using namespace metal;

// Reached where the IR's meaning is an error (integer division by zero, a non-positive
// loop step); the Linux emulator reports it, Metal carries on.
#ifndef TESSERA_TRAP
#define TESSERA_TRAP(code) ((void)0)
#endif
// Declares a threadgroup array (the emulator shares it between a threadgroup's threads).
#ifndef TESSERA_THREADGROUP_ARRAY
#define TESSERA_THREADGROUP_ARRAY threadgroup
#endif
";
