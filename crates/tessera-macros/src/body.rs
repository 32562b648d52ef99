//! Lowers a kernel or function body — statements, `let`, assignments, `if`, `for` — to
//! Rust code that drives the IR builder. Rust's own scoping resolves DSL variables, so an
//! unknown identifier is a compile error at its span; `let mut` variables become SSA
//! values carried through the structured regions that assign them.

use crate::assigned::{outer_assignments, outer_assignments_expr};
use crate::types::TypeScope;
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

/// Shared state of one lowering.
pub struct Lower<'a> {
    pub ir: TokenStream,
    pub b: syn::Ident,
    pub scope: &'a TypeScope,
    /// Tensor parameters declared without `mut`: storing into them is a compile error.
    pub read_only: Vec<syn::Ident>,
}

pub fn err<T>(span: Span, msg: &str) -> syn::Result<T> {
    Err(syn::Error::new(span, msg))
}

/// A hygienic temporary name.
pub fn tmp(name: &str) -> syn::Ident {
    syn::Ident::new(name, Span::mixed_site())
}

impl Lower<'_> {
    /// Lowers statements; returns their code and the tail expression's value code, if any.
    /// With `want_tail`, a final expression without `;` is the block's value; otherwise
    /// every statement is lowered for its effect.
    pub fn stmts(
        &self,
        stmts: &[syn::Stmt],
        want_tail: bool,
    ) -> syn::Result<(TokenStream, Option<TokenStream>)> {
        let mut code = TokenStream::new();
        let mut tail = None;
        for (i, s) in stmts.iter().enumerate() {
            let last = i + 1 == stmts.len();
            let loc = self.loc(s.span());
            match s {
                syn::Stmt::Expr(e, None) if want_tail && last && !is_statement_expr(e) => {
                    let v = self.expr(e)?;
                    code.extend(loc);
                    tail = Some(v);
                }
                _ => {
                    let c = self.stmt(s)?;
                    code.extend(loc);
                    code.extend(c);
                }
            }
        }
        Ok((code, tail))
    }

    fn loc(&self, span: Span) -> TokenStream {
        let b = &self.b;
        quote_spanned!(span=> #b.set_loc(::core::line!(), ::core::column!());)
    }

    fn stmt(&self, s: &syn::Stmt) -> syn::Result<TokenStream> {
        match s {
            syn::Stmt::Local(l) => self.local(l),
            syn::Stmt::Expr(e, _) => self.expr_stmt(e),
            syn::Stmt::Item(i) => err(
                i.span(),
                "items (fn, struct, use …) cannot be declared inside a kernel; declare them outside, and mark helper functions #[func]",
            ),
            syn::Stmt::Macro(m) => err(
                m.span(),
                "macros are not supported inside kernels; write the DSL operations directly",
            ),
        }
    }

    fn local(&self, l: &syn::Local) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        let Some(init) = &l.init else {
            return err(
                l.span(),
                "a `let` needs a value in a kernel: write `let mut x = 0.0f32;` and assign it later",
            );
        };
        if let Some((_, diverge)) = &init.diverge {
            return err(diverge.span(), "`let … else` is not supported in kernels");
        }
        let (pat, ascribed) = match &l.pat {
            syn::Pat::Type(t) => (&*t.pat, Some(&*t.ty)),
            p => (p, None),
        };
        match pat {
            syn::Pat::Ident(pi) => {
                if pi.by_ref.is_some() || pi.subpat.is_some() {
                    return err(
                        pi.span(),
                        "write a plain `let name = …;` or `let mut name = …;`",
                    );
                }
                let name = &pi.ident;
                let mutability = &pi.mutability;
                if let Some(frag) = self.frag_decl(&init.expr, name)? {
                    if ascribed.is_some() || mutability.is_some() {
                        return err(
                            l.span(),
                            "declare a fragment with a plain `let a = matrix_a::<T>();`",
                        );
                    }
                    return Ok(quote!(let #name = #frag;));
                }
                if let Some(arr) = self.array_decl(&init.expr, name)? {
                    if ascribed.is_some() {
                        return err(l.span(), "array declarations take their element type from the turbofish: `stack_array::<f32>(8)`");
                    }
                    return Ok(quote!(let #name = #arr;));
                }
                let value = self.expr(&init.expr)?;
                match ascribed {
                    Some(ty) => {
                        let sty = self.scope.scalar_expr(ty, ir)?;
                        let what = format!("the value of `{name}`");
                        Ok(quote!(
                            let #mutability #name = {
                                let __v = #value;
                                #ir::Value::Id(#b.coerce(__v, #sty, #what)?)
                            };
                        ))
                    }
                    None => Ok(quote!(let #mutability #name = #value;)),
                }
            }
            syn::Pat::Wild(_) => {
                let value = self.expr_discard(&init.expr)?;
                Ok(quote!(#value;))
            }
            syn::Pat::Tuple(t) => {
                let mut names = Vec::new();
                for p in &t.elems {
                    match p {
                        syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                            names.push((pi.mutability, pi.ident.clone()))
                        }
                        syn::Pat::Wild(_) => names.push((None, tmp("_"))),
                        other => {
                            return err(
                                other.span(),
                                "destructure into plain names: `let (a, b) = f(x);`",
                            )
                        }
                    }
                }
                let call =
                    match &*init.expr {
                        syn::Expr::Call(c) => self.dsl_call(c, true)?,
                        other => return err(
                            other.span(),
                            "only a call of a #[func] returning several values can be destructured",
                        ),
                    };
                let n = names.len();
                let binds = names.iter().enumerate().map(|(i, (m, id))| {
                    if id == "_" {
                        quote!()
                    } else {
                        quote!(let #m #id = __vals[#i];)
                    }
                });
                let msg = format!("destructuring into {n} names needs a function returning {n} values, this one returns {{}}");
                Ok(quote!(
                    let __vals: ::std::vec::Vec<#ir::Value> = #call;
                    if __vals.len() != #n {
                        return ::core::result::Result::Err(#b.error(::std::format!(#msg, __vals.len())));
                    }
                    #(#binds)*
                ))
            }
            other => err(
                other.span(),
                "write a plain `let name = …;` (patterns are not supported)",
            ),
        }
    }

    /// `matrix_a::<T>()` / `matrix_b::<T>()` / `matrix_acc()` / `matrix_rows()` in a `let`
    /// initializer, or an array of one of them: `[matrix_acc(); n]` (`n` known when the
    /// kernel is built).
    fn frag_decl(&self, e: &syn::Expr, name: &syn::Ident) -> syn::Result<Option<TokenStream>> {
        if let syn::Expr::Repeat(r) = e {
            let Some((role, elem)) = self.frag_kind(&r.expr)? else {
                return Ok(None);
            };
            let len = self.expr(&r.len)?;
            let b = &self.b;
            let name_str = name.to_string();
            return Ok(Some(
                quote!({ let __len = #len; #b.frag_array(#name_str, #role, #elem, __len)? }),
            ));
        }
        let Some((role, elem)) = self.frag_kind(e)? else {
            return Ok(None);
        };
        let b = &self.b;
        let name_str = name.to_string();
        Ok(Some(quote!(#b.frag(#name_str, #role, #elem)?)))
    }

    /// The role and element type code of a fragment declaration call, if `e` is one.
    fn frag_kind(&self, e: &syn::Expr) -> syn::Result<Option<(TokenStream, TokenStream)>> {
        let Some((c, last)) = path_call(e) else {
            return Ok(None);
        };
        let ir = &self.ir;
        let role = match last.ident.to_string().as_str() {
            "matrix_a" => quote!(#ir::FragRole::A),
            "matrix_b" => quote!(#ir::FragRole::B),
            "matrix_acc" => quote!(#ir::FragRole::Acc),
            "matrix_rows" => quote!(#ir::FragRole::Rows),
            _ => return Ok(None),
        };
        let elem = match &last.arguments {
            syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
                syn::GenericArgument::Type(t) => self.scope.scalar_expr(t, ir)?,
                other => return err(other.span(), "expected an element type: `::<f16>`"),
            },
            syn::PathArguments::None if last.ident == "matrix_acc" || last.ident == "matrix_rows" => {
                quote!(#ir::Scalar::F32)
            }
            _ => {
                return err(
                    last.span(),
                    "give the operand type: `matrix_a::<T>()` / `matrix_b::<T>()` (f16 or bf16); `matrix_acc()` and `matrix_rows()` are f32",
                )
            }
        };
        if !c.args.is_empty() {
            return err(
                c.span(),
                "a fragment declaration takes no arguments: every fragment is 16×16",
            );
        }
        Ok(Some((role, elem)))
    }

    /// `threadgroup_array::<T>(n)` / `stack_array::<T>(n)` in a `let` initializer.
    fn array_decl(&self, e: &syn::Expr, name: &syn::Ident) -> syn::Result<Option<TokenStream>> {
        let Some((c, last)) = path_call(e) else {
            return Ok(None);
        };
        let method = match last.ident.to_string().as_str() {
            "threadgroup_array" => quote!(shared_array),
            "stack_array" => quote!(local_array),
            _ => return Ok(None),
        };
        let elem = match &last.arguments {
            syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
                syn::GenericArgument::Type(t) => self.scope.scalar_expr(t, &self.ir)?,
                other => return err(other.span(), "expected an element type: `::<f32>`"),
            },
            _ => return err(
                last.span(),
                "give the element type: `threadgroup_array::<f32>(32)` / `stack_array::<f32>(8)`",
            ),
        };
        if c.args.len() != 1 {
            return err(
                c.span(),
                "an array takes one argument, its length (a literal or #[constexpr] expression)",
            );
        }
        let len = self.expr(&c.args[0])?;
        let b = &self.b;
        let name_str = name.to_string();
        Ok(Some(
            quote!({ let __len = #len; #b.#method(#name_str, #elem, __len)? }),
        ))
    }

    /// An expression in statement position.
    pub fn expr_stmt(&self, e: &syn::Expr) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        match e {
            syn::Expr::Assign(a) => {
                let target = self.assign_target(&a.left)?;
                let value = self.expr(&a.right)?;
                Ok(quote!(#target = #value;))
            }
            syn::Expr::Binary(bin) if compound_op(&bin.op).is_some() => {
                let op = compound_op(&bin.op).expect("checked");
                let target = self.assign_target(&bin.left)?;
                let value = self.expr(&bin.right)?;
                Ok(
                    quote!(#target = { let __r = #value; #b.binary(#ir::BinaryOp::#op, #target, __r)? };),
                )
            }
            syn::Expr::ForLoop(f) => self.for_loop(f),
            syn::Expr::If(i) => {
                let code = self.if_expr(i, false)?;
                Ok(quote!(#code;))
            }
            syn::Expr::Block(blk) => {
                self.check_block_attrs(blk)?;
                let (code, _) = self.stmts(&blk.block.stmts, false)?;
                Ok(quote!({ #code }))
            }
            syn::Expr::Call(c) => self.call_stmt(c),
            other => {
                let v = self.expr_discard(other)?;
                Ok(quote!(let _ = #v;))
            }
        }
    }

    /// An expression whose value is dropped: DSL function calls may return any number of values.
    fn expr_discard(&self, e: &syn::Expr) -> syn::Result<TokenStream> {
        if let syn::Expr::Call(c) = e {
            if self.is_dsl_call(c) {
                return self.dsl_call(c, true);
            }
        }
        self.expr(e)
    }

    fn assign_target(&self, e: &syn::Expr) -> syn::Result<syn::Ident> {
        match e {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                Ok(p.path.get_ident().cloned().expect("checked"))
            }
            syn::Expr::Index(_) => err(
                e.span(),
                "write memory with store(t[i], value); plain indexing is not supported",
            ),
            _ => err(e.span(), "only variables can be assigned: `x = …;`"),
        }
    }

    pub fn check_block_attrs(&self, blk: &syn::ExprBlock) -> syn::Result<()> {
        if blk.label.is_some() {
            return err(blk.span(), "labelled blocks are not supported in kernels");
        }
        Ok(())
    }

    /// `for i in range(a, b, step) { … }` / `for i in a..b { … }`.
    fn for_loop(&self, f: &syn::ExprForLoop) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        if f.label.is_some() {
            return err(
                f.span(),
                "loop labels are not supported: loops cannot be exited early",
            );
        }
        let (start, end, step) = self.loop_range(&f.expr)?;
        let iv = match &*f.pat {
            syn::Pat::Ident(pi)
                if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() =>
            {
                pi.ident.clone()
            }
            syn::Pat::Wild(_) => tmp("_"),
            other => {
                return err(
                    other.span(),
                    "the loop variable must be a plain name: `for i in 0..n`",
                )
            }
        };
        let carried: Vec<syn::Ident> = outer_assignments(&f.body)
            .into_iter()
            .filter(|id| *id != iv)
            .collect();
        let (body, _) = self.stmts(&f.body.stmts, false)?;
        let idx: Vec<usize> = (0..carried.len()).collect();
        let write_back = write_back(&carried, 0, quote!(__res));
        let bind_iv = if iv == "_" {
            quote!()
        } else {
            quote!(let #iv = __iv;)
        };
        Ok(quote!({
            let __start = #start;
            let __end = #end;
            let __step = #step;
            let (__iv, __inner) = #b.begin_for(__start, __end, __step, &[#(#carried),*])?;
            let __res: ::std::vec::Vec<#ir::Value> = {
                #bind_iv
                #( #[allow(unused_mut)] let mut #carried = __inner[#idx]; )*
                #body
                #b.end_for(&[#(#carried),*])?
            };
            #(#write_back)*
        }))
    }

    fn loop_range(&self, e: &syn::Expr) -> syn::Result<(TokenStream, TokenStream, TokenStream)> {
        match e {
            syn::Expr::Range(r) => {
                if let syn::RangeLimits::Closed(_) = r.limits {
                    return err(
                        r.span(),
                        "inclusive ranges `a..=b` are not supported: write `a..(b + 1)`",
                    );
                }
                let (Some(s), Some(t)) = (&r.start, &r.end) else {
                    return err(
                        r.span(),
                        "open ranges are not supported: give both bounds, `start..end`",
                    );
                };
                let ir = &self.ir;
                Ok((self.expr(s)?, self.expr(t)?, quote!(#ir::Value::Int(1))))
            }
            syn::Expr::Call(c) if path_is(&c.func, "range") => {
                let args: Vec<&syn::Expr> = c.args.iter().collect();
                match args.as_slice() {
                    [s, t] => {
                        let ir = &self.ir;
                        Ok((self.expr(s)?, self.expr(t)?, quote!(#ir::Value::Int(1))))
                    }
                    [s, t, st] => Ok((self.expr(s)?, self.expr(t)?, self.expr(st)?)),
                    _ => err(c.span(), "`range` takes (start, end) or (start, end, step)"),
                }
            }
            other => err(
                other.span(),
                "a kernel loop runs over `range(start, end, step)` or `start..end`",
            ),
        }
    }

    /// `if c { … } else { … }`, as a statement or (`want_value`) as an expression.
    pub fn if_expr(&self, e: &syn::ExprIf, want_value: bool) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        if let syn::Expr::Let(l) = &*e.cond {
            return err(
                l.span(),
                "`if let` is not supported in kernels: use a bool condition",
            );
        }
        let mut carried = outer_assignments(&e.then_branch);
        if let Some((_, els)) = &e.else_branch {
            for id in outer_assignments_expr(els) {
                if !carried.contains(&id) {
                    carried.push(id);
                }
            }
        }
        let cond = self.expr(&e.cond)?;
        let then_code = self.branch(
            &e.then_branch.stmts,
            want_value,
            &carried,
            e.then_branch.span(),
        )?;
        let else_code = match &e.else_branch {
            Some((_, els)) => match &**els {
                syn::Expr::Block(blk) => {
                    self.check_block_attrs(blk)?;
                    self.branch(&blk.block.stmts, want_value, &carried, blk.span())?
                }
                syn::Expr::If(inner) => {
                    let inner_code = self.if_expr(inner, want_value)?;
                    let value = if want_value { quote!(__v,) } else { quote!() };
                    quote!({
                        #( #[allow(unused_mut)] let mut #carried = #carried; )*
                        let __v = #inner_code;
                        ::std::vec![#value #(#carried),*]
                    })
                }
                other => return err(other.span(), "expected a block after `else`"),
            },
            None => {
                if want_value {
                    return err(e.span(), "an `if` used as a value needs an `else` branch");
                }
                quote!(::std::vec![#(#carried),*])
            }
        };
        let offset = usize::from(want_value);
        let write_back = write_back(&carried, offset, quote!(__r));
        let result = if want_value {
            quote!(__r[0])
        } else {
            quote!(())
        };
        Ok(quote!({
            let __c = #cond;
            #b.begin_if(__c)?;
            let __t: ::std::vec::Vec<#ir::Value> = #then_code;
            #b.begin_else(&__t)?;
            let __e: ::std::vec::Vec<#ir::Value> = #else_code;
            let __r = #b.end_if(&__e)?;
            #(#write_back)*
            #result
        }))
    }

    /// One branch of an `if`: its own copies of the carried variables, its statements, and
    /// the vector [value?, carried…] it yields.
    fn branch(
        &self,
        stmts: &[syn::Stmt],
        want_value: bool,
        carried: &[syn::Ident],
        span: Span,
    ) -> syn::Result<TokenStream> {
        let (code, tail) = self.stmts(stmts, want_value)?;
        let value = match (want_value, tail) {
            (true, Some(t)) => quote!(#t,),
            (true, None) => {
                return err(span, "this branch must end with a value (no `;` after it)")
            }
            (false, _) => quote!(),
        };
        Ok(quote!({
            #( #[allow(unused_mut)] let mut #carried = #carried; )*
            #code
            ::std::vec![#value #(#carried),*]
        }))
    }
}

/// `x = results[i];` for each carried variable, spanned at the variable so that assigning
/// an immutable one is reported where the user wrote the assignment.
fn write_back(carried: &[syn::Ident], offset: usize, results: TokenStream) -> Vec<TokenStream> {
    carried
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let i = i + offset;
            quote_spanned!(id.span()=> #id = #results[#i];)
        })
        .collect()
}

/// Statement-like expressions (`for`, `if` without a value…) that end a block without
/// being its value.
fn is_statement_expr(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::ForLoop(_) | syn::Expr::Assign(_) => true,
        syn::Expr::Binary(b) => compound_op(&b.op).is_some(),
        syn::Expr::Call(c) => [
            "store",
            "barrier",
            "simd_barrier",
            "copy_async",
            "copy_async_or_zero",
            "commit_copies",
            "wait_copies",
        ]
        .iter()
        .any(|n| path_is(&c.func, n)),
        syn::Expr::If(i) => i.else_branch.is_none(),
        _ => false,
    }
}

/// The IR op behind a compound assignment (`+=` → `Add`).
pub fn compound_op(op: &syn::BinOp) -> Option<syn::Ident> {
    use syn::BinOp::*;
    let name = match op {
        AddAssign(_) => "Add",
        SubAssign(_) => "Sub",
        MulAssign(_) => "Mul",
        DivAssign(_) => "Div",
        RemAssign(_) => "Rem",
        BitAndAssign(_) => "And",
        BitOrAssign(_) => "Or",
        BitXorAssign(_) => "Xor",
        ShlAssign(_) => "Shl",
        ShrAssign(_) => "Shr",
        _ => return None,
    };
    Some(syn::Ident::new(name, Span::call_site()))
}

/// True if `e` is the single-segment path `name`.
pub fn path_is(e: &syn::Expr, name: &str) -> bool {
    matches!(e, syn::Expr::Path(p) if p.path.is_ident(name))
}

/// `e` as a call of a path (`f(…)`, `a::b::<T>(…)`) with the path's last segment.
fn path_call(e: &syn::Expr) -> Option<(&syn::ExprCall, &syn::PathSegment)> {
    let syn::Expr::Call(c) = e else {
        return None;
    };
    let syn::Expr::Path(p) = &*c.func else {
        return None;
    };
    Some((c, p.path.segments.last()?))
}
