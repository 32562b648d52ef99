//! The C-family emitter core that CUDA C and MSL share: one walk over optimised IR that
//! names SSA values, declares variables, emits expressions and statements lane by lane,
//! lowers `if` / `for` regions (carried values, loop increments that cannot wrap, the
//! non-positive step check) and dispatches memory, collective and fragment ops. What the
//! two languages spell differently — types, literals, address spaces, builtins, barriers,
//! simdgroup collectives, fragment intrinsics, the entry point and its prelude — is a
//! [`Dialect`]. A new IR construct is added once in [`Emitter`] plus, where the targets
//! differ, one dialect hook.

mod control;
mod emitter;
mod error;

pub(crate) use emitter::{Emitter, Mem, Space, Val};
pub use error::EmitError;

use tessera_ir::{AtomicOp, BinaryOp, Builtin, Kernel, Literal, Scalar, ShuffleKind, SimdOp};
use tessera_ir::{RowMap, RowReduce, RowsOp, UnaryOp, ValueId};

/// Result of an emitter step.
pub(crate) type R<T> = Result<T, EmitError>;

/// The identifiers a dialect gives a kernel's entry point, parameters and arrays.
pub(crate) struct Idents {
    pub entry: String,
    pub params: Vec<String>,
    pub shared: Vec<String>,
    pub locals: Vec<String>,
    pub frags: Vec<String>,
}

/// The IR's scalar ops as expressions of a dialect, with the meaning `tessera_ir::ops`
/// gives them; operands are names or literals, so an expression may repeat them.
pub(crate) trait ScalarOps {
    /// `op a` on type `t`, or why it has no meaning there.
    fn unary(&mut self, op: UnaryOp, t: Scalar, a: &str) -> Result<String, String>;
    /// `a op b` on type `t`; `b_const` is `b` where it is a known integer.
    fn binary(
        &mut self,
        op: BinaryOp,
        t: Scalar,
        a: &str,
        b: &str,
        b_const: Option<i64>,
    ) -> Result<String, String>;
    /// `a * b + c` with one rounding.
    fn fma(&mut self, t: Scalar, a: &str, b: &str, c: &str) -> Result<String, String>;
    /// `c ? a : b`.
    fn select(c: &str, a: &str, b: &str) -> String;
    /// `a` converted from `from` to `to`, as the IR defines casts.
    fn cast(&mut self, from: Scalar, to: Scalar, a: &str) -> String;
    /// The bits of `a` (of type `from`) read as `to`, a numeric type of the same width.
    fn bitcast(&mut self, from: Scalar, to: Scalar, a: &str) -> String;
}

/// What differs between CUDA C and MSL. Hooks that write code take the whole
/// [`Emitter`] (their own state is `e.d`); spelling hooks are plain functions.
pub(crate) trait Dialect: ScalarOps + Sized {
    /// What emission produces (the source and the facts a runtime needs to launch it).
    type Output;
    /// The target's name in messages.
    const TARGET: &'static str;
    /// One level of indentation.
    const INDENT: &'static str;
    /// True when builtins, extracted lanes and packed vectors are named by their
    /// expressions; false when each gets a `const` variable.
    const INLINE_VIEWS: bool;
    /// The statement reached by a loop whose step is not positive.
    const STEP_TRAP: &'static str;
    /// A threadgroup barrier statement.
    const BARRIER: &'static str;
    /// A simdgroup barrier statement.
    const SIMD_BARRIER: &'static str;

    /// The identifiers of the kernel's entry point, parameters, arrays and fragments.
    fn names(k: &Kernel) -> Idents;
    /// The target's scalar type.
    fn scalar_type(s: Scalar) -> &'static str;
    /// A constant as an expression of its own type.
    fn literal(l: Literal) -> String;
    /// `x` (an i32 or u32) converted to u32.
    fn to_u32(x: &str) -> String;
    /// The type of one variable holding a whole vector, or `None` when the target keeps a
    /// vector value as one variable per lane.
    fn vector_type(&mut self, s: Scalar, width: u8) -> Option<String>;
    /// Lane `k` of a whole-vector variable.
    fn lane_of(var: &str, k: usize) -> String;

