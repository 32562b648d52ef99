//! The containers of the IR: kernels, DSL functions, bodies, blocks and instructions.

use crate::ops::Op;
use crate::types::{Scalar, Type};
use std::fmt;

/// An SSA value: an index into its body's value table [`Body::values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Where in the kernel's Rust source an instruction came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loc {
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One instruction: an op and the values it defines.
#[derive(Clone, Debug)]
pub struct Inst {
    pub op: Op,
    pub results: Vec<ValueId>,
    pub loc: Option<Loc>,
}

impl Inst {
    /// The single result of a one-result instruction.
    pub fn result(&self) -> Option<ValueId> {
        match self.results.as_slice() {
            [r] => Some(*r),
            _ => None,
        }
    }
}

/// A region: arguments defined on entry, a list of instructions, and the values it yields
/// to the op that owns it.
#[derive(Clone, Debug, Default)]
pub struct Block {
    pub args: Vec<ValueId>,
    pub insts: Vec<Inst>,
    pub yields: Vec<ValueId>,
}

impl Block {
    /// Calls `f` on every instruction of this block and of the blocks nested in it, outer first.
    pub fn walk(&self, f: &mut impl FnMut(&Inst)) {
        for inst in &self.insts {
            f(inst);
            for b in inst.op.blocks() {
                b.walk(f);
            }
        }
    }

    /// True if any instruction here or nested satisfies `pred`.
    pub fn any(&self, pred: &mut impl FnMut(&Op) -> bool) -> bool {
        self.insts
            .iter()
            .any(|i| pred(&i.op) || i.op.blocks().iter().any(|b| b.any(pred)))
    }

    /// Number of instructions, nested ones included.
    pub fn count(&self) -> usize {
        let mut n = 0;
        self.walk(&mut |_| n += 1);
        n
    }
}

/// A fixed-size array: threadgroup memory or a per-thread stack array.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayDecl {
    pub name: String,
    pub elem: Scalar,
    pub len: u32,
}

impl ArrayDecl {
    pub fn size_bytes(&self) -> usize {
        self.elem.size_bytes() * self.len as usize
    }
}

/// The side of a multiply-accumulate a matrix fragment takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FragRole {
    /// The left operand `A` (`M×K`), f16 or bf16.
    A,
    /// The right operand `B` (`K×N`), f16 or bf16.
    B,
    /// The accumulator `C`/`D` (`M×N`), f32.
    Acc,
    /// A row vector: one f32 per row of a fragment (the running max or sum of a softmax
    /// over an accumulator's rows), spread over the lanes that hold each row. Filled with
    /// `FragFill`, written and read only by the row ops.
    Rows,
}

impl FragRole {
    pub fn name(self) -> &'static str {
        match self {
            FragRole::A => "a",
            FragRole::B => "b",
            FragRole::Acc => "acc",
            FragRole::Rows => "rows",
        }
    }

    /// Whether a fragment of this role may hold `elem`: operands f16 or bf16, accumulators
    /// and row vectors f32.
    pub fn holds(self, elem: Scalar) -> bool {
        match self {
            FragRole::A | FragRole::B => matches!(elem, Scalar::F16 | Scalar::BF16),
            FragRole::Acc | FragRole::Rows => elem == Scalar::F32,
        }
    }

    /// The element type memory of `mem` elements must hold for a fragment of this role
    /// and element type `elem` to load from it or store into it: `elem`, except that an
    /// accumulator also moves to and from f16/bf16 memory (widened on load, rounded to
    /// nearest even on store).
    pub fn memory_elem(self, elem: Scalar, mem: Scalar) -> Scalar {
        match mem {
            Scalar::F16 | Scalar::BF16 if self == FragRole::Acc => mem,
            _ => elem,
        }
    }
}

/// A matrix fragment: a [`FRAG_DIM`]×[`FRAG_DIM`] tile owned by a whole simdgroup,
/// distributed over its 32 lanes in a layout each backend chooses (registers for
/// `mma.sync` on CUDA, `simdgroup_matrix` on Metal, the whole tile per simdgroup on the
/// CPU). It is read and written only by the fragment ops, every lane of the simdgroup
/// together, so its layout is never observable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FragDecl {
    pub name: String,
    pub role: FragRole,
    pub elem: Scalar,
}

/// Rows and columns of every matrix fragment (and the `K` of one multiply-accumulate).
pub const FRAG_DIM: u32 = 16;

/// What a kernel or function body owns: the value table, its arrays and its top block.
#[derive(Clone, Debug, Default)]
pub struct Body {
    /// The type of every value, indexed by [`ValueId`].
    pub values: Vec<Type>,
    /// Threadgroup arrays, indexed by [`crate::MemRef::Shared`].
    pub shared: Vec<ArrayDecl>,
    /// Per-thread stack arrays, indexed by [`crate::MemRef::Local`].
    pub locals: Vec<ArrayDecl>,
    /// Matrix fragments, indexed by the `frag` fields of the fragment ops.
    pub frags: Vec<FragDecl>,
    pub block: Block,
}

impl Body {
    /// Type of a value.
    pub fn ty(&self, v: ValueId) -> Type {
        self.values[v.index()]
    }

    /// Adds a value of type `ty` to the table.
    pub fn new_value(&mut self, ty: Type) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(ty);
        id
    }

    /// Bytes of threadgroup memory the arrays declare.
    pub fn shared_bytes(&self) -> usize {
        self.shared.iter().map(ArrayDecl::size_bytes).sum()
    }
}

