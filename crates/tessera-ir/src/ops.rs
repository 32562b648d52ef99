//! The operations of the IR and their meaning, which every backend must implement alike.
//!
//! Semantics every backend follows:
//! - Integer arithmetic wraps. Division or remainder by zero is an error on the CPU backend
//!   and undefined on GPUs. Shift amounts are taken modulo the bit width.
//! - Arithmetic on f16 / bf16 values is computed in f32 and rounded back to the result type.
//! - Float `min` / `max` return the other operand when one is NaN (IEEE minNum / maxNum).
//! - Casts: float → int truncates toward zero and saturates (NaN → 0); int → float and
//!   float → narrower float round to nearest even; bool ↔ number is 0 / 1 and `!= 0`.
//! - Bitcasts reinterpret a value's bits as another numeric type of the same width.

use crate::kernel::{Block, Function, ValueId};
use crate::literal::Literal;
use crate::types::Scalar;
use std::fmt;
use std::sync::Arc;

/// Execution-model builtins. Each has exactly one meaning, whatever the kernel.
/// Threadgroups are one-dimensional; the grid of threadgroups is three-dimensional.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// Index of the thread within its threadgroup, `0..group_size`.
    ThreadId,
    /// Threads per threadgroup.
    GroupSize,
    /// Index of the threadgroup in the grid, per axis.
    GroupIdX,
    GroupIdY,
    GroupIdZ,
    /// Threadgroups in the grid, per axis.
    NumGroupsX,
    NumGroupsY,
    NumGroupsZ,
    /// `group_id_x * group_size + thread_id`.
    GlobalId,
    /// Lane within the simdgroup, `0..32`.
    SimdLane,
    /// Index of the simdgroup within the threadgroup.
    SimdId,
    /// Simdgroups per threadgroup, `ceil(group_size / 32)`.
    SimdGroups,
}

impl Builtin {
    pub const ALL: [Builtin; 12] = [
        Builtin::ThreadId,
        Builtin::GroupSize,
        Builtin::GroupIdX,
        Builtin::GroupIdY,
        Builtin::GroupIdZ,
        Builtin::NumGroupsX,
        Builtin::NumGroupsY,
        Builtin::NumGroupsZ,
        Builtin::GlobalId,
        Builtin::SimdLane,
        Builtin::SimdId,
        Builtin::SimdGroups,
    ];

    /// The DSL spelling (a call with no arguments: `thread_id()`).
    pub fn name(self) -> &'static str {
        match self {
            Builtin::ThreadId => "thread_id",
            Builtin::GroupSize => "group_size",
            Builtin::GroupIdX => "group_id_x",
            Builtin::GroupIdY => "group_id_y",
            Builtin::GroupIdZ => "group_id_z",
            Builtin::NumGroupsX => "num_groups_x",
            Builtin::NumGroupsY => "num_groups_y",
            Builtin::NumGroupsZ => "num_groups_z",
            Builtin::GlobalId => "global_id",
            Builtin::SimdLane => "simd_lane",
            Builtin::SimdId => "simd_id",
            Builtin::SimdGroups => "simd_groups",
        }
    }

    pub fn parse(s: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    /// Logical not on bool, bitwise not on integers.
    Not,
    Abs,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Recip,
    Sin,
    Cos,
    Tanh,
    Floor,
    Ceil,
    /// Float → bool.
    IsNan,
    /// Float → bool (either infinity).
    IsInf,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 17] = [
        UnaryOp::Neg,
        UnaryOp::Not,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Recip,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::IsNan,
        UnaryOp::IsInf,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Not => "not",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Exp2 => "exp2",
            UnaryOp::Log => "log",
            UnaryOp::Log2 => "log2",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Recip => "recip",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::IsNan => "is_nan",
            UnaryOp::IsInf => "is_inf",
        }
    }

    pub fn parse(s: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|o| o.name() == s)
    }

    /// True for the ops that only make sense on floats (everything but neg, not, abs).
    pub fn float_only(self) -> bool {
        !matches!(self, UnaryOp::Neg | UnaryOp::Not | UnaryOp::Abs)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    /// Floats only.
    Pow,
    /// Logical on bool, bitwise on integers.
    And,
    Or,
    Xor,
    /// Integers only; the amount is taken modulo the bit width.
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 19] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Min,
        BinaryOp::Max,
        BinaryOp::Pow,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Shl,
        BinaryOp::Shr,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::Min => "min",
            BinaryOp::Max => "max",
            BinaryOp::Pow => "pow",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::Shl => "shl",
            BinaryOp::Shr => "shr",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
        }
    }

    pub fn parse(s: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Comparisons produce bool.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    /// `a op b == b op a`.
    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            BinaryOp::Add
                | BinaryOp::Mul
                | BinaryOp::Min
                | BinaryOp::Max
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::Eq
                | BinaryOp::Ne
        )
    }
}

