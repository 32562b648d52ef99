//! Finds the path under which generated code reaches the IR crate: `::tessera::ir` for
//! users of the facade crate, `::tessera_ir` for crates that depend on the IR directly.

use proc_macro2::{Span, TokenStream};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote;

pub fn ir_crate() -> TokenStream {
    if let Ok(found) = crate_name("tessera") {
        let name = match found {
            FoundCrate::Itself => "tessera".to_string(),
            FoundCrate::Name(n) => n,
        };
        let ident = syn::Ident::new(&name, Span::call_site());
        return quote!(::#ident::ir);
    }
    match crate_name("tessera-ir") {
        Ok(FoundCrate::Name(n)) => {
            let ident = syn::Ident::new(&n, Span::call_site());
            quote!(::#ident)
        }
        _ => quote!(::tessera_ir),
    }
}

/// The hygienic name of the builder variable in generated code.
pub fn builder_ident() -> syn::Ident {
    syn::Ident::new("__tessera_builder", Span::mixed_site())
}

/// The path under which generated launchers reach the runtime: `::tessera::runtime` for
/// users of the facade crate, `::tessera_runtime` for crates that depend on it directly,
/// or `None` for crates without a runtime (they get the IR builder but no launcher).
pub fn runtime_crate() -> Option<TokenStream> {
    if let Ok(found) = crate_name("tessera") {
        let name = match found {
            FoundCrate::Itself => "tessera".to_string(),
            FoundCrate::Name(n) => n,
        };
        let ident = syn::Ident::new(&name, Span::call_site());
        return Some(quote!(::#ident::runtime));
    }
    match crate_name("tessera-runtime") {
        Ok(FoundCrate::Name(n)) => {
            let ident = syn::Ident::new(&n, Span::call_site());
            Some(quote!(::#ident))
        }
        Ok(FoundCrate::Itself) => Some(quote!(::tessera_runtime)),
        Err(_) => None,
    }
}
