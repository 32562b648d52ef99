//! Tessera's intermediate representation: typed SSA values, structured `if` / `for`
//! regions, explicit memory ops and collectives; plus the builder the DSL frontend
//! generates calls to, the scalar semantics every backend shares, the verifier and the
//! text printer.

pub mod builder;
pub mod error;
pub mod eval;
pub mod kernel;
pub mod literal;
pub mod ops;
pub mod printer;
pub mod signature;
pub mod types;
pub mod verify;

pub use builder::{
    ArgInfo, Builder, CallArg, Frag, FragArray, FunctionDepthGuard, Mem, TileOperand, Value,
};
pub use error::IrError;
pub use kernel::{
    describe_frags, ArgKind, ArrayDecl, Block, Body, FragArg, FragDecl, FragRole, Function, Inst,
    Kernel, Loc, MemArg, Occupancy, Param, ParamKind, ValueId, FRAG_DIM, MAX_GROUP_SIZE,
    MAX_STACK_BYTES,
};
pub use literal::Literal;
pub use ops::swizzled_128b;
pub use ops::{
    AtomicOp, BinaryOp, Builtin, MemRef, Op, ReduceOp, RowMap, RowReduce, RowsOp, ShuffleKind,
    SimdOp, TileA, UnaryOp,
};
pub use signature::{
    dsl_function, ConstexprSig, DslFunction, KernelDef, KernelSignature, ParamSig, Specialization,
    TypeSig,
};
pub use types::{Scalar, Type};
pub use verify::{verify_function, verify_kernel, verify_lowered_kernel, Uniformity};

pub use half;
