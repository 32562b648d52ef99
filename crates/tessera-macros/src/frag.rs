//! Lowers the matrix-fragment statements (`matrix_fill`, `matrix_load`, `matrix_mma`, the
//! row ops, …) to builder calls. A fragment argument is a name bound by `let f =
//! matrix_…();` or an element `o[i]` of a fragment array (`let o = [matrix_acc(); n];`);
//! a statement with array elements runs through `Builder::frag_pick`, which picks each
//! element by its index (directly when the index is known while building, else by an
//! `if` per element that the compiler folds once the loop giving the index is unrolled).

use crate::body::{err, Lower};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;

/// The fragment verbs that are statements.
pub const FRAG_STATEMENTS: &[&str] = &[
    "matrix_fill",
    "matrix_scale",
    "matrix_load",
    "matrix_load_t",
    "matrix_store",
    "matrix_mma",
    "matrix_row_max",
    "matrix_row_sum",
    "matrix_row_scale",
    "matrix_row_exp2_sub",
    "matrix_mask",
    "matrix_rows_add",
    "matrix_rows_mul",
    "matrix_rows_div",
    "matrix_rows_exp2_diff",
    "matrix_rows_max",
    "matrix_rows_raise",
    "matrix_convert",
    "matrix_add",
    "matrix_mma_tiles",
    "matrix_mma_tiles_async",
    "matrix_mma_tiles_kn",
    "matrix_mma_tiles_kn_async",
    "matrix_mma_wait",
];

/// The fragment arguments of one statement: each argument's code (a `Frag`), and the
/// array elements among them, picked once per distinct array and index.
#[derive(Default)]
struct FragArgs {
    /// `(array, index code, index text)` per distinct element.
    picks: Vec<(syn::Ident, TokenStream, String)>,
}

