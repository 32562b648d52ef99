//! The stable text form of the IR, used by `tessera emit --target ir`, snapshot tests and
//! `TESSERA_DUMP`.

use crate::kernel::{ArgKind, ArrayDecl, Block, Body, Function, Inst, Kernel, ParamKind};
use crate::ops::{MemRef, Op, TileA};
use std::fmt::{self, Write};

/// `kind name` of array `i` of `arrays`, or `<kind{i}>` where there is no such array.
fn array_name(arrays: &[ArrayDecl], kind: &str, i: u32) -> String {
    arrays
        .get(i as usize)
        .map(|a| format!("{kind} {}", a.name))
        .unwrap_or_else(|| format!("<{kind}{i}>"))
}

struct Printer<'a> {
    body: &'a Body,
    params: &'a [crate::kernel::Param],
    out: String,
}

impl Printer<'_> {
    fn mem(&self, m: MemRef) -> String {
        match m {
            MemRef::Param(i) => self
                .params
                .get(i as usize)
                .map(|p| p.name.clone())
                .unwrap_or_else(|| format!("<param{i}>")),
            MemRef::Shared(i) => array_name(&self.body.shared, "shared", i),
            MemRef::Local(i) => array_name(&self.body.locals, "local", i),
            MemRef::Arg(i) => format!("memarg{i}"),
        }
    }

    fn frag(&self, i: u32) -> String {
        self.body
            .frags
            .get(i as usize)
            .map(|f| format!("frag {}", f.name))
            .unwrap_or_else(|| format!("<frag{i}>"))
    }

    fn ty(&self, v: crate::ValueId) -> String {
        self.body
            .values
            .get(v.index())
            .map(|t| t.to_string())
            .unwrap_or_else(|| "?".into())
    }

    fn list(vs: &[crate::ValueId]) -> String {
        vs.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn block(&mut self, b: &Block, depth: usize) {
        for inst in &b.insts {
            self.inst(inst, depth);
        }
        if !b.yields.is_empty() {
            let pad = "  ".repeat(depth);
            let _ = writeln!(self.out, "{pad}yield {}", Self::list(&b.yields));
        }
    }

    fn inst(&mut self, inst: &Inst, depth: usize) {
        let pad = "  ".repeat(depth);
        let lhs = if inst.results.is_empty() {
            String::new()
        } else {
            let parts: Vec<String> = inst
                .results
                .iter()
                .map(|&r| format!("{r}: {}", self.ty(r)))
                .collect();
            format!("{} = ", parts.join(", "))
        };
        let rhs = match &inst.op {
            Op::Const(l) => format!("const {l}"),
            Op::Builtin(b) => format!("builtin {}", b.name()),
            Op::Param(i) => format!(
                "param {}",
                self.params
                    .get(*i as usize)
                    .map(|p| p.name.as_str())
                    .unwrap_or("?")
            ),
            Op::Unary(op, a) => format!("{} {a}", op.name()),
            Op::Binary(op, a, b) => format!("{} {a}, {b}", op.name()),
            Op::Fma(a, b, c) => format!("fma {a}, {b}, {c}"),
            Op::Select(c, a, b) => format!("select {c}, {a}, {b}"),
            Op::Cast(a, t) => format!("cast {a} to {t}"),
            Op::Bitcast(a, t) => format!("bitcast {a} to {t}"),
            Op::Load { mem, index } => format!("load {}[{index}]", self.mem(*mem)),
            Op::Store { mem, index, value } => {
                format!("store {}[{index}], {value}", self.mem(*mem))
            }
            Op::VecLoad { mem, index, width } => {
                format!("vload{width} {}[{index}]", self.mem(*mem))
            }
            Op::VecStore { mem, index, value } => {
                format!("vstore {}[{index}], {value}", self.mem(*mem))
            }
            Op::Extract(v, lane) => format!("extract {v}.{lane}"),
            Op::Pack(vs) => format!("pack {}", Self::list(vs)),
            Op::Atomic {
                op,
                mem,
                index,
                value,
            } => format!("{} {}[{index}], {value}", op.name(), self.mem(*mem)),
            Op::Barrier => "barrier".to_string(),
            Op::SimdBarrier => "simd_barrier".to_string(),
            Op::CopyAsync {
                dst,
                dst_index,
                src,
                src_index,
                width,
                valid,
            } => {
                let zfill = valid
                    .map(|v| format!(" if {v} else zero"))
                    .unwrap_or_default();
                format!(
                    "copy_async{width} {}[{dst_index}], {}[{src_index}]{zfill}",
                    self.mem(*dst),
                    self.mem(*src)
                )
            }
            Op::CommitCopies => "commit_copies".to_string(),
            Op::WaitCopies(n) => format!("wait_copies {n}"),
            Op::Simd(op, a) => format!("{} {a}", op.name()),
            Op::Shuffle { kind, value, arg } => format!("{} {value}, {arg}", kind.name()),
            Op::GroupReduce(op, a) => format!("{} {a}", op.name()),
            Op::Call {
                func,
                args,
                mems,
                frags,
            } => {
                let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
                all.extend(mems.iter().map(|&m| self.mem(m)));
                all.extend(frags.iter().map(|&f| self.frag(f)));
                format!("call {}({})", func.name, all.join(", "))
            }
            Op::FragFill { frag, value } => format!("frag_fill {}, {value}", self.frag(*frag)),
            Op::FragScale { frag, value } => format!("frag_scale {}, {value}", self.frag(*frag)),
            Op::FragLoad {
                frag,
                mem,
                index,
                stride,
                transpose,
            } => format!(
                "frag_load{} {}, {}[{index}], stride {stride}",
                if *transpose { "_t" } else { "" },
                self.frag(*frag),
                self.mem(*mem)
            ),
            Op::FragStore {
                frag,
                mem,
                index,
                stride,
            } => format!(
                "frag_store {}, {}[{index}], stride {stride}",
                self.frag(*frag),
                self.mem(*mem)
            ),
            Op::FragMma { d, a, b, c } => format!(
                "frag_mma {} = {} * {} + {}",
                self.frag(*d),
                self.frag(*a),
                self.frag(*b),
                self.frag(*c)
            ),
            Op::FragRowReduce { op, rows, frag } => {
                format!("{} {}, {}", op.name(), self.frag(*rows), self.frag(*frag))
            }
            Op::FragRowMap { op, frag, rows } => {
                format!("{} {}, {}", op.name(), self.frag(*frag), self.frag(*rows))
            }
            Op::FragMask {
                frag,
                diag,
                cap,
                value,
            } => format!(
                "matrix_mask {}, diag {diag}, cap {cap}, {value}",
                self.frag(*frag)
            ),
            Op::FragRows { op, d, a, b } => format!(
                "{} {} = {}, {}",
                op.name(),
                self.frag(*d),
                self.frag(*a),
                self.frag(*b)
            ),
            Op::FragRowsRaise { d, a, b, margin } => format!(
                "matrix_rows_raise {} = {}, {}, margin {margin}",
                self.frag(*d),
                self.frag(*a),
                self.frag(*b)
            ),
            Op::FragAdd { d, a, b } => format!(
                "matrix_add {} = {} + {}",
                self.frag(*d),
                self.frag(*a),
                self.frag(*b)
            ),
            Op::FragConvert { dst, src } => {
                format!("frag_convert {} = {}", self.frag(*dst), self.frag(*src))
            }
            Op::FragMmaWait { accs, pending } => {
                let accs: Vec<String> = accs.iter().map(|f| self.frag(*f)).collect();
                format!("matrix_mma_wait [{}], {pending}", accs.join(", "))
            }
            Op::FragMmaTiles {
                accs,
                a,
                b,
                b_index,
                asynchronous,
                b_kn,
            } => {
                let accs: Vec<String> = accs.iter().map(|f| self.frag(*f)).collect();
                let a = match a {
                    TileA::Tile { mem, index } => format!("{}[{index}]", self.mem(*mem)),
                    TileA::Frags(fa) => {
                        let fa: Vec<String> = fa.iter().map(|f| self.frag(*f)).collect();
                        format!("[{}]", fa.join(", "))
                    }
                };
                format!(
                    "matrix_mma_tiles{} [{}] += {a} · {}[{b_index}]ᵀ",
                    match (*b_kn, *asynchronous) {
                        (false, false) => "",
                        (false, true) => "_async",
                        (true, false) => "_kn",
                        (true, true) => "_kn_async",
                    },
                    accs.join(", "),
                    self.mem(*b)
                )
            }
            Op::If {
                cond,
                then_block,
                else_block,
            } => {
                let _ = writeln!(self.out, "{pad}{lhs}if {cond} {{");
                self.block(then_block, depth + 1);
                let _ = writeln!(self.out, "{pad}}} else {{");
                self.block(else_block, depth + 1);
                let _ = writeln!(self.out, "{pad}}}");
                return;
            }
            Op::For {
                bounds: [start, end, step],
                inits,
                body,
            } => {
                let iv = body.args.first().map(|v| v.to_string()).unwrap_or_default();
                let carried: Vec<String> = body
                    .args
                    .iter()
                    .skip(1)
                    .zip(inits)
                    .map(|(a, i)| format!("{a} = {i}"))
                    .collect();
                let iter = if carried.is_empty() {
                    String::new()
                } else {
                    format!(" carry({})", carried.join(", "))
                };
                let _ = writeln!(
                    self.out,
                    "{pad}{lhs}for {iv} in {start}..{end} step {step}{iter} {{"
                );
                self.block(body, depth + 1);
                let _ = writeln!(self.out, "{pad}}}");
                return;
            }
        };
        let _ = writeln!(self.out, "{pad}{lhs}{rhs}");
    }

    fn arrays(&mut self) {
        for a in &self.body.shared {
            let _ = writeln!(self.out, "  shared {}: {}[{}]", a.name, a.elem, a.len);
        }
        for a in &self.body.locals {
            let _ = writeln!(self.out, "  local {}: {}[{}]", a.name, a.elem, a.len);
        }
        for f in &self.body.frags {
            let d = crate::kernel::FRAG_DIM;
            if f.role == crate::kernel::FragRole::Rows {
                let _ = writeln!(self.out, "  frag {}: rows {}{d}", f.name, f.elem);
                continue;
            }
            let _ = writeln!(
                self.out,
                "  frag {}: {} {}{d}x{d}",
                f.name,
                f.role.name(),
                f.elem
            );
        }
    }
}

