//! Maps the Rust types written in a kernel (`f32`, `u32`, a generic `T` …) to expressions
//! that evaluate to the IR's `Scalar` when the kernel is built.

use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;

pub const SCALAR_NAMES: [(&str, &str); 8] = [
    ("f32", "F32"),
    ("f16", "F16"),
    ("bf16", "BF16"),
    ("u32", "U32"),
    ("i32", "I32"),
    ("u8", "U8"),
    ("i8", "I8"),
    ("bool", "Bool"),
];

/// The context a type is resolved in: the names of the function's generic dtypes.
pub struct TypeScope {
    pub generics: Vec<syn::Ident>,
}

impl TypeScope {
    /// `f32` → `Scalar::F32`; a generic `T` → the local `T` holding its dtype.
    pub fn scalar_expr(&self, ty: &syn::Type, ir: &TokenStream) -> syn::Result<TokenStream> {
        let err = || {
            syn::Error::new(
                ty.span(),
                "unsupported type here: expected f32, f16, bf16, u32, i32, u8, i8, bool or a generic dtype parameter",
            )
        };
        let syn::Type::Path(p) = ty else {
            return Err(err());
        };
        let Some(ident) = p.path.get_ident() else {
            return Err(err());
        };
        if let Some(g) = self.generics.iter().find(|g| *g == ident) {
            return Ok(quote!(#g));
        }
        let name = ident.to_string();
        match SCALAR_NAMES.iter().find(|(n, _)| *n == name) {
            Some((_, v)) => {
                let v = syn::Ident::new(v, ident.span());
                Ok(quote!(#ir::Scalar::#v))
            }
            None => Err(err()),
        }
    }
}

/// The generic dtype parameters of a function; lifetimes, consts and bounds are errors.
pub fn generic_dtypes(generics: &syn::Generics) -> syn::Result<Vec<syn::Ident>> {
    let mut out = Vec::new();
    for p in &generics.params {
        match p {
            syn::GenericParam::Type(t) if t.bounds.is_empty() && t.default.is_none() => {
                out.push(t.ident.clone())
            }
            syn::GenericParam::Type(t) => {
                return Err(syn::Error::new(
                    t.span(),
                    "generic dtype parameters take no bounds or defaults: write `<T>`",
                ))
            }
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "only generic dtype parameters (`<T>`) are supported; use #[constexpr] for compile-time values",
                ))
            }
        }
    }
    if let Some(w) = &generics.where_clause {
        return Err(syn::Error::new(
            w.span(),
            "`where` clauses are not supported in kernels",
        ));
    }
    Ok(out)
}
