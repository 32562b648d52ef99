//! What the registered cases are made of: seeded random inputs rounded to their dtype,
//! per-dtype tolerances, a comparison that never lets NaN pass, and the rejection check
//! that a refused call wrote nothing.

mod compare;
mod inputs;
mod rejection;

pub use compare::{compare, tolerance, Tolerance};
pub use inputs::{random_tensor, upload, CaseRng};
pub use rejection::expect_rejection;