/// The text form of a kernel.
pub fn print_kernel(k: &Kernel) -> String {
    let params: Vec<String> = k
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Tensor { elem, writable } => format!(
                "{}: {}tensor<{elem}>",
                p.name,
                if writable { "mut " } else { "" }
            ),
            ParamKind::Scalar(t) => format!("{}: {t}", p.name),
        })
        .collect();
    let mut p = Printer {
        body: &k.body,
        params: &k.params,
        out: String::new(),
    };
    let occupancy = k
        .occupancy
        .map(|o| {
            format!(
                " [group_size {}, groups_per_core {}]",
                o.group_size, o.groups_per_core
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        p.out,
        "kernel {}({}){occupancy} {{",
        k.specialized_name(),
        params.join(", ")
    );
    p.arrays();
    p.block(&k.body.block, 1);
    p.out.push_str("}\n");
    p.out
}

/// The text form of a DSL function.
pub fn print_function(f: &Function) -> String {
    let mut p = Printer {
        body: &f.body,
        params: &[],
        out: String::new(),
    };
    // The arguments in the order written: values, memory (`memargN`) and fragments (named
    // as the body names them: `acc[0]`, …).
    let (mut values, mut mems, mut frags) = (
        f.body.block.args.iter(),
        f.mems.iter().enumerate(),
        f.frags.iter(),
    );
    let args: Vec<String> = f
        .order
        .iter()
        .filter_map(|kind| match kind {
            ArgKind::Value => values.next().map(|&a| format!("{a}: {}", p.ty(a))),
            ArgKind::Memory => mems.next().map(|(i, m)| {
                let w = if m.writable { "mut " } else { "" };
                format!("{w}memarg{i} {}: Mem<{}>", m.name, m.elem)
            }),
            ArgKind::Fragments => frags
                .next()
                .map(|g| format!("{}: {}", g.name, g.describe())),
        })
        .collect();
    let _ = writeln!(p.out, "func {}({}) {{", f.name, args.join(", "));
    p.arrays();
    p.block(&f.body.block, 1);
    p.out.push_str("}\n");
    p.out
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_kernel(self))
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_function(self))
    }
}
