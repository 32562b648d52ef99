//! Asynchronous copies in the IR: the builder refuses misuse with a message that says what
//! to write, the verifier refuses damaged copies (wrong memory, size or element type) that
//! a hand-built or transformed kernel could carry, and the printer shows every part.

use tessera_ir::{verify_kernel, Builder, Builtin, Kernel, MemRef, Op, Scalar, Value};

/// Thread `t` copies `x[8t..8t + 8]` (f16, 16 bytes) into a threadgroup array, zeros past
/// `n`, waits, and writes its element 0 to `out[t]`.
fn copy_kernel() -> Kernel {
    let mut b = Builder::kernel("copy");
    let x = b.tensor_param("x", Scalar::F16, false);
    let out = b.tensor_param("out", Scalar::F16, true);
    let n = b.scalar_param("n", Scalar::U32);
    let tile = b
        .shared_array("tile", Scalar::F16, Value::Int(512))
        .unwrap();
    let t = b.builtin(Builtin::ThreadId);
    let at = b
        .binary(tessera_ir::BinaryOp::Mul, t, Value::Int(8))
        .unwrap();
    let ok = b.binary(tessera_ir::BinaryOp::Lt, at, n).unwrap();
    b.copy_async(tile, at, x, at, Value::Int(8), Some(ok))
        .unwrap();
    b.commit_copies();
    b.wait_copies(Value::Int(0)).unwrap();
    let v = b.load(tile, at).unwrap();
    b.store(out, t, v).unwrap();
    b.finish_kernel().unwrap()
}

/// Changes one part of a copy.
type Damage = fn(&mut Op);

fn the_copy(k: &mut Kernel) -> &mut Op {
    k.body
        .block
        .insts
        .iter_mut()
        .map(|i| &mut i.op)
        .find(|op| matches!(op, Op::CopyAsync { .. }))
        .expect("a copy")
}

#[test]
fn a_copy_verifies_and_prints_every_part() {
    let k = copy_kernel();
    verify_kernel(&k).unwrap();
    let text = k.to_string();
    assert!(
        text.contains("copy_async8 shared tile[%3], x[%3] if %4 else zero"),
        "{text}"
    );
    assert!(
        text.contains("commit_copies") && text.contains("wait_copies 0"),
        "{text}"
    );
}

#[test]
fn the_verifier_refuses_damaged_copies() {
    let cases: [(Damage, &str); 4] = [
        (
            |op| {
                if let Op::CopyAsync { dst, .. } = op {
                    *dst = MemRef::Param(1);
                }
            },
            "the destination must be a threadgroup array",
        ),
        (
            |op| {
                if let Op::CopyAsync { src, .. } = op {
                    *src = MemRef::Shared(0);
                }
            },
            "the source must be device memory",
        ),
        (
            |op| {
                if let Op::CopyAsync { width, .. } = op {
                    *width = 3;
                }
            },
            "moves 6 bytes",
        ),
        (
            |op| {
                if let Op::CopyAsync { width, .. } = op {
                    *width = 16;
                }
            },
            "moves 32 bytes",
        ),
    ];
    for (damage, want) in cases {
        let mut k = copy_kernel();
        damage(the_copy(&mut k));
        let e = verify_kernel(&k).expect_err(want).to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    // A converting copy: the array declared f32.
    let mut k = copy_kernel();
    k.body.shared[0].elem = Scalar::F32;
    let e = verify_kernel(&k).expect_err("f16 into f32").to_string();
    assert!(e.contains("copies f16 elements into f32 memory"), "{e}");
}

#[test]
fn the_builder_says_what_to_write() {
    let mut b = Builder::kernel("bad");
    let x = b.tensor_param("x", Scalar::F32, false);
    let out = b.tensor_param("out", Scalar::F32, true);
    let local = b.local_array("regs", Scalar::F32, Value::Int(4)).unwrap();
    let tile = b.shared_array("tile", Scalar::F32, Value::Int(64)).unwrap();
    b.set_loc(7, 5);
    let e = b
        .copy_async(local, Value::Int(0), x, Value::Int(0), Value::Int(4), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`regs` is not a threadgroup array") && e.contains("line 7:5"),
        "{e}"
    );
    let e = b
        .copy_async(tile, Value::Int(0), x, Value::Int(0), Value::Int(8), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("32 bytes") && e.contains("copy 1, 2, 4 elements of f32"),
        "{e}"
    );
    let e = b
        .copy_async(tile, Value::Int(0), out, Value::Int(0), Value::Int(0), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("4, 8 or 16 bytes"), "{e}");
    let n = b.scalar_param("n", Scalar::U32);
    let e = b
        .copy_async(tile, Value::Int(0), x, Value::Int(0), n, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("must be known when the kernel is built"), "{e}");
    let e = b
        .copy_async(
            tile,
            Value::Int(0),
            x,
            Value::Int(0),
            Value::Int(4),
            Some(n),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("in-bounds flag"), "{e}");
    let e = b.wait_copies(Value::Int(-1)).unwrap_err().to_string();
    assert!(e.contains("0 or more"), "{e}");
}
