//! Lowers expressions — literals, operators, casts, methods, builtin and DSL function
//! calls — to builder calls that produce a `Value`.

use crate::body::{err, Lower};
use crate::frag::FRAG_STATEMENTS;
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use tessera_ir::{AtomicOp, Builtin, ReduceOp, ShuffleKind, SimdOp, UnaryOp};

const METHODS: &str =
    "cast::<T>(), bitcast::<T>(), exp, exp2, ln, log2, sqrt, rsqrt, recip, sin, cos, tanh, abs, \
floor, ceil, is_nan, is_infinite, sigmoid, silu, softplus, max, min, powf, mul_add, and len() of a fragment array";

fn ident(s: &str) -> syn::Ident {
    syn::Ident::new(s, Span::call_site())
}

/// The `UnaryOp` variant for a unary math function or method name.
fn unary_variant(name: &str) -> Option<syn::Ident> {
    let name = match name {
        "ln" => "log",
        "is_infinite" => "is_inf",
        n => n,
    };
    let op = UnaryOp::parse(name)?;
    if matches!(op, UnaryOp::Neg | UnaryOp::Not) {
        return None;
    }
    Some(ident(&format!("{op:?}")))
}

impl Lower<'_> {
    /// An expression in value position: code evaluating to an IR `Value`.
    pub fn expr(&self, e: &syn::Expr) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        match e {
            syn::Expr::Lit(l) => self.lit(&l.lit),
            syn::Expr::Path(p) => self.path(p),
            syn::Expr::Paren(p) => self.expr(&p.expr),
            syn::Expr::Group(g) => self.expr(&g.expr),
            syn::Expr::Binary(bin) => {
                if crate::body::compound_op(&bin.op).is_some() {
                    return err(bin.span(), "a compound assignment has no value; use it as a statement");
                }
                let Some(op) = binary_variant(&bin.op) else {
                    return err(bin.span(), "this operator is not supported in kernels");
                };
                let l = self.expr(&bin.left)?;
                let r = self.expr(&bin.right)?;
                Ok(quote!({ let __l = #l; let __r = #r; #b.binary(#ir::BinaryOp::#op, __l, __r)? }))
            }
            syn::Expr::Unary(u) => {
                let op = match u.op {
                    syn::UnOp::Neg(_) => ident("Neg"),
                    syn::UnOp::Not(_) => ident("Not"),
                    _ => return err(u.span(), "dereference is not supported in kernels"),
                };
                let v = self.expr(&u.expr)?;
                Ok(quote!({ let __v = #v; #b.unary(#ir::UnaryOp::#op, __v)? }))
            }
            syn::Expr::Cast(c) => {
                let ty = self.scope.scalar_expr(&c.ty, ir)?;
                let v = self.expr(&c.expr)?;
                Ok(quote!({ let __v = #v; #b.cast(__v, #ty)? }))
            }
            syn::Expr::MethodCall(m) => self.method(m),
            syn::Expr::Call(c) => self.call(c),
            syn::Expr::If(i) => self.if_expr(i, true),
            syn::Expr::Block(blk) => {
                self.check_block_attrs(blk)?;
                if blk.block.stmts.is_empty() {
                    return err(blk.span(), "an empty block has no value");
                }
                let (code, tail) = self.stmts(&blk.block.stmts, true)?;
                let Some(tail) = tail else {
                    return err(blk.span(), "this block must end with a value (no `;` after it)");
                };
                Ok(quote!({ #code #tail }))
            }
            syn::Expr::Index(i) => err(
                i.span(),
                "read memory with load(t[i]); plain indexing is not supported",
            ),
            syn::Expr::While(w) => err(
                w.while_token.span,
                "`while` loops are not supported: write `for i in range(start, end, step)` with a bound known to terminate",
            ),
            syn::Expr::Loop(l) => err(
                l.loop_token.span,
                "`loop` is not supported: write `for i in range(start, end, step)`",
            ),
            syn::Expr::Match(m) => err(
                m.match_token.span,
                "`match` is not supported: use `if`/`else` or `select(cond, a, b)`",
            ),
            syn::Expr::Return(r) => err(
                r.span(),
                "`return` is not supported: a kernel runs to its end (guard work with `if`), a #[func] returns its final expression",
            ),
            syn::Expr::Break(b) => err(
                b.span(),
                "`break` is not supported: loops cannot be exited early; guard the body with `if`",
            ),
            syn::Expr::Continue(c) => err(
                c.span(),
                "`continue` is not supported: guard the rest of the body with `if`",
            ),
            syn::Expr::Closure(c) => err(
                c.span(),
                "closures are not supported: write a #[func] and call it",
            ),
            syn::Expr::Range(r) => err(
                r.span(),
                "ranges only appear as the bounds of a `for` loop",
            ),
            syn::Expr::Macro(m) => err(
                m.span(),
                "macros are not supported inside kernels; write the DSL operations directly",
            ),
            syn::Expr::Tuple(t) => err(
                t.span(),
                "tuples are not values in kernels; only a #[func] may return one, as its final expression",
            ),
            syn::Expr::Array(a) => err(
                a.span(),
                "array literals are not supported: declare `let a = stack_array::<f32>(n);` and store into it",
            ),
            syn::Expr::Repeat(a) => err(
                a.span(),
                "array literals are not supported: declare `let a = stack_array::<f32>(n);` and store into it",
            ),
            syn::Expr::Reference(r) => err(r.span(), "references are not supported in kernels"),
            syn::Expr::Field(f) => err(f.span(), "field access is not supported in kernels"),
            syn::Expr::Try(t) => err(t.span(), "`?` is not supported in kernels"),
            syn::Expr::Let(l) => err(l.span(), "`let` expressions are not supported in kernels"),
            syn::Expr::Assign(a) => err(a.span(), "an assignment has no value; use it as a statement"),
            syn::Expr::ForLoop(f) => err(f.span(), "a `for` loop has no value; use it as a statement"),
            other => err(other.span(), "this expression is not supported in a kernel"),
        }
    }

    fn lit(&self, l: &syn::Lit) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        match l {
            syn::Lit::Int(i) => {
                let v: i64 = i
                    .base10_parse()
                    .map_err(|_| syn::Error::new(i.span(), "integer literal out of range"))?;
                let variant = match i.suffix() {
                    "" => return Ok(quote!(#ir::Value::Int(#v))),
                    "u32" => "U32",
                    "i32" => "I32",
                    "u8" => "U8",
                    "i8" => "I8",
                    s => {
                        return err(
                            i.span(),
                            &format!(
                                "unsupported literal suffix `{s}`: use u32, i32, u8, i8 or none"
                            ),
                        )
                    }
                };
                let variant = ident(variant);
                let lit = syn::LitInt::new(i.base10_digits(), i.span());
                Ok(quote!(#b.lit(#ir::Literal::#variant(#lit))))
            }
            syn::Lit::Float(f) => {
                let v: f64 = f
                    .base10_parse()
                    .map_err(|_| syn::Error::new(f.span(), "float literal out of range"))?;
                match f.suffix() {
                    "" => Ok(quote!(#ir::Value::Float(#v))),
                    "f32" => {
                        let lit = syn::LitFloat::new(&format!("{}f32", f.base10_digits()), f.span());
                        Ok(quote!(#b.lit(#ir::Literal::F32(#lit))))
                    }
                    s => err(
                        f.span(),
                        &format!("unsupported literal suffix `{s}`: use f32 or none (convert with `.cast::<T>()`)"),
                    ),
                }
            }
            syn::Lit::Bool(v) => {
                let v = v.value;
                Ok(quote!(#b.lit(#ir::Literal::Bool(#v))))
            }
            other => err(other.span(), "only numbers and bools are values in kernels"),
        }
    }

    fn path(&self, p: &syn::ExprPath) -> syn::Result<TokenStream> {
        let ir = &self.ir;
        let b = &self.b;
        if p.qself.is_some() {
            return err(p.span(), "qualified paths are not supported in kernels");
        }
        if let Some(id) = p.path.get_ident() {
            return Ok(quote!(#id));
        }
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        match segs.as_slice() {
            ["f32", "INFINITY"] => Ok(quote!(#b.lit(#ir::Literal::F32(f32::INFINITY)))),
            ["f32", "NEG_INFINITY"] => Ok(quote!(#b.lit(#ir::Literal::F32(f32::NEG_INFINITY)))),
            ["f32", "MAX"] => Ok(quote!(#b.lit(#ir::Literal::F32(f32::MAX)))),
            ["f32", "MIN"] => Ok(quote!(#b.lit(#ir::Literal::F32(f32::MIN)))),
            ["u32", "MAX"] => Ok(quote!(#b.lit(#ir::Literal::U32(u32::MAX)))),
            ["i32", "MAX"] => Ok(quote!(#b.lit(#ir::Literal::I32(i32::MAX)))),
            ["i32", "MIN"] => Ok(quote!(#b.lit(#ir::Literal::I32(i32::MIN)))),
            _ => err(
                p.span(),
                "unknown path: kernels use local names, parameters, and the constants f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN, u32::MAX, i32::MAX, i32::MIN",
            ),
        }
    }

    fn method(&self, m: &syn::ExprMethodCall) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        let name = m.method.to_string();
        let recv = self.expr(&m.receiver)?;
        let args: Vec<&syn::Expr> = m.args.iter().collect();
        let arity = |n: usize| -> syn::Result<()> {
            if args.len() == n {
                Ok(())
            } else {
                err(
                    m.span(),
                    &format!("`.{name}()` takes {n} argument(s), {} given", args.len()),
                )
            }
        };
        if name == "cast" || name == "bitcast" {
            arity(0)?;
            let Some(turbo) = &m.turbofish else {
                return err(
                    m.method.span(),
                    &format!(
                        "`.{name}()` needs a target type: write `.{name}::<f32>()` (or `.{name}::<T>()`)"
                    ),
                );
            };
            let ty = match turbo.args.first() {
                Some(syn::GenericArgument::Type(t)) if turbo.args.len() == 1 => {
                    self.scope.scalar_expr(t, ir)?
                }
                _ => {
                    return err(
                        turbo.span(),
                        &format!("write `.{name}::<f32>()` with one type"),
                    )
                }
            };
            let method = syn::Ident::new(&name, m.method.span());
            return Ok(quote!({ let __v = #recv; #b.#method(__v, #ty)? }));
        }
        if m.turbofish.is_some() {
            return err(m.span(), &format!("`.{name}` takes no type arguments"));
        }
        if let Some(op) = unary_variant(&name) {
            arity(0)?;
            return Ok(quote!({ let __v = #recv; #b.unary(#ir::UnaryOp::#op, __v)? }));
        }
        match name.as_str() {
            // The length of a fragment array (a u32 known while building).
            "len" => {
                arity(0)?;
                Ok(quote!(#b.frag_array_len(&#recv)))
            }
            "sigmoid" | "silu" | "softplus" => {
                arity(0)?;
                let f = ident(&name);
                Ok(quote!({ let __v = #recv; #b.#f(__v)? }))
            }
            "max" | "min" | "powf" => {
                arity(1)?;
                let op = ident(match name.as_str() {
                    "max" => "Max",
                    "min" => "Min",
                    _ => "Pow",
                });
                let a = self.expr(args[0])?;
                Ok(
                    quote!({ let __v = #recv; let __a = #a; #b.binary(#ir::BinaryOp::#op, __v, __a)? }),
                )
            }
            "mul_add" => {
                arity(2)?;
                let x = self.expr(args[0])?;
                let y = self.expr(args[1])?;
                Ok(quote!({ let __v = #recv; let __x = #x; let __y = #y; #b.fma(__v, __x, __y)? }))
            }
            _ => err(
                m.method.span(),
                &format!("unknown method `.{name}()`; kernels support {METHODS}"),
            ),
        }
    }

    /// The function name of a call, if it is a plain identifier.
    fn call_name(c: &syn::ExprCall) -> Option<String> {
        match &*c.func {
            syn::Expr::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        }
    }

    /// `t[i]` as (memory variable, index code).
    pub fn mem_index(&self, e: &syn::Expr, what: &str) -> syn::Result<(syn::Ident, TokenStream)> {
        match e {
            syn::Expr::Index(ix) => match &*ix.expr {
                syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                    let id = p.path.get_ident().cloned().expect("checked");
                    Ok((id, self.expr(&ix.index)?))
                }
                other => err(other.span(), "index a tensor or array by name: `t[i]`"),
            },
            other => err(
                other.span(),
                &format!("`{what}` takes an indexed memory location: `{what}(t[i], …)`"),
            ),
        }
    }

    fn args(&self, c: &syn::ExprCall, n: usize, name: &str) -> syn::Result<Vec<TokenStream>> {
        if c.args.len() != n {
            return err(
                c.span(),
                &format!("`{name}` takes {n} argument(s), {} given", c.args.len()),
            );
        }
        c.args.iter().map(|a| self.expr(a)).collect()
    }

    /// True if this call is not a builtin, so it names a #[func].
    pub fn is_dsl_call(&self, c: &syn::ExprCall) -> bool {
        match Self::call_name(c) {
            Some(n) => !is_builtin_name(&n),
            None => true,
        }
    }

    /// A call in statement position.
    pub fn call_stmt(&self, c: &syn::ExprCall) -> syn::Result<TokenStream> {
        let b = &self.b;
        match Self::call_name(c).as_deref() {
            Some("store") => {
                if c.args.len() != 2 {
                    return err(c.span(), "`store` takes (t[i], value)");
                }
                let (mem, index) = self.mem_index(&c.args[0], "store")?;
                if self.read_only.contains(&mem) {
                    return err(
                        mem.span(),
                        &format!(
                            "`{mem}` is read-only: declare the parameter `mut {mem}` to write it"
                        ),
                    );
                }
                let value = self.expr(&c.args[1])?;
                Ok(quote!({ let __i = #index; let __v = #value; #b.store(#mem, __i, __v)?; }))
            }
            // `copy_async(dst[i], src[j], n)`: an asynchronous copy of `n` elements from a
            // tensor into a threadgroup array; `copy_async_or_zero(…, in_bounds)` lands
            // zeros where `in_bounds` is false.
            Some(n @ ("copy_async" | "copy_async_or_zero")) => {
                let zfill = n == "copy_async_or_zero";
                let want = if zfill { 4 } else { 3 };
                if c.args.len() != want {
                    let form = if zfill {
                        "(dst[i], src[j], elements, in_bounds)"
                    } else {
                        "(dst[i], src[j], elements)"
                    };
                    return err(
                        c.span(),
                        &format!(
                            "`{n}` takes {form}: `dst` a threadgroup array, `src` a tensor, \
                             `elements` a literal or constexpr making 4, 8 or 16 bytes"
                        ),
                    );
                }
                let (dst, di) = self.mem_index(&c.args[0], n)?;
                if self.read_only.contains(&dst) {
                    return err(
                        dst.span(),
                        &format!(
                            "`{n}` copies into threadgroup memory, and `{dst}` is a tensor: copy \
                             into an array declared `let tile = threadgroup_array::<T>(len);`"
                        ),
                    );
                }
                let (src, si) = self.mem_index(&c.args[1], n)?;
                let width = self.expr(&c.args[2])?;
                let valid = if zfill {
                    let v = self.expr(&c.args[3])?;
                    quote!(::core::option::Option::Some(#v))
                } else {
                    quote!(::core::option::Option::None)
                };
                Ok(quote!({
                    let __di = #di;
                    let __si = #si;
                    let __w = #width;
                    let __v = #valid;
                    #b.copy_async(#dst, __di, #src, __si, __w, __v)?;
                }))
            }
            Some("commit_copies") => {
                self.args(c, 0, "commit_copies")?;
                Ok(quote!(#b.commit_copies();))
            }
            Some("wait_copies") => {
                let a = self.args(c, 1, "wait_copies")?;
                let n = &a[0];
                Ok(quote!({ let __n = #n; #b.wait_copies(__n)?; }))
            }
            Some("barrier") => {
                self.args(c, 0, "barrier")?;
                Ok(quote!(#b.barrier();))
            }
            Some("simd_barrier") => {
                self.args(c, 0, "simd_barrier")?;
                Ok(quote!(#b.simd_barrier();))
            }
            Some(n) if FRAG_STATEMENTS.contains(&n) => self.frag_stmt(c, n),
            _ if self.is_dsl_call(c) => {
                let call = self.dsl_call(c, true)?;
                Ok(quote!(let _ = #call;))
            }
            _ => {
                let v = self.call(c)?;
                Ok(quote!(let _ = #v;))
            }
        }
    }

    /// A call in value position.
    fn call(&self, c: &syn::ExprCall) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        let Some(name) = Self::call_name(c) else {
            return self.dsl_call(c, false);
        };
        let n = name.as_str();
        if let Some(bi) = Builtin::parse(n) {
            self.args(c, 0, n)?;
            let v = ident(&format!("{bi:?}"));
            return Ok(quote!(#b.builtin(#ir::Builtin::#v)));
        }
        if let Some(op) = unary_variant(n) {
            let a = self.args(c, 1, n)?;
            let a0 = &a[0];
            return Ok(quote!({ let __v = #a0; #b.unary(#ir::UnaryOp::#op, __v)? }));
        }
        if let Some(op) = SimdOp::parse(n) {
            let a = self.args(c, 1, n)?;
            let (a0, v) = (&a[0], ident(&format!("{op:?}")));
            return Ok(quote!({ let __v = #a0; #b.simd(#ir::SimdOp::#v, __v)? }));
        }
        let shuffle = if n == "simd_broadcast" {
            Some(ShuffleKind::Index)
        } else {
            ShuffleKind::parse(n)
        };
        if let Some(k) = shuffle {
            let a = self.args(c, 2, n)?;
            let (a0, a1, v) = (&a[0], &a[1], ident(&format!("{k:?}")));
            return Ok(
                quote!({ let __v = #a0; let __a = #a1; #b.shuffle(#ir::ShuffleKind::#v, __v, __a)? }),
            );
        }
        if let Some(op) = ReduceOp::parse(n) {
            let a = self.args(c, 1, n)?;
            let (a0, v) = (&a[0], ident(&format!("{op:?}")));
            return Ok(quote!({ let __v = #a0; #b.group_reduce(#ir::ReduceOp::#v, __v)? }));
        }
        if let Some(op) = AtomicOp::parse(n) {
            if c.args.len() != 2 {
                return err(c.span(), &format!("`{n}` takes (t[i], value)"));
            }
            let (mem, index) = self.mem_index(&c.args[0], n)?;
            let value = self.expr(&c.args[1])?;
            let v = ident(&format!("{op:?}"));
            return Ok(
                quote!({ let __i = #index; let __v = #value; #b.atomic(#ir::AtomicOp::#v, #mem, __i, __v)? }),
            );
        }
        match n {
            "load" => {
                if c.args.len() != 1 {
                    return err(c.span(), "`load` takes one indexed location: `load(t[i])`");
                }
                let (mem, index) = self.mem_index(&c.args[0], "load")?;
                Ok(quote!({ let __i = #index; #b.load(#mem, __i)? }))
            }
            "min" | "max" | "pow" => {
                let a = self.args(c, 2, n)?;
                let op = ident(match n {
                    "min" => "Min",
                    "max" => "Max",
                    _ => "Pow",
                });
                let (a0, a1) = (&a[0], &a[1]);
                Ok(quote!({ let __l = #a0; let __r = #a1; #b.binary(#ir::BinaryOp::#op, __l, __r)? }))
            }
            "fma" => {
                let a = self.args(c, 3, n)?;
                let (x, y, z) = (&a[0], &a[1], &a[2]);
                Ok(quote!({ let __x = #x; let __y = #y; let __z = #z; #b.fma(__x, __y, __z)? }))
            }
            "select" => {
                let a = self.args(c, 3, n)?;
                let (x, y, z) = (&a[0], &a[1], &a[2]);
                Ok(quote!({ let __c = #x; let __a = #y; let __b = #z; #b.select(__c, __a, __b)? }))
            }
            "sigmoid" | "silu" | "softplus" => {
                let a = self.args(c, 1, n)?;
                let (a0, f) = (&a[0], ident(n));
                Ok(quote!({ let __v = #a0; #b.#f(__v)? }))
            }
            "infinity" => {
                self.args(c, 0, n)?;
                Ok(quote!(#ir::Value::Float(f64::INFINITY)))
            }
            "neg_infinity" => {
                self.args(c, 0, n)?;
                Ok(quote!(#ir::Value::Float(f64::NEG_INFINITY)))
            }
            "store" | "barrier" | "simd_barrier" | "copy_async" | "copy_async_or_zero" | "commit_copies"
            | "wait_copies" => err(
                c.span(),
                &format!("`{n}` has no value; use it as a statement"),
            ),
            "threadgroup_array" | "stack_array" => err(
                c.span(),
                &format!("`{n}` declares an array and must be the whole value of a `let`: `let a = {n}::<f32>(32);`"),
            ),
            n if FRAG_STATEMENTS.contains(&n) => err(
                c.span(),
                &format!("`{n}` has no value; use it as a statement"),
            ),
            "matrix_a" | "matrix_b" | "matrix_acc" | "matrix_rows" => err(
                c.span(),
                &format!("`{n}` declares a matrix fragment and must be the whole value of a `let`: `let f = {n}::<f16>();`"),
            ),
            "range" => err(c.span(), "`range` only appears as the bounds of a `for` loop"),
            _ => self.dsl_call(c, false),
        }
    }

    /// A call of a #[func]: all its results (`all`) or its single result.
    pub fn dsl_call(&self, c: &syn::ExprCall, all: bool) -> syn::Result<TokenStream> {
        let b = &self.b;
        let ir = &self.ir;
        let func = match &*c.func {
            syn::Expr::Path(p) if p.qself.is_none() => &p.path,
            other => return err(other.span(), "call a #[func] by name: `f(x)`"),
        };
        if let Some(last) = func.segments.last() {
            if !matches!(last.arguments, syn::PathArguments::None) {
                return err(
                    last.span(),
                    "a #[func] infers its dtypes from its arguments: call it without type arguments",
                );
            }
        }
        let args: Vec<TokenStream> = c
            .args
            .iter()
            .map(|a| self.expr(a))
            .collect::<syn::Result<_>>()?;
        let method = if all { quote!(call) } else { quote!(call_one) };
        // The callee by value, spanned where it is written: an unknown name is an unknown
        // value there (the compiler suggests a #[func] of a similar name), a plain Rust
        // function a missing `DslFunction` whose message says to add #[func].
        let build = quote::quote_spanned!(func.span()=> #ir::dsl_function(#func));
        // A value or memory (a tensor or array named by its variable) per argument.
        Ok(quote!({
            let __args: ::std::vec::Vec<#ir::CallArg> =
                ::std::vec![#(#ir::CallArg::from(&#args)),*];
            let __f = #build(&#b.arg_types(&__args))?;
            #b.#method(__f, &__args)?
        }))
    }
}

fn binary_variant(op: &syn::BinOp) -> Option<syn::Ident> {
    use syn::BinOp::*;
    Some(ident(match op {
        Add(_) => "Add",
        Sub(_) => "Sub",
        Mul(_) => "Mul",
        Div(_) => "Div",
        Rem(_) => "Rem",
        And(_) | BitAnd(_) => "And",
        Or(_) | BitOr(_) => "Or",
        BitXor(_) => "Xor",
        Shl(_) => "Shl",
        Shr(_) => "Shr",
        Eq(_) => "Eq",
        Ne(_) => "Ne",
        Lt(_) => "Lt",
        Le(_) => "Le",
        Gt(_) => "Gt",
        Ge(_) => "Ge",
        _ => return None,
    }))
}

/// Builtin functions that are not IR enum names.
const OTHER_BUILTINS: &[&str] = &[
    "simd_broadcast",
    "load",
    "store",
    "barrier",
    "simd_barrier",
    "min",
    "max",
    "pow",
    "fma",
    "select",
    "sigmoid",
    "silu",
    "softplus",
    "infinity",
    "neg_infinity",
    "threadgroup_array",
    "stack_array",
    "range",
    "matrix_a",
    "matrix_b",
    "matrix_acc",
    "matrix_rows",
    "copy_async",
    "copy_async_or_zero",
    "commit_copies",
    "wait_copies",
];

/// Names the DSL defines itself; any other called name is a #[func].
fn is_builtin_name(n: &str) -> bool {
    Builtin::parse(n).is_some()
        || unary_variant(n).is_some()
        || SimdOp::parse(n).is_some()
        || ShuffleKind::parse(n).is_some()
        || ReduceOp::parse(n).is_some()
        || AtomicOp::parse(n).is_some()
        || OTHER_BUILTINS.contains(&n)
        || FRAG_STATEMENTS.contains(&n)
}
