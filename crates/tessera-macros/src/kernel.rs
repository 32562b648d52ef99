//! `#[kernel]`: parses the signature (generic dtypes, tensors, runtime scalars,
//! constexprs) and generates the kernel's module: its `KernelDef`, typed IR builder and
//! typed launcher.

use crate::body::{err, Lower};
use crate::launcher::launcher;
use crate::paths::{builder_ident, ir_crate, runtime_crate};
use crate::types::{generic_dtypes, TypeScope, SCALAR_NAMES};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;

pub(crate) enum ParamKind {
    Tensor { elem: syn::Type, writable: bool },
    Scalar(syn::Type),
    Constexpr(&'static str),
}

pub(crate) struct ParamInfo {
    pub name: syn::Ident,
    pub kind: ParamKind,
}

const CONSTEXPR_TYPES: [(&str, &str); 4] = [
    ("u32", "U32"),
    ("i32", "I32"),
    ("f32", "F32"),
    ("bool", "Bool"),
];

/// First line of the doc comment, if any.
pub fn doc_line(attrs: &[syn::Attribute]) -> String {
    for a in attrs {
        if a.path().is_ident("doc") {
            if let syn::Meta::NameValue(nv) = &a.meta {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
                    return s.value().trim().to_string();
                }
            }
        }
    }
    String::new()
}

/// Checks the parts of a signature neither kernels nor functions support.
pub fn check_fn_shape(sig: &syn::Signature, what: &str) -> syn::Result<()> {
    if let Some(c) = &sig.constness {
        return err(c.span(), &format!("a {what} cannot be `const`"));
    }
    if let Some(a) = &sig.asyncness {
        return err(a.span(), &format!("a {what} cannot be `async`"));
    }
    if let Some(u) = &sig.unsafety {
        return err(u.span(), &format!("a {what} cannot be `unsafe`"));
    }
    if let Some(a) = &sig.abi {
        return err(a.span(), &format!("a {what} cannot have an ABI"));
    }
    if let Some(v) = &sig.variadic {
        return err(v.span(), &format!("a {what} cannot be variadic"));
    }
    Ok(())
}

fn tensor_elem(ty: &syn::Type) -> Option<&syn::Type> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Tensor" {
        return None;
    }
    match &last.arguments {
        syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

fn parse_params(f: &syn::ItemFn) -> syn::Result<Vec<ParamInfo>> {
    let mut out = Vec::new();
    for arg in &f.sig.inputs {
        let syn::FnArg::Typed(pt) = arg else {
            return err(arg.span(), "a kernel takes no `self`");
        };
        let mut constexpr = false;
        for a in &pt.attrs {
            if a.path().is_ident("constexpr") {
                constexpr = true;
            } else {
                return err(
                    a.span(),
                    "unknown parameter attribute: only #[constexpr] is supported",
                );
            }
        }
        let (name, mutable) = match &*pt.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (pi.ident.clone(), pi.mutability.is_some())
            }
            other => {
                return err(
                    other.span(),
                    "a kernel parameter is a plain name: `x: Tensor<T>`",
                )
            }
        };
        let kind = if constexpr {
            if mutable {
                return err(pt.span(), "a #[constexpr] parameter cannot be `mut`");
            }
            let ty_name = match &*pt.ty {
                syn::Type::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                _ => None,
            };
            match CONSTEXPR_TYPES
                .iter()
                .find(|(n, _)| Some(*n) == ty_name.as_deref())
            {
                Some((n, _)) => ParamKind::Constexpr(n),
                None => {
                    return err(
                        pt.ty.span(),
                        "a #[constexpr] parameter must be u32, i32, f32 or bool",
                    )
                }
            }
        } else if let Some(elem) = tensor_elem(&pt.ty) {
            ParamKind::Tensor {
                elem: elem.clone(),
                writable: mutable,
            }
        } else {
            if mutable {
                return err(
                    pt.span(),
                    "only tensors can be `mut` parameters; runtime scalars are read-only (copy into a `let mut`)",
                );
            }
            ParamKind::Scalar((*pt.ty).clone())
        };
        out.push(ParamInfo { name, kind });
    }
    Ok(out)
}

