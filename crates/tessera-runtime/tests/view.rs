//! `Tensor::view`: a tensor over the leading elements of another shares its memory (a
//! write through one is read through the other), counts as no allocation, aliases it for
//! the launch checks, and cannot reach past its end.

use tessera_runtime::{Context, DType};

#[test]
fn a_view_shares_the_leading_elements_and_allocates_nothing() {
    let ctx = Context::cpu();
    let base = ctx
        .tensor(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])
        .unwrap();
    let made = ctx.allocations();
    let rows = base.view(&[2, 2]).unwrap();
    let flat = base.view(&[6]).unwrap();
    assert_eq!(ctx.allocations(), made);
    assert_eq!(rows.shape(), &[2, 2]);
    assert_eq!(rows.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    rows.write(&[10.0f32, 20.0, 30.0, 40.0]).unwrap();
    assert_eq!(
        flat.to_vec::<f32>().unwrap(),
        [10.0, 20.0, 30.0, 40.0, 5.0, 6.0]
    );
    assert!(rows.same_buffer(&base) && flat.same_buffer(&rows));
    let other = ctx.zeros(DType::F32, &[6]).unwrap();
    assert!(!other.same_buffer(&flat));
}

#[test]
fn a_view_past_the_end_is_refused() {
    let ctx = Context::cpu();
    let base = ctx.zeros(DType::I32, &[4]).unwrap();
    let e = base.view(&[5]).unwrap_err().to_string();
    assert!(
        e.contains("a view of 5 elements") && e.contains("of 4"),
        "{e}"
    );
    assert!(base.view(&[usize::MAX, 2]).is_err());
    assert_eq!(base.view(&[0]).unwrap().len(), 0);
}
