//! The declarations of the reduce family's ops.

use super::{
    argsort, cumsum, per_row_shape, row_reduce, sort, topk, Reduction, RowSplitWorkspace,
    SortWorkspace,
};
#[cfg(feature = "cases")]
use super::{cases, reference, sort_reference};
use crate::decl::{
    Accuracy, Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, ParamDecl, ParamDefault,
    ParamKind, Rejection, ShapeFrom, TensorDecl, Workspace, WorkspaceDecl, F32,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

const I32: &[DType] = &[DType::I32];

const X: TensorDecl = TensorDecl::float(
    "x",
    &["rows…", "n"],
    "rows reduced over their last dimension",
);

const SPLIT_BYTES: &str = "8·rows·parts (two f32 partials a part; parts > 1 only for fewer than 256 rows of at least 32768: ⌊512/rows⌋ clamped to 1..=n/16384)";

fn split_workspace(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    Ok(Box::new(RowSplitWorkspace::new(
        ctx,
        a.input("x")?.shape(),
    )?))
}

fn reduction(a: &OpArgs) -> Result<Reduction, OpError> {
    let name = a.params.choice("reduction")?;
    Reduction::from_name(name)
        .ok_or_else(|| OpError::invalid("row_reduce", format!("no reduction `{name}`")))
}

fn per_row(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    Ok(per_row_shape(a.input("x")?.shape()))
}

inventory::submit! {
    OpDecl {
        name: "row_reduce",
        family: "reduce",
        summary: "sum, mean, max or min over the last dimension into f32 [rows…], f32 accumulation; 16-byte loads, few long rows split over threadgroups; any n",
        accuracy: Accuracy::STANDARD,
        inputs: &[X],
        outputs: &[OutputDecl {
            name: "out",
            shape: &["rows…"],
            dtype: DtypeRule::OneOf(F32),
            shape_from: ShapeFrom::Derived(per_row),
            doc: "each row's result in f32 ([1] for a 1-D x); NaN for a row holding a NaN (max and min too)",
        }],
        params: &[ParamDecl {
            name: "reduction",
            kind: ParamKind::Choice(&Reduction::NAMES),
            default: ParamDefault::Value("sum"),
            doc: "sum, mean, max or min",
        }],
        invariants: &[
            "x is a float [rows…, n], not empty, its element count fits u32; out is f32 [rows…] ([1] for a 1-D x)",
            "out does not alias x",
            "the workspace was made for at least these rows of this n",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::I32), reason: "`x` must be one of" },
            Rejection { invariant: 0, by: Break::Param("reduction", "prod"), reason: "one of sum, mean, max, min" },
            Rejection { invariant: 1, by: Break::Alias("out", "x"), reason: "aliases `x`" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 40)], params: &[("reduction", "max")], ranges: &[("x", -4.0, 4.0)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: SPLIT_BYTES, make: split_workspace }),
        call: |ctx, a| {
            let ws = a.workspace::<RowSplitWorkspace>()?;
            row_reduce(ctx, a.input("x")?, reduction(a)?, ws, a.output("out")?)
        },
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![reference::row_reduce(r.data("x")?, r.dim("n")?, r.params.choice("reduction")?)]),
        #[cfg(feature = "cases")]
        kernels: cases::row_reduce_kernels,
        #[cfg(feature = "cases")]
        cases: cases::row_reduce_cases,
        #[cfg(feature = "cases")]
        benches: cases::row_reduce_benches,
    }
}

fn topk_shape(a: &OpArgs) -> Result<Vec<usize>, OpError> {
    let mut s = a.input("x")?.shape().to_vec();
    if let Some(last) = s.last_mut() {
        *last = a.params.usize("k")?;
    }
    Ok(s)
}

const K: ParamDecl = ParamDecl {
    name: "k",
    kind: ParamKind::UInt { min: 1, max: 1024 },
    default: ParamDefault::Required,
    doc: "how many of each row's largest to keep; at most n",
};