/// Reductions and scans across the 32 lanes of a simdgroup. Every lane of the
/// simdgroup must be active; every lane receives the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimdOp {
    Sum,
    Prod,
    Max,
    Min,
    /// Bitwise on integers, logical on bool.
    And,
    Or,
    Xor,
    /// Inclusive prefix sum over lanes `0..=lane`.
    PrefixSum,
    /// Exclusive prefix sum over lanes `0..lane` (lane 0 gets 0).
    PrefixExclusiveSum,
    /// Bool: true on every lane if all lanes are true / any lane is true.
    All,
    Any,
}

impl SimdOp {
    pub const ALL: [SimdOp; 11] = [
        SimdOp::Sum,
        SimdOp::Prod,
        SimdOp::Max,
        SimdOp::Min,
        SimdOp::And,
        SimdOp::Or,
        SimdOp::Xor,
        SimdOp::PrefixSum,
        SimdOp::PrefixExclusiveSum,
        SimdOp::All,
        SimdOp::Any,
    ];

    /// The arithmetic ones, defined on every numeric type, floats included.
    pub const ARITHMETIC: [SimdOp; 6] = [
        SimdOp::Sum,
        SimdOp::Max,
        SimdOp::Min,
        SimdOp::PrefixSum,
        SimdOp::PrefixExclusiveSum,
        SimdOp::Prod,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SimdOp::Sum => "simd_sum",
            SimdOp::Prod => "simd_prod",
            SimdOp::Max => "simd_max",
            SimdOp::Min => "simd_min",
            SimdOp::And => "simd_and",
            SimdOp::Or => "simd_or",
            SimdOp::Xor => "simd_xor",
            SimdOp::PrefixSum => "simd_prefix_sum",
            SimdOp::PrefixExclusiveSum => "simd_prefix_exclusive_sum",
            SimdOp::All => "simd_all",
            SimdOp::Any => "simd_any",
        }
    }

    pub fn parse(s: &str) -> Option<SimdOp> {
        SimdOp::ALL.into_iter().find(|o| o.name() == s)
    }
}

/// Lane exchange within a simdgroup. Every lane of the simdgroup must be active.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShuffleKind {
    /// Read lane `arg` (must be `< 32`). Broadcast is this with a uniform `arg`.
    Index,
    /// Read lane `lane ^ arg` (`arg < 32`).
    Xor,
    /// Read lane `lane - arg`; lanes below `arg` keep their own value.
    Up,
    /// Read lane `lane + arg`; lanes at or above `32 - arg` keep their own value.
    Down,
}

impl ShuffleKind {
    pub const ALL: [ShuffleKind; 4] = [
        ShuffleKind::Index,
        ShuffleKind::Xor,
        ShuffleKind::Up,
        ShuffleKind::Down,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ShuffleKind::Index => "simd_shuffle",
            ShuffleKind::Xor => "simd_shuffle_xor",
            ShuffleKind::Up => "simd_shuffle_up",
            ShuffleKind::Down => "simd_shuffle_down",
        }
    }

    pub fn parse(s: &str) -> Option<ShuffleKind> {
        ShuffleKind::ALL.into_iter().find(|o| o.name() == s)
    }
}

/// Threadgroup-wide reductions: every thread of the threadgroup must reach them, and
/// every thread receives the result. Lowered to simdgroup ops, threadgroup memory and
/// barriers by the compiler before any backend sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "group_sum",
            ReduceOp::Max => "group_max",
            ReduceOp::Min => "group_min",
        }
    }

    pub fn parse(s: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|o| o.name() == s)
    }
}

/// A row reduction of an accumulator fragment into a row vector ([`Op::FragRowReduce`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowReduce {
    /// `rows[r] = max(rows[r], max_c x[r, c])`.
    Max,
    /// `rows[r] += Σ_c x[r, c]`.
    Sum,
}

impl RowReduce {
    pub fn name(self) -> &'static str {
        match self {
            RowReduce::Max => "matrix_row_max",
            RowReduce::Sum => "matrix_row_sum",
        }
    }
}

/// An elementwise map of an accumulator with its row's value `m` ([`Op::FragRowMap`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowMap {
    /// `x · m`.
    Scale,
    /// `exp2(x − m)`, and exactly 0 where `x` is −∞ (even where `m` is −∞ too): the
    /// weights of an online softmax in log2 units.
    Exp2Sub,
}

