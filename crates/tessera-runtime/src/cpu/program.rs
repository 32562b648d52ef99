//! A kernel prepared for the interpreter: register slots for every value, the values that
//! are the same for a whole launch (constants, scalar parameters, thread builtins), and a
//! structural check so malformed IR is an error instead of a panic.

use crate::backend::BackendKind;
use crate::error::{Result, RuntimeError};
use tessera_ir::{Block, Builtin, Inst, Kernel, MemRef, Op, ParamKind, Scalar, Type, ValueId};

/// Where a value lives in the register file and what it holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SlotInfo {
    /// First register slot (a vector of width w uses w consecutive slots).
    pub slot: u32,
    pub elem: Scalar,
    pub width: u8,
}

/// A value computed once per launch or per threadgroup instead of at its instruction.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hoisted {
    Const(u32, u32),
    Param(u32, u32),
    Builtin(u32, Builtin),
}

/// The interpreter's view of a kernel.
pub(crate) struct Program {
    pub kernel: Kernel,
    pub name: String,
    pub values: Vec<SlotInfo>,
    pub slots: usize,
    /// Constants, scalar parameters and builtins, filled before a threadgroup runs.
    pub hoisted: Vec<Hoisted>,
}

fn malformed(kernel: &Kernel, msg: String) -> RuntimeError {
    RuntimeError::Backend {
        backend: BackendKind::Cpu,
        message: format!("kernel `{}` is malformed: {msg}", kernel.specialized_name()),
    }
}

impl Program {
    pub fn new(kernel: Kernel) -> Result<Program> {
        let mut values = Vec::with_capacity(kernel.body.values.len());
        let mut slots = 0u32;
        for ty in &kernel.body.values {
            let (elem, width) = match *ty {
                Type::Scalar(s) => (s, 1u8),
                Type::Vector(s, w) => (s, w.max(1)),
            };
            values.push(SlotInfo {
                slot: slots,
                elem,
                width,
            });
            slots += width as u32;
        }
        let mut p = Program {
            name: kernel.specialized_name(),
            values,
            slots: slots as usize,
            hoisted: Vec::new(),
            kernel: Kernel {
                name: String::new(),
                params: Vec::new(),
                specialization: Vec::new(),
                occupancy: None,
                body: Default::default(),
            },
        };
        let mut hoisted = Vec::new();
        p.check_block(&kernel, &kernel.body.block, &mut hoisted)?;
        p.hoisted = hoisted;
        p.kernel = kernel;
        Ok(p)
    }

    pub fn info(&self, v: ValueId) -> SlotInfo {
        self.values[v.index()]
    }

    fn check_value(&self, k: &Kernel, v: ValueId) -> Result<()> {
        if v.index() >= self.values.len() {
            return Err(malformed(k, format!("value {v} is not in the value table")));
        }
        Ok(())
    }

    fn check_mem(&self, k: &Kernel, m: MemRef) -> Result<()> {
        let ok = match m {
            MemRef::Param(i) => matches!(
                k.params.get(i as usize).map(|p| p.kind),
                Some(ParamKind::Tensor { .. })
            ),
            MemRef::Shared(i) => (i as usize) < k.body.shared.len(),
            MemRef::Local(i) => (i as usize) < k.body.locals.len(),
            MemRef::Arg(_) => false,
        };
        if !ok {
            return Err(malformed(k, format!("`{m}` names no tensor or array")));
        }
        Ok(())
    }

    fn check_frag(&self, k: &Kernel, f: u32) -> Result<()> {
        if (f as usize) >= k.body.frags.len() {
            return Err(malformed(k, format!("matrix fragment {f} is not declared")));
        }
        Ok(())
    }

    fn check_block(&self, k: &Kernel, b: &Block, hoisted: &mut Vec<Hoisted>) -> Result<()> {
        for &a in b.args.iter().chain(&b.yields) {
            self.check_value(k, a)?;
        }
        for inst in &b.insts {
            self.check_inst(k, inst, hoisted)?;
        }
        Ok(())
    }

