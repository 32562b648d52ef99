//! What the registered cases are made of: seeded random inputs rounded to their dtype,
//! the ops' declared per-dtype accuracy, a comparison that never lets NaN pass, the rejection check that a
//! refused call wrote nothing, and the small fixtures every family's cases share.

mod compare;
mod fixtures;
mod inputs;
mod rejection;

pub use compare::{accuracy, compare, Tolerance};
pub use fixtures::{
    err, kernel_use, merge, rejection, rejection_of, replaced, zeros, zeros_of, Refused, Spec,
};
pub use inputs::{qkv, random_tensor, upload, CaseRng, Qkv};
pub use rejection::expect_rejection;