inventory::submit! {
    OpDecl {
        name: "topk",
        family: "reduce",
        summary: "the k largest of each row with int32 indices, descending, ties to the lowest index, NaN as the largest; radix select on order-preserving keys, no full sort; k ≤ 1024, n ≤ 262144",
        accuracy: Accuracy::EXACT,
        inputs: &[X],
        outputs: &[
            OutputDecl { name: "values", shape: &["rows…", "k"], dtype: DtypeRule::Like("x"), shape_from: ShapeFrom::Derived(topk_shape), doc: "the k largest of each row, descending (NaNs first)" },
            OutputDecl { name: "indices", shape: &["rows…", "k"], dtype: DtypeRule::OneOf(I32), shape_from: ShapeFrom::Derived(topk_shape), doc: "their indices in the row; equal values in rising index order" },
        ],
        params: &[K],
        invariants: &[
            "x is a float [rows…, n], not empty, n ≤ 262144, its element count fits u32",
            "1 ≤ k ≤ min(n, 1024)",
            "values is like x with last dimension k; indices i32 of that shape; neither aliases x or the other",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" },
            Rejection { invariant: 0, by: Break::Dim("n", 262_145), reason: "above the longest row supported" },
            Rejection { invariant: 1, by: Break::Param("k", "41"), reason: "k = 41 must be in 1..=40" },
            Rejection { invariant: 1, by: Break::Param("k", "1025"), reason: "a value in 1..=1024" },
            Rejection { invariant: 2, by: Break::Alias("values", "x"), reason: "aliases `x`" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 40), ("k", 7)], params: &[("k", "7")], ranges: &[("x", -4.0, 4.0)], with: &[] },
        workspace: None,
        call: |ctx, a| topk(ctx, a.input("x")?, a.params.usize("k")?, a.output("values")?, a.output("indices")?),
        #[cfg(feature = "cases")]
        reference: |r| {
            let (v, i) = reference::topk(r.data("x")?, r.dim("n")?, r.params.usize("k")?);
            Ok(vec![v, i])
        },
        #[cfg(feature = "cases")]
        kernels: cases::topk_kernels,
        #[cfg(feature = "cases")]
        cases: cases::topk_cases,
        #[cfg(feature = "cases")]
        benches: cases::topk_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "cumsum",
        family: "reduce",
        summary: "inclusive prefix sum over the last dimension, f32 accumulation, stored in x's dtype; tiles of 16-byte runs, few long rows split over threadgroups with a carry pass; any n",
        accuracy: Accuracy::STANDARD,
        inputs: &[X],
        outputs: &[OutputDecl::like("x", "out", &["rows…", "n"], DtypeRule::Like("x"), "out[…, i] = Σ_{j ≤ i} x[…, j]; a NaN makes its own and every later output of the row NaN")],
        params: &[],
        invariants: &[
            "x is a float [rows…, n], not empty, its element count fits u32; out is like x",
            "out does not alias x",
            "the workspace was made for at least these rows of this n",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" },
            Rejection { invariant: 1, by: Break::Alias("out", "x"), reason: "aliases `x`" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 8), ("n", 3)], params: &[], ranges: &[], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: SPLIT_BYTES, make: split_workspace }),
        call: |ctx, a| cumsum(ctx, a.input("x")?, a.workspace::<RowSplitWorkspace>()?, a.output("out")?),
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![reference::cumsum(r.data("x")?, r.dim("n")?)]),
        #[cfg(feature = "cases")]
        kernels: cases::cumsum_kernels,
        #[cfg(feature = "cases")]
        cases: cases::cumsum_cases,
        #[cfg(feature = "cases")]
        benches: cases::cumsum_benches,
    }
}

const SORT_BYTES: &str = "for n > 4096: 16·rows·n (keys and indices, twice) + 1024·rows·⌈n/2048⌉ (per-tile digit counts) + 1024·rows + 8 (a one-element stand-in of each float dtype for argsort's unwritten values); 32 otherwise";

fn sort_workspace(ctx: &Context, a: &OpArgs) -> Result<Workspace, OpError> {
    Ok(Box::new(SortWorkspace::new(ctx, a.input("x")?.shape())?))
}

const DESCENDING: ParamDecl = ParamDecl {
    name: "descending",
    kind: ParamKind::Bool,
    default: ParamDefault::Value("false"),
    doc: "largest first (NaN first); ties still in index order",
};