    /// The expression of a thread-position builtin.
    fn builtin(e: &mut Emitter<Self>, b: Builtin) -> String;
    /// Threadgroup and stack arrays and fragment registers, at the top of the body.
    fn prologue(e: &mut Emitter<Self>) -> R<()>;
    /// The whole translation unit around the emitted body.
    fn finish(e: Emitter<Self>) -> R<Self::Output>;

    /// Defines `r` as `width` elements of `mem` from `index` on.
    fn vec_load(e: &mut Emitter<Self>, r: ValueId, mem: &Mem, index: &str) -> R<()>;
    /// Stores the vector `value` into `mem` from `index` on.
    fn vec_store(e: &mut Emitter<Self>, mem: &Mem, index: &str, value: ValueId) -> R<()>;
    /// The expression of an atomic read-modify-write on writable device or threadgroup
    /// memory, returning the old value.
    fn atomic(
        e: &mut Emitter<Self>,
        op: AtomicOp,
        mem: &Mem,
        index: &str,
        value: &str,
    ) -> R<String>;
    /// A simdgroup reduction or scan of the scalar `x` of type `t`.
    fn simd(e: &mut Emitter<Self>, op: SimdOp, t: Scalar, x: &str) -> R<String>;
    /// A lane exchange of `x` (type `t`); `arg_const` is the lane argument where known.
    fn shuffle(
        e: &mut Emitter<Self>,
        kind: ShuffleKind,
        t: Scalar,
        x: &str,
        arg: &str,
        arg_const: Option<u32>,
    ) -> R<String>;

    /// Starts the asynchronous copy of `width` elements `src[src_index..]` into the
    /// threadgroup array `dst[dst_index..]`, zeros where `valid` is false. By default a
    /// plain copy, done before any wait can ask for it.
    fn copy_async(e: &mut Emitter<Self>, copy: &AsyncCopy<'_>) {
        plain_copy(e, copy);
    }
    /// Commits the copies issued since the last commit as a group (by default nothing).
    fn commit_copies(_e: &mut Emitter<Self>) {}
    /// Waits until at most `pending` committed groups are in flight (by default nothing:
    /// plain copies have landed already).
    fn wait_copies(_e: &mut Emitter<Self>, _pending: u32) {}
}

/// An asynchronous copy as the dialects see it: memory names and index expressions.
pub(crate) struct AsyncCopy<'a> {
    pub dst: &'a Mem,
    pub dst_index: &'a str,
    pub src: &'a Mem,
    pub src_index: &'a str,
    pub width: u8,
    /// The in-bounds flag of the zero-fill form.
    pub valid: Option<&'a str>,
}

/// `dst[dst_index + k] = src[src_index + k]` for every element, or zeros where the copy's
/// flag is false (the source is then not read).
pub(crate) fn plain_copy<D: Dialect>(e: &mut Emitter<D>, c: &AsyncCopy<'_>) {
    let at = |base: &str, k: u8| {
        if k == 0 {
            base.to_string()
        } else {
            format!("({base}) + {k}u")
        }
    };
    let zero = D::literal(Literal::zero(c.dst.elem));
    for k in 0..c.width {
        let from = format!("{}[{}]", c.src.name, at(c.src_index, k));
        let value = match c.valid {
            Some(v) => format!("({v}) ? {from} : {zero}"),
            None => from,
        };
        e.line(&format!(
            "{}[{}] = {value};",
            c.dst.name,
            at(c.dst_index, k)
        ));
    }
}

/// A tile product's form: asynchronous (waited for by a later op), and tile B as
/// `[K, N]` blocks instead of `[N, K]` rows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TileForm {
    pub asynchronous: bool,
    pub b_kn: bool,
}

