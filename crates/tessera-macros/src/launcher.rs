//! The typed launcher `#[kernel]` generates beside the IR builder: an `Args` struct (the
//! tensors as `&Tensor`, the runtime scalars as their Rust types), a `Consts` struct (the
//! constexprs, and the dtype of any generic no argument carries) and `launch(ctx, args,
//! consts)`. A misspelt, missing or mistyped field is a build error; the runtime binds the
//! fields by position.

use crate::kernel::{ParamInfo, ParamKind};
use proc_macro2::{Span, TokenStream};
use quote::quote;

/// The Rust type a runtime scalar of DSL type `ty` is passed as.
fn scalar_field_type(ty: &syn::Type, generics: &[syn::Ident], ir: &TokenStream) -> TokenStream {
    let name = match ty {
        syn::Type::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    };
    match name.as_deref() {
        Some(n) if generics.iter().any(|g| g == n) => quote!(#ir::Literal),
        Some("f16") => quote!(#ir::half::f16),
        Some("bf16") => quote!(#ir::half::bf16),
        Some(n @ ("u32" | "i32" | "f32" | "bool" | "u8" | "i8")) => {
            let id = syn::Ident::new(n, Span::call_site());
            quote!(#id)
        }
        // Anything else was rejected when the signature was read.
        _ => quote!(#ir::Literal),
    }
}

/// Whether the DSL type `ty` is the generic `g`.
fn is_generic(ty: &syn::Type, g: &syn::Ident) -> bool {
    matches!(ty, syn::Type::Path(p) if p.path.is_ident(g))
}

fn type_text(ty: &syn::Type) -> String {
    quote!(#ty).to_string()
}

/// The launcher items, placed inside the kernel's module next to `DEF`.
pub fn launcher(
    params: &[ParamInfo],
    generics: &[syn::Ident],
    ir: &TokenStream,
    rt: &TokenStream,
) -> TokenStream {
    let mut arg_fields = Vec::new();
    let mut arg_binds = Vec::new();
    let mut const_fields = Vec::new();
    let mut const_binds = Vec::new();
    for p in params {
        let n = &p.name;
        match &p.kind {
            ParamKind::Tensor { elem, writable } => {
                let doc = format!(
                    "Tensor of {} ({}).",
                    type_text(elem),
                    if *writable { "written" } else { "read" }
                );
                arg_fields.push(quote!(#[doc = #doc] pub #n: &'a #rt::Tensor));
                arg_binds.push(quote!(#rt::BoundArg::Tensor(args.#n)));
            }
            ParamKind::Scalar(ty) => {
                let doc = format!("Runtime scalar of type {}.", type_text(ty));
                let field_ty = scalar_field_type(ty, generics, ir);
                arg_fields.push(quote!(#[doc = #doc] pub #n: #field_ty));
                arg_binds.push(quote!(#rt::BoundArg::Scalar(#ir::Literal::from(args.#n))));
            }
            ParamKind::Constexpr(t) => {
                let t = syn::Ident::new(t, Span::call_site());
                let doc = format!("Constexpr of type {t}: each value is its own specialisation.");
                const_fields.push(quote!(#[doc = #doc] pub #n: #t));
                const_binds.push(quote!(#ir::Literal::from(consts.#n)));
            }
        }
    }
    // A generic that no argument carries cannot be inferred: its dtype is a field too.
    let mut dtype_binds = Vec::new();
    for (i, g) in generics.iter().enumerate() {
        let carried = params.iter().any(|p| match &p.kind {
            ParamKind::Tensor { elem, .. } => is_generic(elem, g),
            ParamKind::Scalar(ty) => is_generic(ty, g),
            ParamKind::Constexpr(_) => false,
        });
        if !carried {
            let doc = format!("The dtype of the generic `{g}`, which no argument carries.");
            const_fields.push(quote!(#[doc = #doc] pub #g: #ir::Scalar));
            dtype_binds.push(quote!((#i, consts.#g)));
        }
    }

    let (consts_struct, consts_param) = if const_fields.is_empty() {
        (TokenStream::new(), TokenStream::new())
    } else {
        (
            quote! {
                /// The kernel's constexprs: every field is required, and each set of values
                /// is compiled once.
                #[allow(non_snake_case)]
                #[derive(Clone, Copy, Debug, PartialEq)]
                pub struct Consts {
                    #(#const_fields),*
                }
            },
            quote!(, consts: Consts),
        )
    };

    quote! {
        /// The kernel's tensors and runtime scalars, in declaration order: every field is
        /// required.
        #[derive(Clone, Copy)]
        pub struct Args<'a> {
            #(#arg_fields),*
        }

        #consts_struct

        /// Starts a launch with every argument bound by position; give the grid and the
        /// group size, then `.run()`. Dtypes, aliasing and geometry are checked at run.
        pub fn launch<'a>(ctx: &'a #rt::Context, args: Args<'a> #consts_param) -> #rt::TypedLaunch<'a> {
            #rt::TypedLaunch::new(
                ctx,
                &DEF,
                ::std::vec![#(#arg_binds),*],
                ::std::vec![#(#const_binds),*],
                ::std::vec![#(#dtype_binds),*],
            )
        }
    }
}