const SORT_X: TensorDecl = TensorDecl::float(
    "x",
    &["rows…", "n"],
    "rows sorted along their last dimension",
);

inventory::submit! {
    OpDecl {
        name: "sort",
        family: "reduce",
        summary: "each row in order with int32 indices, as torch.sort(stable=True): ascending or descending, ties in index order, NaN as the largest, −0 = +0; bitonic in threadgroup memory to n = 4096, LSD radix (8-bit digits) above; n ≤ 262144",
        accuracy: Accuracy::EXACT,
        inputs: &[SORT_X],
        outputs: &[
            OutputDecl::like("x", "values", &["rows…", "n"], DtypeRule::Like("x"), "each row's values in order (gathered from x: −0 stays −0)"),
            OutputDecl::like("x", "indices", &["rows…", "n"], DtypeRule::OneOf(I32), "where each came from in the row; equal values in rising index order"),
        ],
        params: &[DESCENDING],
        invariants: &[
            "x is a float [rows…, n], not empty, n ≤ 262144, its element count fits u32",
            "values is like x, indices i32 of x's shape; neither aliases x or the other",
            "the workspace was made for at least these rows of this n",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::I32), reason: "`x` must be one of" },
            Rejection { invariant: 0, by: Break::Dim("n", 262_145), reason: "above the longest row supported" },
            Rejection { invariant: 1, by: Break::Alias("values", "x"), reason: "aliases `x`" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 3), ("n", 40)], params: &[("descending", "true")], ranges: &[("x", -4.0, 4.0)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: SORT_BYTES, make: sort_workspace }),
        call: |ctx, a| sort(ctx, a.input("x")?, a.params.bool("descending")?, a.workspace::<SortWorkspace>()?, a.output("values")?, a.output("indices")?),
        #[cfg(feature = "cases")]
        reference: |r| {
            let (v, i) = sort_reference::sort(r.data("x")?, r.dim("n")?, r.params.bool("descending")?);
            Ok(vec![v, i])
        },
        #[cfg(feature = "cases")]
        kernels: cases::sort_kernels,
        #[cfg(feature = "cases")]
        cases: cases::sort_cases,
        #[cfg(feature = "cases")]
        benches: cases::sort_benches,
    }
}

inventory::submit! {
    OpDecl {
        name: "argsort",
        family: "reduce",
        summary: "the int32 indices that order each row, as torch.argsort(stable=True): sort without its values (the same kernels, the values never written); n ≤ 262144",
        accuracy: Accuracy::EXACT,
        inputs: &[SORT_X],
        outputs: &[OutputDecl::like("x", "indices", &["rows…", "n"], DtypeRule::OneOf(I32), "where each element of the ordered row came from; equal values in rising index order")],
        params: &[DESCENDING],
        invariants: &[
            "x is a float [rows…, n], not empty, n ≤ 262144, its element count fits u32",
            "indices is i32 of x's shape and does not alias x",
            "the workspace was made for at least these rows of this n",
        ],
        rejections: &[
            Rejection { invariant: 0, by: Break::Dtype("x", DType::U32), reason: "`x` must be one of" },
            Rejection { invariant: 0, by: Break::Dim("n", 262_145), reason: "above the longest row supported" },
        ],
        variants: &[],
        example: Example { dims: &[("rows", 2), ("n", 33)], params: &[], ranges: &[("x", -2.0, 2.0)], with: &[] },
        workspace: Some(WorkspaceDecl { bytes: SORT_BYTES, make: sort_workspace }),
        call: |ctx, a| argsort(ctx, a.input("x")?, a.params.bool("descending")?, a.workspace::<SortWorkspace>()?, a.output("indices")?),
        #[cfg(feature = "cases")]
        reference: |r| Ok(vec![sort_reference::sort(r.data("x")?, r.dim("n")?, r.params.bool("descending")?).1]),
        #[cfg(feature = "cases")]
        kernels: cases::argsort_kernels,
        #[cfg(feature = "cases")]
        cases: cases::argsort_cases,
        #[cfg(feature = "cases")]
        benches: cases::argsort_benches,
    }
}
