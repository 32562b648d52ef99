//! Elementwise ops: the sum (`add`, also in place as the residual add), the gated
//! activations of an MLP (`silu_mul`, `gelu_mul`, and their packed gate/up forms), float
//! casts and the embedding gather.

pub mod activation;
pub mod add;
#[cfg(feature = "cases")]
mod cases;
pub mod cast;
mod decl;
pub mod embedding;
pub mod gated;
#[cfg(feature = "cases")]
pub mod reference;

pub use add::{add, add_in_place};
pub use cast::cast;
pub use embedding::{embedding, EmbeddingCheck};
pub use gated::{gelu_mul, gelu_mul_packed, silu_mul, silu_mul_packed, GeluApproximation};