impl FragArgs {
    /// Code for the fragment `e` names: the name itself, or `__fs[k]` for an array element.
    fn arg(&mut self, l: &Lower, e: &syn::Expr) -> syn::Result<TokenStream> {
        match e {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                let id = p.path.get_ident().cloned().expect("checked");
                Ok(quote!(#id))
            }
            syn::Expr::Index(ix) => {
                let arr = match &*ix.expr {
                    syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                        p.path.get_ident().cloned().expect("checked")
                    }
                    other => {
                        return err(
                            other.span(),
                            "index a fragment array by its name: `o[i]` for `let o = [matrix_acc(); n];`",
                        )
                    }
                };
                let text = quote!(#ix).to_string();
                let k = match self.picks.iter().position(|(_, _, t)| *t == text) {
                    Some(k) => k,
                    None => {
                        let index = l.expr(&ix.index)?;
                        self.picks.push((arr, index, text));
                        self.picks.len() - 1
                    }
                };
                Ok(quote!(__fs[#k]))
            }
            other => err(
                other.span(),
                "name a fragment declared with `let f = matrix_a::<T>();` (or matrix_b / \
                 matrix_acc / matrix_rows), or an element `o[i]` of a fragment array",
            ),
        }
    }

    /// `op` (builder code using the arguments), run on the picked fragments.
    fn wrap(self, l: &Lower, op: TokenStream) -> TokenStream {
        let (b, ir) = (&l.b, &l.ir);
        if self.picks.is_empty() {
            return quote!({ #op });
        }
        // Equal index code is evaluated once, so the builder sees one value and picks the
        // same position of every array indexed by it.
        let mut index_texts: Vec<String> = Vec::new();
        let mut lets = Vec::new();
        let mut pairs = Vec::new();
        for (arr, index, _) in &self.picks {
            let t = index.to_string();
            let k = match index_texts.iter().position(|x| *x == t) {
                Some(k) => k,
                None => {
                    let name = format_ident!("__pick{}", index_texts.len());
                    lets.push(quote!(let #name = #index;));
                    index_texts.push(t);
                    index_texts.len() - 1
                }
            };
            let name = format_ident!("__pick{}", k);
            pairs.push(quote!((&#arr, #name)));
        }
        quote!({
            #(#lets)*
            #b.frag_pick(
                &[#(#pairs),*],
                &mut |#b: &mut #ir::Builder, __fs: &[#ir::Frag]| -> ::core::result::Result<(), #ir::IrError> {
                    #op
                    ::core::result::Result::Ok(())
                },
            )?;
        })
    }
}

impl Lower<'_> {
    /// A fragment statement `name(…)` (one of [`FRAG_STATEMENTS`]).
    pub fn frag_stmt(&self, c: &syn::ExprCall, name: &str) -> syn::Result<TokenStream> {
        let (b, ir) = (&self.b, &self.ir);
        let mut fa = FragArgs::default();
        let want = |n: usize, form: &str| -> syn::Result<()> {
            if c.args.len() != n {
                return err(c.span(), &format!("`{name}` takes {form}"));
            }
            Ok(())
        };
        let op = match name {
            // A fragment and an f32: fill every element with it, or scale them all by it.
            "matrix_fill" | "matrix_scale" => {
                want(2, "(fragment, value)")?;
                let f = fa.arg(self, &c.args[0])?;
                let v = self.expr(&c.args[1])?;
                let m = if name == "matrix_fill" {
                    quote!(frag_fill)
                } else {
                    quote!(frag_scale)
                };
                quote!(let __v = #v; #b.#m(#f, __v)?;)
            }
            "matrix_load" | "matrix_load_t" | "matrix_store" => {
                want(3, "(fragment, t[index], row_stride)")?;
                let f = fa.arg(self, &c.args[0])?;
                let (mem, index) = self.mem_index(&c.args[1], name)?;
                let stride = self.expr(&c.args[2])?;
                let call = match name {
                    "matrix_store" => quote!(#b.frag_store(#f, #mem, __i, __s)?;),
                    _ => {
                        let t = name == "matrix_load_t";
                        quote!(#b.frag_load(#f, #mem, __i, __s, #t)?;)
                    }
                };
                quote!(let __i = #index; let __s = #stride; #call)
            }
            "matrix_mma" => {
                want(4, "(d, a, b, c) and computes d = a·b + c")?;
                let d = fa.arg(self, &c.args[0])?;
                let a = fa.arg(self, &c.args[1])?;
                let bb = fa.arg(self, &c.args[2])?;
                let cc = fa.arg(self, &c.args[3])?;
                quote!(#b.frag_mma(#d, #a, #bb, #cc)?;)
            }
            // (rows, acc): fold each row of the accumulator into the row vector.
            "matrix_row_max" | "matrix_row_sum" => {
                want(2, "(rows, acc): rows[r] = max / + over row r of acc")?;
                let r = fa.arg(self, &c.args[0])?;
                let f = fa.arg(self, &c.args[1])?;
                let op = if name == "matrix_row_max" {
                    quote!(#ir::RowReduce::Max)
                } else {
                    quote!(#ir::RowReduce::Sum)
                };
                quote!(#b.frag_row_reduce(#op, #r, #f)?;)
            }
            // (acc, rows): map each element with its row's value.
            "matrix_row_scale" | "matrix_row_exp2_sub" => {
                want(2, "(acc, rows)")?;
                let f = fa.arg(self, &c.args[0])?;
                let r = fa.arg(self, &c.args[1])?;
                let op = if name == "matrix_row_scale" {
                    quote!(#ir::RowMap::Scale)
                } else {
                    quote!(#ir::RowMap::Exp2Sub)
                };
                quote!(#b.frag_row_map(#op, #f, #r)?;)
            }
            "matrix_mask" => {
                want(
                    4,
                    "(acc, diag, cap, value): elements (r, c) with c − r ≥ diag or c ≥ cap \
                     (i32) become value",
                )?;
                let f = fa.arg(self, &c.args[0])?;
                let d = self.expr(&c.args[1])?;
                let cap = self.expr(&c.args[2])?;
                let v = self.expr(&c.args[3])?;
                quote!(let __d = #d; let __c = #cap; let __v = #v; #b.frag_mask(#f, __d, __c, __v)?;)
            }
            "matrix_rows_add" | "matrix_rows_mul" | "matrix_rows_div" | "matrix_rows_exp2_diff" => {
                want(3, "(d, a, b) on row vectors")?;
                let d = fa.arg(self, &c.args[0])?;
                let a = fa.arg(self, &c.args[1])?;
                let bb = fa.arg(self, &c.args[2])?;
                let op = match name {
                    "matrix_rows_add" => quote!(#ir::RowsOp::Add),
                    "matrix_rows_mul" => quote!(#ir::RowsOp::Mul),
                    "matrix_rows_div" => quote!(#ir::RowsOp::Div),
                    _ => quote!(#ir::RowsOp::Exp2Diff),
                };
                quote!(#b.frag_rows(#op, #d, #a, #bb)?;)
            }
            "matrix_rows_max" | "matrix_rows_raise" => {
                let raise = name == "matrix_rows_raise";
                if raise {
                    want(4, "(d, a, b, margin): d = b > a + margin ? b : a")?;
                } else {
                    want(3, "(d, a, b): d = max(a, b) on row vectors")?;
                }
                let d = fa.arg(self, &c.args[0])?;
                let a = fa.arg(self, &c.args[1])?;
                let bb = fa.arg(self, &c.args[2])?;
                let margin = if raise {
                    self.expr(&c.args[3])?
                } else {
                    quote!(#ir::Value::Float(0.0))
                };
                quote!(let __m = #margin; #b.frag_rows_raise(#d, #a, #bb, __m)?;)
            }
            "matrix_add" => {
                want(3, "(d, a, b): d = a + b on accumulators")?;
                let d = fa.arg(self, &c.args[0])?;
                let a = fa.arg(self, &c.args[1])?;
                let bb = fa.arg(self, &c.args[2])?;
                quote!(#b.frag_add(#d, #a, #bb)?;)
            }
            "matrix_convert" => {
                want(2, "(a, acc): the accumulator rounded into an A operand")?;
                let d = fa.arg(self, &c.args[0])?;
                let s = fa.arg(self, &c.args[1])?;
                quote!(#b.frag_convert(#d, #s)?;)
            }
            // (accs, a[i], b[j]): the threadgroup's product of two swizzled tiles.
            "matrix_mma_wait" => {
                want(
                    2,
                    "(accs, n): it waits until at most n (a literal or #[constexpr]) tile \
                     products into `accs` are in flight",
                )?;
                let accs = frag_array_name(&c.args[0])?;
                let n = self.expr(&c.args[1])?;
                quote!(let __n = #n; #b.frag_mma_wait(&#accs, __n)?;)
            }
            "matrix_mma_tiles"
            | "matrix_mma_tiles_async"
            | "matrix_mma_tiles_kn"
            | "matrix_mma_tiles_kn_async" => {
                want(
                    3,
                    "(accs, a[index] or a, b[index]): `accs` an array of accumulators, `a` a \
                     swizzled threadgroup tile or an array of four A operands, `b` a swizzled \
                     threadgroup tile",
                )?;
                let accs = frag_array_name(&c.args[0])?;
                let (mb, ib) = self.mem_index(&c.args[2], name)?;
                let asynchronous = name.ends_with("_async");
                let kn = name.contains("_kn");
                // A bare name is an array of A operands in registers, an index a tile.
                let a = match &c.args[1] {
                    syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                        let fa = frag_array_name(&c.args[1])?;
                        let ir = &self.ir;
                        quote!(#ir::TileOperand::Frags(&#fa))
                    }
                    other => {
                        let (ma, ia) = self.mem_index(other, name)?;
                        let ir = &self.ir;
                        quote!({ let __ia = #ia; #ir::TileOperand::Tile(#ma, __ia) })
                    }
                };
                quote!(
                    let __ta = #a;
                    let __ib = #ib;
                    #b.frag_mma_tiles(&#accs, __ta, (#mb, __ib), (#asynchronous, #kn))?;
                )
            }
            other => return err(c.span(), &format!("`{other}` is not a fragment statement")),
        };
        Ok(fa.wrap(self, op))
    }
}

/// The name of a whole fragment array (the tile product's accumulators).
fn frag_array_name(e: &syn::Expr) -> syn::Result<syn::Ident> {
    match e {
        syn::Expr::Path(p) if p.path.get_ident().is_some() => {
            Ok(p.path.get_ident().cloned().expect("checked"))
        }
        other => err(
            other.span(),
            "name the whole accumulator array: `matrix_mma_tiles(acc, …)` for \
             `let acc = [matrix_acc(); n];`",
        ),
    }
}