/// A kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A device tensor, read-only unless `writable`.
    Tensor { elem: Scalar, writable: bool },
    /// A scalar passed at launch (not baked into the code).
    Scalar(Scalar),
}

/// A kernel specialised for concrete dtypes and constexpr values: what every pass
/// transforms and every backend consumes.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub name: String,
    /// Tensors and runtime scalars, in declaration order. Constexprs are not here: they are
    /// constants in the body.
    pub params: Vec<Param>,
    /// The generic dtypes and constexpr values this kernel was built with, for printing
    /// and cache keys: `[("T", "f16"), ("n", "4096u32")]`.
    pub specialization: Vec<(String, String)>,
    /// The occupancy the kernel is compiled for, when it declares one.
    pub occupancy: Option<Occupancy>,
    pub body: Body,
}

/// A kernel's declared launch shape, `#[kernel(group_size = N, groups_per_core = M)]`:
/// it is launched with at most `group_size` threads per threadgroup, and the compiler
/// budgets registers so that `groups_per_core` threadgroups fit on one core (CUDA
/// `__launch_bounds__`, Metal `max_total_threads_per_threadgroup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Occupancy {
    pub group_size: u32,
    pub groups_per_core: u32,
}

/// The largest threadgroup any backend launches.
pub const MAX_GROUP_SIZE: u32 = 1024;

/// The most bytes of stack arrays one thread may hold: far above what a kernel keeps in
/// registers, low enough that every backend (and the CPU, with one copy per thread of a
/// threadgroup) can provide it.
pub const MAX_STACK_BYTES: usize = 64 * 1024;

impl Kernel {
    /// Index of the parameter with this name.
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// True if the kernel uses simdgroup collectives or threadgroup reductions, so its
    /// threadgroup size must be a positive multiple of 32.
    pub fn uses_simdgroups(&self) -> bool {
        self.body.block.any(&mut |op| {
            matches!(op, Op::Simd(..) | Op::Shuffle { .. } | Op::GroupReduce(..)) || op.is_frag()
        })
    }

    /// True if the kernel multiplies tiles on warpgroups ([`Op::FragMmaTiles`]), so its
    /// threadgroup size must be a positive multiple of 128.
    pub fn uses_warpgroups(&self) -> bool {
        self.body
            .block
            .any(&mut |op| matches!(op, Op::FragMmaTiles { .. }))
    }

    /// A readable identity of the specialisation: `rms_norm[T=f16, n=4096u32]`.
    pub fn specialized_name(&self) -> String {
        if self.specialization.is_empty() {
            return self.name.clone();
        }
        let parts: Vec<String> = self
            .specialization
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}[{}]", self.name, parts.join(", "))
    }
}

/// A reusable DSL function (`#[func]`): value arguments are `body.block.args`, memory
/// arguments `mems` (referenced as [`crate::MemRef::Arg`]), fragment arguments `frags`
/// (fragments of `body.frags` that stand for the caller's), return values
/// `body.block.yields`. Inlined into its callers by the compiler.
#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub body: Body,
    pub mems: Vec<MemArg>,
    pub frags: Vec<FragArg>,
    /// The order of the arguments as written: each a value (the next of `body.block.args`),
    /// memory (the next of `mems`) or fragments (the next of `frags`).
    pub order: Vec<ArgKind>,
}

/// A fragment argument of a DSL function: one matrix fragment (`len` `None`) or an array
/// of `len` fragments, of one role and element type. In the function's body they are the
/// fragments `first..first + count` of `body.frags`; a call names the caller's fragments
/// in their place, so what the function does to them the caller's fragments undergo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragArg {
    pub name: String,
    pub role: FragRole,
    pub elem: Scalar,
    pub len: Option<u32>,
    pub first: u32,
}

impl FragArg {
    /// How many fragments the argument stands for.
    pub fn count(&self) -> u32 {
        self.len.unwrap_or(1)
    }

    /// How the argument reads in the source: `MatrixAcc`, `[MatrixA<f16>; 4]`.
    pub fn describe(&self) -> String {
        describe_frags(self.role, self.elem, self.len)
    }
}

/// The DSL type of a fragment (`len` `None`) or fragment array: `MatrixAcc`,
/// `[MatrixB<bf16>; 8]`.
pub fn describe_frags(role: FragRole, elem: Scalar, len: Option<u32>) -> String {
    let one = match role {
        FragRole::A => format!("MatrixA<{elem}>"),
        FragRole::B => format!("MatrixB<{elem}>"),
        FragRole::Acc => "MatrixAcc".to_string(),
        FragRole::Rows => "MatrixRows".to_string(),
    };
    match len {
        None => one,
        Some(n) => format!("[{one}; {n}]"),
    }
}

/// A memory argument of a DSL function: any device, threadgroup or stack memory holding
/// `elem`; `writable` if the function stores to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemArg {
    pub name: String,
    pub elem: Scalar,
    pub writable: bool,
}

/// Whether a DSL function's argument is a value, memory or matrix fragments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    Value,
    Memory,
    Fragments,
}

impl Function {
    pub fn param_types(&self) -> Vec<Type> {
        self.body
            .block
            .args
            .iter()
            .map(|&v| self.body.ty(v))
            .collect()
    }

    pub fn return_types(&self) -> Vec<Type> {
        self.body
            .block
            .yields
            .iter()
            .map(|&v| self.body.ty(v))
            .collect()
    }
}