/// `TypeSig::Fixed(Scalar::F32)` or `TypeSig::Generic(i)` for a signature constant.
fn type_sig(ty: &syn::Type, generics: &[syn::Ident], ir: &TokenStream) -> syn::Result<TokenStream> {
    let bad = || {
        syn::Error::new(
            ty.span(),
            "unsupported type: expected f32, f16, bf16, u32, i32, u8, i8, bool or a generic dtype parameter",
        )
    };
    let syn::Type::Path(p) = ty else {
        return Err(bad());
    };
    let Some(id) = p.path.get_ident() else {
        return Err(bad());
    };
    if let Some(i) = generics.iter().position(|g| g == id) {
        return Ok(quote!(#ir::TypeSig::Generic(#i)));
    }
    let name = id.to_string();
    let (_, v) = SCALAR_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(bad)?;
    let v = syn::Ident::new(v, id.span());
    Ok(quote!(#ir::TypeSig::Fixed(#ir::Scalar::#v)))
}

/// `#[kernel(group_size = N, groups_per_core = M)]`: the declared launch shape, if any.
fn occupancy_arg(attr: TokenStream) -> syn::Result<Option<(u32, u32)>> {
    if attr.is_empty() {
        return Ok(None);
    }
    let usage = "#[kernel] takes `group_size = N` and optionally `groups_per_core = M`";
    let args = syn::parse::Parser::parse2(
        syn::punctuated::Punctuated::<syn::MetaNameValue, syn::Token![,]>::parse_terminated,
        attr.clone(),
    )
    .map_err(|e| syn::Error::new(e.span(), usage))?;
    let (mut group_size, mut per_core) = (None, None);
    for a in &args {
        let value = match &a.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse::<u32>()?,
            v => return err(v.span(), "expected an integer literal"),
        };
        let slot = if a.path.is_ident("group_size") {
            &mut group_size
        } else if a.path.is_ident("groups_per_core") {
            &mut per_core
        } else {
            return err(a.path.span(), usage);
        };
        if slot.replace(value).is_some() {
            return err(a.path.span(), "given twice");
        }
    }
    match group_size {
        Some(gs) => Ok(Some((gs, per_core.unwrap_or(1)))),
        None => err(attr.span(), usage),
    }
}

pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let occupancy = occupancy_arg(attr)?;
    let f: syn::ItemFn = syn::parse2(item)?;
    check_fn_shape(&f.sig, "kernel")?;
    if let syn::ReturnType::Type(_, ty) = &f.sig.output {
        return err(
            ty.span(),
            "a kernel returns nothing: write its results with store(out[i], value)",
        );
    }
    let ir = ir_crate();
    let b = builder_ident();
    let generics = generic_dtypes(&f.sig.generics)?;
    let params = parse_params(&f)?;
    if !params
        .iter()
        .any(|p| matches!(p.kind, ParamKind::Tensor { writable: true, .. }))
    {
        return err(
            f.sig.paren_token.span.join(),
            "a kernel needs at least one `mut` tensor to write its output: `mut out: Tensor<T>`",
        );
    }
    let scope = TypeScope {
        generics: generics.clone(),
    };
    let lower = Lower {
        ir: ir.clone(),
        b: b.clone(),
        scope: &scope,
        read_only: params
            .iter()
            .filter(|p| {
                matches!(
                    p.kind,
                    ParamKind::Tensor {
                        writable: false,
                        ..
                    }
                )
            })
            .map(|p| p.name.clone())
            .collect(),
    };
    let (body, _) = lower.stmts(&f.block.stmts, false)?;

    let name = &f.sig.ident;
    let name_str = name.to_string();
    let vis = &f.vis;
    let doc = doc_line(&f.attrs);
    let docs: Vec<&syn::Attribute> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let generic_strs: Vec<String> = generics.iter().map(|g| g.to_string()).collect();

    // Signature constants.
    let mut param_sigs = Vec::new();
    let mut constexpr_sigs = Vec::new();
    for p in &params {
        let pname = p.name.to_string();
        match &p.kind {
            ParamKind::Tensor { elem, writable } => {
                let elem = type_sig(elem, &generics, &ir)?;
                param_sigs.push(quote!(#ir::ParamSig::Tensor { name: #pname, elem: #elem, writable: #writable }));
            }
            ParamKind::Scalar(ty) => {
                let ty = type_sig(ty, &generics, &ir)?;
                param_sigs.push(quote!(#ir::ParamSig::Scalar { name: #pname, ty: #ty }));
            }
            ParamKind::Constexpr(t) => {
                let (_, v) = CONSTEXPR_TYPES
                    .iter()
                    .find(|(n, _)| n == t)
                    .expect("known type");
                let v = syn::Ident::new(v, Span::call_site());
                constexpr_sigs
                    .push(quote!(#ir::ConstexprSig { name: #pname, ty: #ir::Scalar::#v }));
            }
        }
    }

    // Parameter declarations inside the build function.
    let generic_binds = generics.iter().enumerate().map(|(i, g)| {
        let gs = g.to_string();
        let msg = format!("no dtype given for generic `{gs}`");
        quote!(
            let #g: #ir::Scalar = match __spec.dtypes.get(#i) {
                ::core::option::Option::Some(t) => *t,
                ::core::option::Option::None => return ::core::result::Result::Err(#b.error(#msg)),
            };
            #b.generic(#gs, #g);
        )
    });
    let mut constexpr_index = 0usize;
    let mut param_binds = Vec::new();
    for p in &params {
        let pname = &p.name;
        let pstr = pname.to_string();
        param_binds.push(match &p.kind {
            ParamKind::Tensor { elem, writable } => {
                let elem = scope.scalar_expr(elem, &ir)?;
                quote!(let #pname = #b.tensor_param(#pstr, #elem, #writable);)
            }
            ParamKind::Scalar(ty) => {
                let ty = scope.scalar_expr(ty, &ir)?;
                quote!(let #pname = #b.scalar_param(#pstr, #ty);)
            }
            ParamKind::Constexpr(_) => {
                let i = constexpr_index;
                constexpr_index += 1;
                let msg = format!("no value given for constexpr `{pstr}`");
                quote!(
                    let #pname = match __spec.constexprs.get(#i) {
                        ::core::option::Option::Some(v) => #b.constexpr(#pstr, *v),
                        ::core::option::Option::None => return ::core::result::Result::Err(#b.error(#msg)),
                    };
                )
            }
        });
    }

    // The typed builder: `ir(T, n, …)`.
    let mut typed_args = Vec::new();
    let mut typed_dtypes = Vec::new();
    let mut typed_consts = Vec::new();
    for g in &generics {
        typed_args.push(quote!(#g: #ir::Scalar));
        typed_dtypes.push(quote!(#g));
    }
    for p in &params {
        if let ParamKind::Constexpr(t) = &p.kind {
            let n = &p.name;
            let t = syn::Ident::new(t, Span::call_site());
            typed_args.push(quote!(#n: #t));
            typed_consts.push(quote!(#ir::Literal::from(#n)));
        }
    }

    let set_occupancy = occupancy.map(|(gs, per_core)| quote!(#b.occupancy(#gs, #per_core)?;));
    let build_fn = syn::Ident::new(&format!("__tessera_build_{name_str}"), name.span());
    let launch_items = runtime_crate().map(|rt| launcher(&params, &generics, &ir, &rt));

    // The kernel is a module: `name::DEF`, `name::ir(…)`, `name::Args`, `name::launch(…)`.
    // The builder stays beside it, so the body resolves names where the kernel was written.
    Ok(quote! {
        #[doc(hidden)]
        #[allow(non_snake_case, unused_mut, unused_variables, unused_assignments, unused_braces, clippy::all)]
        fn #build_fn(__spec: &#ir::Specialization) -> ::core::result::Result<#ir::Kernel, #ir::IrError> {
            let mut #b = #ir::Builder::kernel(#name_str);
            #set_occupancy
            #(#generic_binds)*
            #(#param_binds)*
            #body
            #b.finish_kernel()
        }

        #(#docs)*
        #vis mod #name {
            /// The kernel's signature and IR builder, for the registry and the runtime.
            pub const DEF: #ir::KernelDef = #ir::KernelDef {
                signature: #ir::KernelSignature {
                    name: #name_str,
                    path: ::core::module_path!(),
                    doc: #doc,
                    generics: &[#(#generic_strs),*],
                    params: &[#(#param_sigs),*],
                    constexprs: &[#(#constexpr_sigs),*],
                },
                build: super::#build_fn,
            };

            /// Builds this kernel's IR for the given dtypes and constexpr values.
            #[allow(non_snake_case, clippy::too_many_arguments)]
            pub fn ir(#(#typed_args),*) -> ::core::result::Result<#ir::Kernel, #ir::IrError> {
                DEF.build(&#ir::Specialization::new(
                    ::std::vec![#(#typed_dtypes),*],
                    ::std::vec![#(#typed_consts),*],
                ))
            }

            #launch_items
        }
    })
}
