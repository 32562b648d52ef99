//! Gated DeltaNet: the recurrent decode step (plain and fused with its prep), the
//! chunked prefill, and their f64 references. The state layout `[B, Hv, Dv, Dk]` is
//! shared by every op, so a prefill's final state is the next decode step's input.

#[cfg(feature = "cases")]
mod cases;
mod decl;
pub mod decode;
pub mod prefill;
pub mod prefill_kernels;
pub mod prefill_recurrent;
pub mod prefill_workspace;
pub mod prep_decode;
#[cfg(feature = "cases")]
pub mod reference;
pub mod validate;

pub use decode::{gdn_decode_step, DecodeArgs};
pub use prefill::{gdn_chunked_prefill, PrefillArgs};
pub use prefill_workspace::{equal_sequences, GdnPrefillWorkspace, PrefillShape};
pub use prep_decode::{gdn_prep_decode_step, PrepDecodeArgs, PrepDecodeShape};