/// Operand A of a tile product as a dialect receives it: a swizzled tile (memory and
/// index) or, per simdgroup, four A-operand fragments (16 columns of K each).
#[derive(Clone, Copy, Debug)]
pub(crate) enum TileSource<'a> {
    Tile(&'a Mem, &'a str),
    Frags([usize; 4]),
}

/// How a dialect spells matrix fragments (16×16 tiles held across a simdgroup), apart
/// from [`Dialect`] so each target keeps them in a file of their own. The core has
/// checked the fragments, roles and memory before a hook runs.
pub(crate) trait Fragments: Dialect {
    /// Sets every element of fragment `f` to `value`.
    fn frag_fill(e: &mut Emitter<Self>, f: usize, value: &str);
    /// Multiplies every element of accumulator `f` by `value`.
    fn frag_scale(e: &mut Emitter<Self>, f: usize, value: &str);
    /// Loads fragment `f` from a 16×16 tile of `mem` at `index` with row `stride`.
    fn frag_load(
        e: &mut Emitter<Self>,
        f: usize,
        mem: &Mem,
        index: &str,
        stride: &str,
        transpose: bool,
    );
    /// Stores accumulator `f` into a 16×16 tile of writable `mem`.
    fn frag_store(e: &mut Emitter<Self>, f: usize, mem: &Mem, index: &str, stride: &str);
    /// `d = a × b + c` on fragments.
    fn frag_mma(e: &mut Emitter<Self>, d: usize, a: usize, b: usize, c: usize);
    /// Folds each row of accumulator `f` into row vector `rows`.
    fn frag_row_reduce(e: &mut Emitter<Self>, op: RowReduce, rows: usize, f: usize);
    /// Maps each element of accumulator `f` with its row's value of `rows`.
    fn frag_row_map(e: &mut Emitter<Self>, op: RowMap, f: usize, rows: usize);
    /// Sets the elements `(r, c)` of accumulator `f` with `c − r ≥ diag` or `c ≥ cap`
    /// (i32) to `value`.
    fn frag_mask(e: &mut Emitter<Self>, f: usize, diag: &str, cap: &str, value: &str);
    /// `d = a ∘ b` on row vectors.
    fn frag_rows(e: &mut Emitter<Self>, op: RowsOp, d: usize, a: usize, b: usize);
    /// `d = b > a + margin ? b : a` on row vectors.
    fn frag_rows_raise(e: &mut Emitter<Self>, d: usize, a: usize, b: usize, margin: &str);
    /// `d = a + b` on accumulators.
    fn frag_add(e: &mut Emitter<Self>, d: usize, a: usize, b: usize);
    /// Operand `dst` (role A) = accumulator `src`, rounded.
    fn frag_convert(e: &mut Emitter<Self>, dst: usize, src: usize);
    /// The threadgroup's product of two 128-byte-swizzled tiles (see
    /// `tessera_ir::Op::FragMmaTiles`): simdgroup `s` adds `A[16s.., :]·B[16j.., :]ᵀ` into
    /// accumulator `accs[j]`; each tile is `(memory, index)`. With `asynchronous` the
    /// product may still run after the hook's code, until [`Fragments::frag_mma_wait`].
    fn frag_mma_tiles(
        e: &mut Emitter<Self>,
        accs: &[usize],
        a: TileSource<'_>,
        b: (&Mem, &str),
        form: TileForm,
    );
    /// Waits until at most `pending` asynchronous tile products into `accs` are in flight.
    fn frag_mma_wait(e: &mut Emitter<Self>, accs: &[usize], pending: u32);
    /// Emitted before each threadgroup barrier of a kernel that multiplies tiles (what
    /// makes ordinary stores to a tile visible to the tensor cores' reads).
    fn frag_tiles_before_barrier(_e: &mut Emitter<Self>) {}
}
