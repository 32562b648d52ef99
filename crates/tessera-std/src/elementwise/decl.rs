//! The declarations of the elementwise ops.

use super::add;
#[cfg(feature = "cases")]
use super::{cases, reference};
#[cfg(feature = "cases")]
use crate::decl::RefArgs;
use crate::decl::{
    Break, DtypeRule, Example, OpArgs, OpDecl, OutputDecl, Rejection, ShapeFrom, TensorDecl, FLOATS,
};
use crate::error::OpError;
use tessera_runtime::{Context, DType};

fn call(ctx: &Context, a: &OpArgs) -> Result<(), OpError> {
    add::add(ctx, a.input("a")?, a.input("b")?, a.output("out")?)
}

#[cfg(feature = "cases")]
fn reference(r: &RefArgs) -> Result<Vec<Vec<f64>>, OpError> {
    Ok(vec![reference::add(r.data("a")?, r.data("b")?)])
}

inventory::submit! {
    OpDecl {
        name: "add",
        family: "elementwise",
        summary: "out = a + b, elementwise",
        inputs: &[
            TensorDecl { name: "a", shape: &["dims…"], dtype: DtypeRule::OneOf(FLOATS), optional: false, doc: "any shape" },
            TensorDecl { name: "b", shape: &["dims…"], dtype: DtypeRule::Like("a"), optional: false, doc: "like a" },
        ],
        outputs: &[OutputDecl { name: "out", shape: &["dims…"], dtype: DtypeRule::Like("a"), shape_from: ShapeFrom::Like("a"), doc: "a + b" }],
        params: &[],
        invariants: &[
            "a, b and out share one float dtype and one shape",
            "out does not alias a or b",
            "the tensors are not empty and their element count fits u32",
        ],
        rejections: &[Rejection { invariant: 0, by: Break::InputDim("b", "dims", 36), reason: "`b` must have shape" }, Rejection { invariant: 0, by: Break::Dtype("a", DType::U32), reason: "`a` must be one of" }, Rejection { invariant: 1, by: Break::Alias("out", "a"), reason: "aliases `a`" }],
        variants: &[],
        example: Example { dims: &[("dims", 37)], params: &[], ranges: &[], with: &[] },
        workspace: None,
        accuracy: crate::decl::Accuracy::STANDARD,
        call,
        #[cfg(feature = "cases")]
        reference,
        #[cfg(feature = "cases")]
        kernels: cases::kernels,
        #[cfg(feature = "cases")]
        cases: cases::cases,
        #[cfg(feature = "cases")]
        benches: cases::benches,
    }
}