impl RowMap {
    pub fn name(self) -> &'static str {
        match self {
            RowMap::Scale => "matrix_row_scale",
            RowMap::Exp2Sub => "matrix_row_exp2_sub",
        }
    }
}

/// An elementwise op between row vectors ([`Op::FragRows`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowsOp {
    /// `a + b`.
    Add,
    /// `a · b`.
    Mul,
    /// `a / b` (IEEE division: a zero `b` gives ±∞ or NaN).
    Div,
    /// `exp2(a − b)`, and exactly 1 where `a == b` (so also where both are −∞): the
    /// rescale factor of an online softmax when its max moves from `a` to `b`.
    Exp2Diff,
}

impl RowsOp {
    pub fn name(self) -> &'static str {
        match self {
            RowsOp::Add => "matrix_rows_add",
            RowsOp::Mul => "matrix_rows_mul",
            RowsOp::Div => "matrix_rows_div",
            RowsOp::Exp2Diff => "matrix_rows_exp2_diff",
        }
    }

    /// The op on one row's values, as every backend computes it.
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            RowsOp::Add => a + b,
            RowsOp::Mul => a * b,
            RowsOp::Div => a / b,
            RowsOp::Exp2Diff if a == b => 1.0,
            RowsOp::Exp2Diff => (a - b).exp2(),
        }
    }
}

/// Read-modify-write atomics; the result is the value before the update.
/// `Add` takes f32, u32 or i32; `Max`/`Min`/`And`/`Or` take u32 or i32; `Exchange` any 32-bit type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    Add,
    Max,
    Min,
    And,
    Or,
    Exchange,
}

impl AtomicOp {
    pub const ALL: [AtomicOp; 6] = [
        AtomicOp::Add,
        AtomicOp::Max,
        AtomicOp::Min,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Exchange,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "atomic_add",
            AtomicOp::Max => "atomic_max",
            AtomicOp::Min => "atomic_min",
            AtomicOp::And => "atomic_and",
            AtomicOp::Or => "atomic_or",
            AtomicOp::Exchange => "atomic_exchange",
        }
    }

    pub fn parse(s: &str) -> Option<AtomicOp> {
        AtomicOp::ALL.into_iter().find(|o| o.name() == s)
    }
}

/// Where a load or store goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemRef {
    /// A tensor parameter: index into `Kernel::params`. Device memory.
    Param(u32),
    /// A threadgroup array: index into `Body::shared`.
    Shared(u32),
    /// A per-thread stack array: index into `Body::locals`.
    Local(u32),
    /// Memory argument `i` of the DSL function whose body holds the reference
    /// (`Function::mems`); inlining puts the caller's memory in its place, so a kernel
    /// never holds one.
    Arg(u32),
}

impl fmt::Display for MemRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemRef::Param(i) => write!(f, "param{i}"),
            MemRef::Shared(i) => write!(f, "shared{i}"),
            MemRef::Local(i) => write!(f, "local{i}"),
            MemRef::Arg(i) => write!(f, "memarg{i}"),
        }
    }
}

