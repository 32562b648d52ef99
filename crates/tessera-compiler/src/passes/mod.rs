//! The optimisation passes, one file each. Every pass is a function over a [`Kernel`]
//! that keeps it well-formed and leaves the CPU interpreter's results unchanged.
//!
//! [`Kernel`]: tessera_ir::Kernel

pub mod cse;
pub mod dce;
pub mod fold;
pub mod inline;
pub mod lower_group_reduce;
pub mod promote_locals;
pub mod unroll;
pub(crate) mod util;
pub mod vectorize;

pub use cse::cse;
pub use dce::dce;
pub use fold::fold;
pub use inline::inline;
pub use lower_group_reduce::lower_group_reduce;
pub use promote_locals::promote_locals;
pub use unroll::unroll;
pub use vectorize::vectorize;
