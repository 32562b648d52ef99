//! A tensor larger than the host can hold is an error naming the size, not an abort
//! (allocation used to call the allocator's abort handler), and the context stays usable.

use tessera_runtime::{Context, DType, RuntimeError};

#[test]
fn tensors_past_host_memory_are_errors() {
    let ctx = Context::cpu();
    // 4 PiB: past any host's memory and the 47-bit virtual address space, so even an
    // overcommitting allocator refuses it.
    for shape in [vec![1usize << 50], vec![1 << 25, 1 << 25]] {
        let e = ctx
            .zeros(DType::F32, &shape)
            .expect_err("a 4 PiB tensor was allocated");
        assert!(
            matches!(e, RuntimeError::Backend { .. }) && e.to_string().contains("cannot allocate"),
            "{shape:?}: {e}"
        );
        let e = ctx
            .scratch(DType::F16, &shape)
            .expect_err("a 2 PiB scratch was allocated");
        assert!(e.to_string().contains("cannot allocate"), "{shape:?}: {e}");
    }
    // Past isize::MAX bytes: refused before the allocator is asked.
    let e = ctx.zeros(DType::F32, &[1usize << 61]).unwrap_err();
    assert!(e.to_string().contains("cannot allocate"), "{e}");
    // Past usize: the shape's own error.
    let e = ctx.zeros(DType::F32, &[usize::MAX, 2]).unwrap_err();
    assert!(matches!(e, RuntimeError::InvalidShape { .. }), "{e}");
    // The context still works.
    let t = ctx.zeros(DType::F32, &[1000]).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 1000]);
}