/// One operation. Results are listed on the enclosing [`crate::Inst`].
#[derive(Clone, Debug)]
pub enum Op {
    /// 1 result.
    Const(Literal),
    /// 1 result (u32).
    Builtin(Builtin),
    /// The runtime scalar parameter `Kernel::params[i]`. 1 result.
    Param(u32),
    Unary(UnaryOp, ValueId),
    /// Both operands have the same type; comparisons give bool.
    Binary(BinaryOp, ValueId, ValueId),
    /// `a * b + c`, floats only, one rounding.
    Fma(ValueId, ValueId, ValueId),
    /// `cond ? a : b`, `cond` bool.
    Select(ValueId, ValueId, ValueId),
    /// Converts to the given scalar type.
    Cast(ValueId, Scalar),
    /// Reinterprets the bits of a scalar as another numeric scalar type of the same width
    /// (u32 ↔ i32 ↔ f32, u8 ↔ i8, f16 ↔ bf16): no rounding, every pattern kept, NaN
    /// payloads included.
    Bitcast(ValueId, Scalar),
    /// Reads element `index` (u32) of `mem`. 1 result of the element type.
    Load {
        mem: MemRef,
        index: ValueId,
    },
    /// Writes element `index` of `mem`. No result.
    Store {
        mem: MemRef,
        index: ValueId,
        value: ValueId,
    },
    /// Reads `width` consecutive elements starting at `index`, which must be a multiple of
    /// `width`. 1 result of vector type. Produced by the vectorize pass.
    VecLoad {
        mem: MemRef,
        index: ValueId,
        width: u8,
    },
    /// Writes a vector to `width` consecutive elements starting at `index` (aligned as above).
    VecStore {
        mem: MemRef,
        index: ValueId,
        value: ValueId,
    },
    /// Element `lane` of a vector. 1 scalar result.
    Extract(ValueId, u8),
    /// Builds a vector from scalars of one type. 1 result.
    Pack(Vec<ValueId>),
    /// Atomic read-modify-write on device or threadgroup memory; 1 result, the old value.
    Atomic {
        op: AtomicOp,
        mem: MemRef,
        index: ValueId,
        value: ValueId,
    },
    /// Threadgroup barrier (memory fence on threadgroup and device memory). Every thread of
    /// the threadgroup must reach it. No result.
    Barrier,
    /// Simdgroup barrier: orders the threadgroup-memory accesses of one simdgroup's lanes
    /// (what a lane stored before it, the others see after it). Every lane of the
    /// simdgroup must reach it; other simdgroups are not waited for. No result.
    SimdBarrier,
    /// 1 result; see [`SimdOp`].
    Simd(SimdOp, ValueId),
    /// 1 result; `arg` is a u32 lane, mask or delta; see [`ShuffleKind`].
    Shuffle {
        kind: ShuffleKind,
        value: ValueId,
        arg: ValueId,
    },
    /// Threadgroup-wide reduction; 1 result. See [`ReduceOp`].
    GroupReduce(ReduceOp, ValueId),
    /// Runs one of two blocks; results are the yields of the block that ran.
    If {
        cond: ValueId,
        then_block: Block,
        else_block: Block,
    },
    /// `for (iv = start; iv < end; iv += step)` with `bounds` = `[start, end, step]`, and
    /// loop-carried values. `body.args` is `[iv, carried…]` and `body.yields` the next
    /// carried values; the results are the carried values after the last iteration (the
    /// `inits` if none ran). The bounds are u32 or i32 of one type; `step` must be positive.
    For {
        bounds: [ValueId; 3],
        inits: Vec<ValueId>,
        body: Block,
    },
    /// Sets every element of fragment `frag` to `value` (f32, rounded to the fragment's
    /// type). No result. Like every fragment op: every lane of the simdgroup must reach
    /// it, with simdgroup-uniform operands.
    FragFill {
        frag: u32,
        value: ValueId,
    },
    /// Loads fragment `frag`: element `(r, c)` is `mem[index + r·stride + c]`, or
    /// `mem[index + c·stride + r]` when `transpose`. `mem` is device or threadgroup memory
    /// of the fragment's element type (for an accumulator also f16/bf16, widened exactly);
    /// `index` and `stride` are u32. No result.
    FragLoad {
        frag: u32,
        mem: MemRef,
        index: ValueId,
        stride: ValueId,
        transpose: bool,
    },
    /// Stores accumulator fragment `frag`: `mem[index + r·stride + c] = (r, c)`, into f32
    /// device or threadgroup memory, or f16/bf16 memory (each element rounded to nearest
    /// even). No result.
    FragStore {
        frag: u32,
        mem: MemRef,
        index: ValueId,
        stride: ValueId,
    },
    /// Multiplies every element of accumulator fragment `frag` by `value` (f32). No result.
    FragScale {
        frag: u32,
        value: ValueId,
    },
    /// `d = a·b + c` on fragments (roles A, B, Acc, Acc; `d` may be `c`), products and
    /// sums in f32. No result.
    FragMma {
        d: u32,
        a: u32,
        b: u32,
        c: u32,
    },
    /// Folds every row of accumulator `frag` into row vector `rows` (see
    /// [`crate::FragRole::Rows`]): `rows[r] = max(rows[r], max_c frag[r, c])` for
    /// [`RowReduce::Max`] (NaN ignored where the other side is a number, as by `max`), `rows[r] +=
    /// Σ_c frag[r, c]` (in f32, in an order the backend chooses) for [`RowReduce::Sum`].
    /// Every lane holding part of a row takes part. No result.
    FragRowReduce {
        op: RowReduce,
        rows: u32,
        frag: u32,
    },
    /// Maps every element of accumulator `frag` with its row's value of row vector
    /// `rows`; see [`RowMap`]. No result.
    FragRowMap {
        op: RowMap,
        frag: u32,
        rows: u32,
    },
    /// Sets element `(r, c)` of accumulator `frag` to `value` (f32) where `c − r ≥ diag`
    /// or `c ≥ cap` (`diag` and `cap` i32, compared exactly): the causal and the length
    /// mask of a score tile, on its logical rows and columns. No result.
    FragMask {
        frag: u32,
        diag: ValueId,
        cap: ValueId,
        value: ValueId,
    },
    /// `d[r] = a[r] ∘ b[r]` on row vectors; see [`RowsOp`]. `d` may be `a` or `b`. No
    /// result.
    FragRows {
        op: RowsOp,
        d: u32,
        a: u32,
        b: u32,
    },
    /// `d[r] = b[r] > a[r] + margin ? b[r] : a[r]` on row vectors (`margin` f32): with a
    /// margin of 0 the row max, with a positive one a max that moves only when passed by
    /// more than the margin (lazy rescaling). No result.
    FragRowsRaise {
        d: u32,
        a: u32,
        b: u32,
        margin: ValueId,
    },
    /// `d = a + b` elementwise on accumulators (`d` may be `a` or `b`). No result.
    FragAdd {
        d: u32,
        a: u32,
        b: u32,
    },
    /// Converts accumulator `src` into operand fragment `dst` of role A: element `(r, c)`
    /// rounded to nearest even to `dst`'s f16 or bf16. No result.
    FragConvert {
        dst: u32,
        src: u32,
    },
    /// The threadgroup's product of two tiles, on warpgroup tensor cores where the device
    /// has them: simdgroup `s` adds to accumulator `accs[j]` (`j < accs.len() ≤ 16`) the
    /// 16×16 block `Σ_k A[16s + r, k]·B[16j + c, k]` over the tile width `k < 64`,
    /// products and sums in f32. Tile A (`16·S × 64`, S the threadgroup's simdgroups) is
    /// in threadgroup memory or, with [`TileA::Frags`], in registers; `b` (from `b_index`) the
    /// `16·accs.len() × 64` tile B (a row per output column, as `x·Wᵀ` reads W), both f16
    /// or bf16 of one type in the 128-byte-swizzled layout: element `(r, k)` at
    /// `index + 64r + 8((k / 8) ⊕ (r mod 8)) + k mod 8` (see [`swizzled_128b`]). The
    /// indices are multiples of 512 (1024 bytes) and, like the control flow reaching the
    /// op, threadgroup-uniform; the threadgroup size is a multiple of 128 (whole
    /// warpgroups). With `asynchronous` the product only starts: until a
    /// [`Op::FragMmaWait`] retires it the accumulators are in use (no op but another
    /// asynchronous product into the same accumulators, which runs after it, may touch them)
    /// and the tiles are being read (no store or copy may write them). No result.
    FragMmaTiles {
        accs: Vec<u32>,
        /// Operand A: a tile in threadgroup memory, or each simdgroup's rows in registers.
        a: TileA,
        b: MemRef,
        b_index: ValueId,
        asynchronous: bool,
        /// Tile B is `[64 (K), 16·accs.len() (N)]` instead: 64-column blocks of N, each a
        /// `64 × 64` swizzled tile with rows along K (element `(k, n)` at
        /// `b_index + 4096·(n / 64) + swizzled_128b(k, n mod 64)`), as `x·W` reads a
        /// row-major `W[K, N]`; the accumulators come four at a time.
        b_kn: bool,
    },
    /// Waits until at most `pending` of the threadgroup's asynchronous tile products into
    /// `accs` are still in flight, the oldest retiring first: a retired product's tiles
    /// may be written again, and with `pending` 0 the accumulators hold the sums. A
    /// threadgroup collective, like the product. No result.
    FragMmaWait {
        accs: Vec<u32>,
        pending: u32,
    },
    /// Starts an asynchronous copy of `width` consecutive elements from device memory
    /// `src[src_index..]` to threadgroup memory `dst[dst_index..]` (one element type; 4, 8
    /// or 16 bytes; both indices multiples of `width`). The copy belongs to the issuing
    /// thread's open group (see [`Op::CommitCopies`]) and lands when a [`Op::WaitCopies`]
    /// of that thread retires the group: until then the destination holds its old
    /// contents and reading or writing it is a race. With `valid` (bool) false the
    /// destination receives zeros and the source is not read (so `src_index` may be out of
    /// bounds: the zero-fill form for tile edges). No result.
    CopyAsync {
        dst: MemRef,
        dst_index: ValueId,
        src: MemRef,
        src_index: ValueId,
        width: u8,
        valid: Option<ValueId>,
    },
    /// Closes the issuing thread's open group of asynchronous copies (possibly empty); the
    /// next copy opens a new one. No result.
    CommitCopies,
    /// Waits until at most `pending` of the issuing thread's committed groups of copies are
    /// still in flight: every older group has landed. Copies issued since the last commit
    /// are not waited for (a kernel must commit them first). No result.
    WaitCopies(u32),
    /// Calls a DSL function; results are its returns. `mems` are the caller's memory
    /// for the function's memory arguments, in order; `frags` the caller's fragments for
    /// its fragment arguments, in order, an array's elements one by one (see
    /// [`crate::FragArg`]). Removed by the inline pass.
    Call {
        func: Arc<Function>,
        args: Vec<ValueId>,
        mems: Vec<MemRef>,
        frags: Vec<u32>,
    },
}