    fn check_inst(&self, k: &Kernel, inst: &Inst, hoisted: &mut Vec<Hoisted>) -> Result<()> {
        for &r in &inst.results {
            self.check_value(k, r)?;
        }
        for v in inst.op.operands() {
            self.check_value(k, v)?;
            if inst.results.contains(&v) {
                return Err(malformed(k, format!("{v} is both an operand and a result")));
            }
        }
        let one = || -> Result<u32> {
            match inst.results.as_slice() {
                [r] => Ok(self.values[r.index()].slot),
                _ => Err(malformed(
                    k,
                    format!(
                        "`{}` must have one result",
                        tessera_ir::verify::op_name(&inst.op)
                    ),
                )),
            }
        };
        match &inst.op {
            Op::Const(l) => hoisted.push(Hoisted::Const(one()?, l.to_bits())),
            Op::Param(i) => {
                if !matches!(
                    k.params.get(*i as usize).map(|p| p.kind),
                    Some(ParamKind::Scalar(_))
                ) {
                    return Err(malformed(
                        k,
                        format!("`param {i}` is not a scalar parameter"),
                    ));
                }
                hoisted.push(Hoisted::Param(one()?, *i))
            }
            Op::Builtin(b) => hoisted.push(Hoisted::Builtin(one()?, *b)),
            Op::Load { mem, .. }
            | Op::Store { mem, .. }
            | Op::VecLoad { mem, .. }
            | Op::VecStore { mem, .. }
            | Op::Atomic { mem, .. } => self.check_mem(k, *mem)?,
            Op::FragLoad { frag, mem, .. } | Op::FragStore { frag, mem, .. } => {
                self.check_mem(k, *mem)?;
                self.check_frag(k, *frag)?;
            }
            op if op.is_frag() => {
                for f in op.frags() {
                    self.check_frag(k, f)?;
                }
            }
            Op::Extract(v, lane) if *lane >= self.values[v.index()].width => {
                return Err(malformed(
                    k,
                    format!("`extract {v}.{lane}` reads past the vector's width"),
                ));
            }
            Op::Pack(vs) => {
                one()?;
                let w = self.values[inst.results[0].index()].width;
                if w as usize != vs.len() {
                    return Err(malformed(k, "`pack` width differs from its result".into()));
                }
            }
            Op::If {
                then_block,
                else_block,
                ..
            } => {
                for b in [then_block, else_block] {
                    if b.yields.len() != inst.results.len() {
                        return Err(malformed(k, "`if` yields and results differ".into()));
                    }
                    self.check_block(k, b, hoisted)?;
                }
            }
            Op::For { inits, body, .. } => {
                if body.args.len() != inits.len() + 1
                    || body.yields.len() != inits.len()
                    || inst.results.len() != inits.len()
                {
                    return Err(malformed(
                        k,
                        "`for` args, yields, inits and results differ in number".into(),
                    ));
                }
                self.check_block(k, body, hoisted)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The name of a memory reference for messages.
    pub fn mem_name(&self, m: MemRef) -> String {
        let k = &self.kernel;
        match m {
            MemRef::Param(i) => k.params.get(i as usize).map(|p| p.name.clone()),
            MemRef::Shared(i) => k.body.shared.get(i as usize).map(|a| a.name.clone()),
            MemRef::Local(i) => k.body.locals.get(i as usize).map(|a| a.name.clone()),
            MemRef::Arg(_) => None,
        }
        .unwrap_or_else(|| m.to_string())
    }

    /// A short description of an instruction: `store out[%12]`, `simd_sum %4`.
    pub fn describe(&self, inst: &Inst) -> String {
        let name = tessera_ir::verify::op_name(&inst.op);
        match &inst.op {
            Op::Load { mem, index }
            | Op::Store { mem, index, .. }
            | Op::VecLoad { mem, index, .. }
            | Op::VecStore { mem, index, .. }
            | Op::Atomic { mem, index, .. } => {
                let space = match mem {
                    MemRef::Param(_) => "",
                    MemRef::Shared(_) => "shared ",
                    MemRef::Local(_) => "local ",
                    MemRef::Arg(_) => "argument ",
                };
                format!("{name} {space}{}[{index}]", self.mem_name(*mem))
            }
            op => {
                let ops: Vec<String> = op.operands().iter().map(|v| v.to_string()).collect();
                if ops.is_empty() {
                    name.to_string()
                } else {
                    format!("{name} {}", ops.join(", "))
                }
            }
        }
    }

    /// The instruction defining `v`, for poison-origin messages.
    pub fn defining_inst(&self, v: ValueId) -> Option<&Inst> {
        find_inst(&self.kernel.body.block, v)
    }
}

fn find_inst(b: &Block, v: ValueId) -> Option<&Inst> {
    for i in &b.insts {
        if i.results.contains(&v) {
            return Some(i);
        }
        for blk in i.op.blocks() {
            if let Some(f) = find_inst(blk, v) {
                return Some(f);
            }
        }
    }
    None
}
