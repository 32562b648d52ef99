//! `#[func]`: a reusable DSL function with scalar arguments and results, memory
//! arguments (`t: Mem<T>`, `mut t: Mem<T>` to store to it) that take a tensor, threadgroup
//! array or stack array, and fragment arguments (`f: MatrixAcc`, `a: MatrixA<T>`,
//! `acc: [MatrixAcc; 4]`, or `acc: [MatrixAcc]` for an array of the caller's length) that
//! take the caller's fragments; instantiated for the argument dtypes (and fragment array
//! lengths) at each call and inlined by the compiler at any depth.

use crate::body::{err, Lower};
use crate::kernel::check_fn_shape;
use crate::paths::{builder_ident, ir_crate};
use crate::types::{generic_dtypes, TypeScope};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;

pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    if !attr.is_empty() {
        return err(attr.span(), "#[func] takes no arguments");
    }
    let f: syn::ItemFn = syn::parse2(item)?;
    check_fn_shape(&f.sig, "DSL function")?;
    let ir = ir_crate();
    let b = builder_ident();
    let generics = generic_dtypes(&f.sig.generics)?;
    let scope = TypeScope {
        generics: generics.clone(),
    };

    let mut args = Vec::new();
    for arg in &f.sig.inputs {
        let syn::FnArg::Typed(pt) = arg else {
            return err(arg.span(), "a DSL function takes no `self`");
        };
        if let Some(a) = pt.attrs.first() {
            return err(
                a.span(),
                "DSL function arguments take no attributes (#[constexpr] belongs on kernel parameters)",
            );
        }
        let (name, mutability) = match &*pt.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (pi.ident.clone(), pi.mutability)
            }
            other => return err(other.span(), "an argument is a plain name: `x: f32`"),
        };
        if let syn::Type::Path(p) = &*pt.ty {
            if p.path.segments.last().is_some_and(|s| s.ident == "Tensor") {
                return err(
                    pt.ty.span(),
                    "a DSL function takes memory as `Mem<T>` (any tensor, threadgroup or stack array of T)",
                );
            }
        }
        args.push((name, mutability, (*pt.ty).clone()));
    }
    // `Mem<T>` arguments: the element type `T`.
    let mem_elem = |ty: &syn::Type| -> Option<syn::Type> {
        let syn::Type::Path(p) = ty else { return None };
        let last = p.path.segments.last()?;
        if last.ident != "Mem" {
            return None;
        }
        match &last.arguments {
            syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
                syn::GenericArgument::Type(t) => Some(t.clone()),
                _ => None,
            },
            _ => None,
        }
    };

    let frag_params: Vec<Option<FragParam>> = args
        .iter()
        .map(|(_, _, ty)| frag_param(ty))
        .collect::<syn::Result<_>>()?;

    // Each generic is bound to the dtype of the first argument declared with it.
    let mut generic_binds = Vec::new();
    for g in &generics {
        let is_g = |ty: &syn::Type| matches!(ty, syn::Type::Path(p) if p.path.is_ident(g));
        let Some(pos) = args.iter().zip(&frag_params).position(|((_, _, ty), fp)| {
            is_g(ty)
                || mem_elem(ty).is_some_and(|e| is_g(&e))
                || fp.as_ref().and_then(|f| f.elem.as_ref()).is_some_and(&is_g)
        }) else {
            return err(
                g.span(),
                "a generic dtype of a DSL function must be the type of one of its arguments",
            );
        };
        let fname = f.sig.ident.to_string();
        let msg = format!(
            "cannot infer `{g}` of `{fname}`: argument {pos} is an untyped literal; give it a type (`1.0f32`) or cast it"
        );
        generic_binds.push(quote!(
            let #g: #ir::Scalar = match __arg_types.get(#pos).and_then(|a| a.elem) {
                ::core::option::Option::Some(t) => t,
                ::core::option::Option::None => return ::core::result::Result::Err(#b.error(#msg)),
            };
        ));
    }
    let mut arg_binds = Vec::new();
    let mut read_only = Vec::new();
    for (pos, ((name, mutability, ty), fp)) in args.iter().zip(&frag_params).enumerate() {
        if let Some(fp) = fp {
            if let Some(m) = mutability {
                return err(
                    m.span(),
                    "a fragment argument takes no `mut`: the function works on the caller's \
                     fragments, which every fragment verb may change",
                );
            }
            let role = format_ident!("{}", fp.role);
            let elem = match &fp.elem {
                Some(t) => scope.scalar_expr(t, &ir)?,
                None => quote!(#ir::Scalar::F32),
            };
            let n = name.to_string();
            let fname = f.sig.ident.to_string();
            let len = match &fp.len {
                FragLen::One => quote!(::core::option::Option::None),
                FragLen::Fixed(e) => quote!(::core::option::Option::Some((#e) as u32)),
                FragLen::Caller => {
                    let msg = format!(
                        "argument {pos} of `{fname}` is the fragment array `{n}`: pass a \
                         whole array declared with `let {n} = [matrix_…(); len];`"
                    );
                    quote!(match __arg_types.get(#pos).and_then(|a| a.len) {
                        ::core::option::Option::Some(n) => ::core::option::Option::Some(n),
                        ::core::option::Option::None => {
                            return ::core::result::Result::Err(#b.error(#msg))
                        }
                    })
                }
            };
            let pick = if matches!(fp.len, FragLen::One) {
                quote!(.frags[0])
            } else {
                quote!()
            };
            arg_binds.push(quote!(
                let #name = #b.func_frag_arg(#n, #ir::FragRole::#role, #elem, #len)?#pick;
            ));
        } else if let Some(elem) = mem_elem(ty) {
            let sty = scope.scalar_expr(&elem, &ir)?;
            let writable = mutability.is_some();
            if !writable {
                read_only.push(name.clone());
            }
            let n = name.to_string();
            arg_binds.push(quote!(let #name = #b.func_mem_arg(#n, #sty, #writable);));
        } else {
            let sty = scope.scalar_expr(ty, &ir)?;
            arg_binds.push(quote!(let #mutability #name = #b.func_arg(#sty);));
        }
    }

    let ret_types: Vec<syn::Type> = match &f.sig.output {
        syn::ReturnType::Default => vec![],
        syn::ReturnType::Type(_, ty) => match &**ty {
            syn::Type::Tuple(t) => t.elems.iter().cloned().collect(),
            other => vec![other.clone()],
        },
    };
    let ret_scalars: Vec<TokenStream> = ret_types
        .iter()
        .map(|t| scope.scalar_expr(t, &ir))
        .collect::<syn::Result<_>>()?;

    let lower = Lower {
        ir: ir.clone(),
        b: b.clone(),
        scope: &scope,
        read_only,
    };
    let stmts = &f.block.stmts;
    let (body, returns) = if ret_types.is_empty() {
        (lower.stmts(stmts, false)?.0, quote!())
    } else {
        // The final expression gives the results; a tuple gives several.
        let (init, last) =
            match stmts.split_last() {
                Some((syn::Stmt::Expr(e, None), init)) => (init, e),
                _ => return err(
                    f.block.span(),
                    "a DSL function returns its final expression: end the body with it (no `;`)",
                ),
            };
        let (code, _) = lower.stmts(init, false)?;
        let values: Vec<TokenStream> = match last {
            syn::Expr::Tuple(t) => t
                .elems
                .iter()
                .map(|e| lower.expr(e))
                .collect::<syn::Result<_>>()?,
            e => vec![lower.expr(e)?],
        };
        if values.len() != ret_types.len() {
            return err(
                last.span(),
                &format!(
                    "the function declares {} result(s) but returns {}",
                    ret_types.len(),
                    values.len()
                ),
            );
        }
        (code, quote!(#(#values),*))
    };

    let name = &f.sig.ident;
    let name_str = name.to_string();
    let vis = &f.vis;
    let docs: Vec<&syn::Attribute> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let n_args = args.len();
    Ok(quote! {
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug)]
        #vis struct #name;

        impl #ir::DslFunction for #name {
            #[allow(non_snake_case, unused_mut, unused_variables, unused_assignments, unused_braces, clippy::all)]
            fn build(
                __arg_types: &[#ir::ArgInfo],
            ) -> ::core::result::Result<::std::sync::Arc<#ir::Function>, #ir::IrError> {
                let __guard = #ir::FunctionDepthGuard::enter(#name_str)?;
                let mut #b = #ir::Builder::function(#name_str);
                if __arg_types.len() != #n_args {
                    return ::core::result::Result::Err(#b.error(::std::format!(
                        "`{}` takes {} argument(s), {} given", #name_str, #n_args, __arg_types.len()
                    )));
                }
                #(#generic_binds)*
                #(#arg_binds)*
                #body
                let __returns: ::std::vec::Vec<#ir::Value> = ::std::vec![#returns];
                ::core::result::Result::Ok(::std::sync::Arc::new(
                    #b.finish_function(&__returns, &[#(#ret_scalars),*])?,
                ))
            }
        }
    })
}

/// How many fragments a fragment argument takes.
enum FragLen {
    /// One fragment: `f: MatrixAcc`.
    One,
    /// An array of a length the function fixes: `acc: [MatrixAcc; 4]`.
    Fixed(syn::Expr),
    /// An array of the length the caller passes: `acc: [MatrixAcc]`.
    Caller,
}

/// A fragment argument's type: the role (a `FragRole` variant), the operand element type
/// (`None` for the f32 accumulators and row vectors) and the length.
struct FragParam {
    role: &'static str,
    elem: Option<syn::Type>,
    len: FragLen,
}

/// The fragment argument `ty` declares, if it is one: `MatrixA<T>`, `MatrixB<T>`,
/// `MatrixAcc`, `MatrixRows`, or an array of one, `[MatrixAcc; 4]` or `[MatrixAcc]`.
fn frag_param(ty: &syn::Type) -> syn::Result<Option<FragParam>> {
    let (one, len) = match ty {
        syn::Type::Array(a) => (&*a.elem, FragLen::Fixed(a.len.clone())),
        syn::Type::Slice(s) => (&*s.elem, FragLen::Caller),
        other => (other, FragLen::One),
    };
    let syn::Type::Path(p) = one else {
        return Ok(None);
    };
    let Some(last) = p.path.segments.last() else {
        return Ok(None);
    };
    let role = match last.ident.to_string().as_str() {
        "MatrixA" => "A",
        "MatrixB" => "B",
        "MatrixAcc" => "Acc",
        "MatrixRows" => "Rows",
        _ if matches!(len, FragLen::One) => return Ok(None),
        _ => {
            return err(
                one.span(),
                "an array argument holds matrix fragments: `[MatrixAcc; 4]`, `[MatrixA<T>]`, …",
            )
        }
    };
    let elem = match (&last.arguments, role) {
        (syn::PathArguments::AngleBracketed(a), "A" | "B") if a.args.len() == 1 => {
            match &a.args[0] {
                syn::GenericArgument::Type(t) => Some(t.clone()),
                other => return err(other.span(), "expected an element type: `MatrixA<T>`"),
            }
        }
        (syn::PathArguments::None, "Acc" | "Rows") => None,
        (_, "A" | "B") => {
            return err(
                last.span(),
                "give the operand type: `MatrixA<T>` / `MatrixB<T>` (f16 or bf16)",
            )
        }
        _ => {
            return err(
                last.span(),
                "`MatrixAcc` and `MatrixRows` are f32 and take no type argument",
            )
        }
    };
    Ok(Some(FragParam { role, elem, len }))
}