impl Op {
    /// The values this op reads directly (not those inside its blocks).
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            Op::Const(_)
            | Op::Builtin(_)
            | Op::Param(_)
            | Op::Barrier
            | Op::SimdBarrier
            | Op::CommitCopies
            | Op::WaitCopies(_)
            | Op::FragMmaWait { .. }
            | Op::FragMma { .. }
            | Op::FragRowReduce { .. }
            | Op::FragRowMap { .. }
            | Op::FragRows { .. }
            | Op::FragAdd { .. }
            | Op::FragConvert { .. } => {
                vec![]
            }
            Op::FragMask {
                diag, cap, value, ..
            } => vec![*diag, *cap, *value],
            Op::FragRowsRaise { margin, .. } => vec![*margin],
            Op::CopyAsync {
                dst_index,
                src_index,
                valid,
                ..
            } => {
                let mut v = vec![*dst_index, *src_index];
                v.extend(valid.iter().copied());
                v
            }
            Op::FragMmaTiles { a, b_index, .. } => match a {
                TileA::Tile { index, .. } => vec![*index, *b_index],
                TileA::Frags(_) => vec![*b_index],
            },
            Op::FragFill { value, .. } | Op::FragScale { value, .. } => vec![*value],
            Op::FragLoad { index, stride, .. } | Op::FragStore { index, stride, .. } => {
                vec![*index, *stride]
            }
            Op::Unary(_, a) | Op::Cast(a, _) | Op::Bitcast(a, _) | Op::Extract(a, _) => vec![*a],
            Op::Simd(_, a) | Op::GroupReduce(_, a) => vec![*a],
            Op::Binary(_, a, b) => vec![*a, *b],
            Op::Fma(a, b, c) | Op::Select(a, b, c) => vec![*a, *b, *c],
            Op::Load { index, .. } | Op::VecLoad { index, .. } => vec![*index],
            Op::Store { index, value, .. }
            | Op::VecStore { index, value, .. }
            | Op::Atomic { index, value, .. } => vec![*index, *value],
            Op::Pack(vs) => vs.clone(),
            Op::Shuffle { value, arg, .. } => vec![*value, *arg],
            Op::If { cond, .. } => vec![*cond],
            Op::For { bounds, inits, .. } => {
                let mut v = bounds.to_vec();
                v.extend(inits.iter().copied());
                v
            }
            Op::Call { args, .. } => args.clone(),
        }
    }

    /// Rewrites every operand read directly by this op (not inside its blocks).
    pub fn map_operands(&mut self, mut f: impl FnMut(ValueId) -> ValueId) {
        match self {
            Op::Const(_)
            | Op::Builtin(_)
            | Op::Param(_)
            | Op::Barrier
            | Op::SimdBarrier
            | Op::CommitCopies
            | Op::WaitCopies(_)
            | Op::FragMmaWait { .. }
            | Op::FragMma { .. }
            | Op::FragRowReduce { .. }
            | Op::FragRowMap { .. }
            | Op::FragRows { .. }
            | Op::FragAdd { .. }
            | Op::FragConvert { .. } => {}
            Op::FragMask {
                diag, cap, value, ..
            } => {
                *diag = f(*diag);
                *cap = f(*cap);
                *value = f(*value);
            }
            Op::FragRowsRaise { margin, .. } => *margin = f(*margin),
            Op::CopyAsync {
                dst_index,
                src_index,
                valid,
                ..
            } => {
                *dst_index = f(*dst_index);
                *src_index = f(*src_index);
                if let Some(v) = valid {
                    *v = f(*v);
                }
            }
            Op::FragMmaTiles { a, b_index, .. } => {
                if let TileA::Tile { index, .. } = a {
                    *index = f(*index);
                }
                *b_index = f(*b_index);
            }
            Op::FragFill { value, .. } | Op::FragScale { value, .. } => *value = f(*value),
            Op::FragLoad { index, stride, .. } | Op::FragStore { index, stride, .. } => {
                *index = f(*index);
                *stride = f(*stride);
            }
            Op::Unary(_, a) | Op::Cast(a, _) | Op::Bitcast(a, _) | Op::Extract(a, _) => *a = f(*a),
            Op::Simd(_, a) | Op::GroupReduce(_, a) => *a = f(*a),
            Op::Binary(_, a, b) => {
                *a = f(*a);
                *b = f(*b);
            }
            Op::Fma(a, b, c) | Op::Select(a, b, c) => {
                *a = f(*a);
                *b = f(*b);
                *c = f(*c);
            }
            Op::Load { index, .. } | Op::VecLoad { index, .. } => *index = f(*index),
            Op::Store { index, value, .. }
            | Op::VecStore { index, value, .. }
            | Op::Atomic { index, value, .. } => {
                *index = f(*index);
                *value = f(*value);
            }
            Op::Pack(vs) => vs.iter_mut().for_each(|v| *v = f(*v)),
            Op::Shuffle { value, arg, .. } => {
                *value = f(*value);
                *arg = f(*arg);
            }
            Op::If { cond, .. } => *cond = f(*cond),
            Op::For { bounds, inits, .. } => {
                bounds.iter_mut().for_each(|v| *v = f(*v));
                inits.iter_mut().for_each(|v| *v = f(*v));
            }
            Op::Call { args, .. } => args.iter_mut().for_each(|v| *v = f(*v)),
        }
    }

    /// The blocks nested in this op.
    pub fn blocks(&self) -> Vec<&Block> {
        match self {
            Op::If {
                then_block,
                else_block,
                ..
            } => vec![then_block, else_block],
            Op::For { body, .. } => vec![body],
            _ => vec![],
        }
    }

    /// The blocks nested in this op, mutably.
    pub fn blocks_mut(&mut self) -> Vec<&mut Block> {
        match self {
            Op::If {
                then_block,
                else_block,
                ..
            } => vec![then_block, else_block],
            Op::For { body, .. } => vec![body],
            _ => vec![],
        }
    }

    /// True if the op has no effect beyond its result and its result depends only on its
    /// operands, so it may be removed when unused and merged with an identical op.
    /// Loads are not pure (memory may change between two of them).
    pub fn is_pure(&self) -> bool {
        matches!(
            self,
            Op::Const(_)
                | Op::Builtin(_)
                | Op::Param(_)
                | Op::Unary(..)
                | Op::Binary(..)
                | Op::Fma(..)
                | Op::Select(..)
                | Op::Cast(..)
                | Op::Bitcast(..)
                | Op::Extract(..)
                | Op::Pack(..)
        )
    }

    /// True for ops every lane of a simdgroup (or thread of a threadgroup) must reach together.
    pub fn is_collective(&self) -> bool {
        matches!(
            self,
            Op::Barrier | Op::SimdBarrier | Op::Simd(..) | Op::Shuffle { .. } | Op::GroupReduce(..)
        ) || self.is_frag()
    }

    /// True for the matrix-fragment ops: simdgroup collectives with effects on fragments
    /// (and, for loads and stores, on memory), never pure.
    pub fn is_frag(&self) -> bool {
        matches!(
            self,
            Op::FragFill { .. }
                | Op::FragScale { .. }
                | Op::FragLoad { .. }
                | Op::FragStore { .. }
                | Op::FragMma { .. }
                | Op::FragRowReduce { .. }
                | Op::FragRowMap { .. }
                | Op::FragMask { .. }
                | Op::FragRows { .. }
                | Op::FragRowsRaise { .. }
                | Op::FragAdd { .. }
                | Op::FragConvert { .. }
                | Op::FragMmaTiles { .. }
                | Op::FragMmaWait { .. }
        )
    }

    /// The matrix fragments (and row vectors) a fragment op names, to change them.
    pub fn frags_mut(&mut self) -> Vec<&mut u32> {
        match self {
            Op::FragFill { frag, .. }
            | Op::FragScale { frag, .. }
            | Op::FragLoad { frag, .. }
            | Op::FragStore { frag, .. }
            | Op::FragMask { frag, .. } => vec![frag],
            Op::FragMma { d, a, b, c } => vec![d, a, b, c],
            Op::FragRowReduce { rows, frag, .. } | Op::FragRowMap { frag, rows, .. } => {
                vec![rows, frag]
            }
            Op::FragRows { d, a, b, .. }
            | Op::FragRowsRaise { d, a, b, .. }
            | Op::FragAdd { d, a, b } => vec![d, a, b],
            Op::FragConvert { dst, src } => vec![dst, src],
            Op::FragMmaTiles { accs, a, .. } => {
                let mut v: Vec<&mut u32> = accs.iter_mut().collect();
                if let TileA::Frags(fa) = a {
                    v.extend(fa.iter_mut());
                }
                v
            }
            Op::FragMmaWait { accs, .. } => accs.iter_mut().collect(),
            Op::Call { frags, .. } => frags.iter_mut().collect(),
            _ => vec![],
        }
    }

    /// The matrix fragments (and row vectors) a fragment op names.
    pub fn frags(&self) -> Vec<u32> {
        match self {
            Op::FragFill { frag, .. }
            | Op::FragScale { frag, .. }
            | Op::FragLoad { frag, .. }
            | Op::FragStore { frag, .. }
            | Op::FragMask { frag, .. } => vec![*frag],
            Op::FragMma { d, a, b, c } => vec![*d, *a, *b, *c],
            Op::FragRowReduce { rows, frag, .. } | Op::FragRowMap { frag, rows, .. } => {
                vec![*rows, *frag]
            }
            Op::FragRows { d, a, b, .. }
            | Op::FragRowsRaise { d, a, b, .. }
            | Op::FragAdd { d, a, b } => vec![*d, *a, *b],
            Op::FragConvert { dst, src } => vec![*dst, *src],
            Op::FragMmaTiles { accs, a, .. } => {
                let mut v = accs.clone();
                if let TileA::Frags(fa) = a {
                    v.extend(fa);
                }
                v
            }
            Op::FragMmaWait { accs, .. } => accs.clone(),
            Op::Call { frags, .. } => frags.clone(),
            _ => vec![],
        }
    }

    /// The memory an op reads or writes directly, if any, to change it (an asynchronous
    /// copy's destination; [`Op::mems_mut`] gives its source too).
    pub fn mem_mut(&mut self) -> Option<&mut MemRef> {
        self.mems_mut().into_iter().next()
    }

    /// The memory an op reads or writes directly (none, one, or for an asynchronous copy
    /// its destination then its source), to change it.
    pub fn mems_mut(&mut self) -> Vec<&mut MemRef> {
        match self {
            Op::Load { mem, .. }
            | Op::Store { mem, .. }
            | Op::VecLoad { mem, .. }
            | Op::VecStore { mem, .. }
            | Op::Atomic { mem, .. }
            | Op::FragLoad { mem, .. }
            | Op::FragStore { mem, .. } => vec![mem],
            Op::CopyAsync { dst, src, .. } => vec![dst, src],
            Op::FragMmaTiles { a, b, .. } => match a {
                TileA::Tile { mem, .. } => vec![mem, b],
                TileA::Frags(_) => vec![b],
            },
            _ => vec![],
        }
    }

    /// True for the ops of asynchronous copies (issue, commit, wait): effects on memory
    /// and on the issuing thread's groups of copies, never pure.
    pub fn is_async_copy(&self) -> bool {
        matches!(
            self,
            Op::CopyAsync { .. } | Op::CommitCopies | Op::WaitCopies(_)
        )
    }

    /// The memory an op reads or writes directly, if any.
    pub fn mem(&self) -> Option<MemRef> {
        match self {
            Op::Load { mem, .. }
            | Op::Store { mem, .. }
            | Op::VecLoad { mem, .. }
            | Op::VecStore { mem, .. }
            | Op::Atomic { mem, .. }
            | Op::FragLoad { mem, .. }
            | Op::FragStore { mem, .. } => Some(*mem),
            _ => None,
        }
    }
}

/// Operand A of a tile product ([`Op::FragMmaTiles`]).
#[derive(Clone, Debug)]
pub enum TileA {
    /// The `16·S × 64` swizzled tile of `mem` from element `index`.
    Tile { mem: MemRef, index: ValueId },
    /// In registers: each simdgroup's own 16 rows, columns `16i … 16i + 15` of the 64 in
    /// A-operand fragment `i` (the four in one array), as `matrix_convert` leaves a
    /// softmax's weights for `P·V`. While an asynchronous product reads them they may not
    /// be written.
    Frags([u32; 4]),
}

/// The index of element `(row, col)` of a 128-byte-swizzled tile of 16-bit elements (64 a
/// row, in 8-element chunks permuted by the row's low three bits), relative to the tile's
/// start: the layout [`Op::FragMmaTiles`] reads, the one warpgroup tensor cores and
/// tensor-memory copies use, in which the eight rows of a chunk column fall in eight
/// different memory banks.
pub fn swizzled_128b(row: u32, col: u32) -> u32 {
    row * 64 + (((col >> 3) ^ (row & 7)) << 3) + (col & 7)
}
