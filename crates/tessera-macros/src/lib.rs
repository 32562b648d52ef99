//! The DSL frontend: `#[kernel]` and `#[func]` turn a Rust function into Rust code that
//! builds Tessera IR for given dtypes and constexpr values. Constructs the DSL does not
//! handle are compile errors at their span that say what to write instead.

mod assigned;
mod body;
mod expr;
mod frag;
mod func;
#[cfg(test)]
mod fuzz_frontend;
mod kernel;
mod launcher;
mod paths;
mod types;

use proc_macro::TokenStream;

/// Turns a function into a Tessera kernel.
///
/// Parameters: `x: Tensor<T>` (read), `mut out: Tensor<T>` (written), runtime scalars
/// (`eps: f32`, passed at launch) and `#[constexpr] n: u32` (baked into the code). The
/// function becomes a module holding `DEF: KernelDef`, a typed `ir(…)` builder and, where
/// the crate reaches the runtime, a typed launcher: `name::launch(ctx, name::Args { … },
/// name::Consts { … })` (no `Consts` when the kernel has no constexprs), whose every field
/// is required and typed, so a misspelt, missing or mistyped argument fails to build.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Turns a function into a reusable DSL function, callable from kernels and from other
/// DSL functions and inlined at any depth. Arguments and results are scalar values.
#[proc_macro_attribute]
pub fn func(attr: TokenStream, item: TokenStream) -> TokenStream {
    func::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
