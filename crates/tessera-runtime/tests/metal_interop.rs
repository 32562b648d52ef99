//! The Metal door on a Mac: a context on the caller's device and queue, a view encoding
//! into the caller's command buffer, and the caller's buffers borrowed at an offset — the
//! kernel reads and writes them in place, the bytes around the tensors stay untouched, and
//! every refusal is an error that changes nothing. Compiled only for macOS, skipped without
//! a Metal device (not run in CI: it has no Mac).
#![cfg(target_os = "macos")]

use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_metal::{
    MTLBuffer, MTLCommandBuffer, MTLCommandQueue, MTLCreateSystemDefaultDevice, MTLDevice,
    MTLResourceOptions,
};
use tessera_ir::{BinaryOp, Builder, Builtin, Kernel, Scalar};
use tessera_runtime::{Context, DType};

type Device = Retained<ProtocolObject<dyn MTLDevice>>;
type Queue = Retained<ProtocolObject<dyn MTLCommandQueue>>;
type Buffer = Retained<ProtocolObject<dyn MTLBuffer>>;

fn metal() -> Option<(Device, Queue)> {
    let device = MTLCreateSystemDefaultDevice()?;
    let queue = device.newCommandQueue()?;
    Some((device, queue))
}

/// `out[g] = x[g] * scale` on f32.
fn scale_kernel() -> Kernel {
    let mut b = Builder::kernel("scale");
    let x = b.tensor_param("x", Scalar::F32, false);
    let out = b.tensor_param("out", Scalar::F32, true);
    let scale = b.scalar_param("scale", Scalar::F32);
    let g = b.builtin(Builtin::GlobalId);
    let v = b.load(x, g).expect("load");
    let r = b.binary(BinaryOp::Mul, v, scale).expect("mul");
    b.store(out, g, r).expect("store");
    b.finish_kernel().expect("kernel")
}

/// A shared buffer holding `values`.
fn shared(device: &Device, values: &[f32]) -> Buffer {
    let bytes = std::mem::size_of_val(values);
    let b = device
        .newBufferWithLength_options(bytes, MTLResourceOptions::StorageModeShared)
        .expect("buffer");
    // SAFETY: a fresh shared buffer of `bytes` bytes that no GPU work uses.
    unsafe {
        std::ptr::copy_nonoverlapping(
            values.as_ptr().cast::<u8>(),
            b.contents().as_ptr().cast::<u8>(),
            bytes,
        )
    };
    b
}

/// The buffer's contents as f32.
fn contents(b: &Buffer, n: usize) -> Vec<f32> {
    let mut v = vec![0f32; n];
    // SAFETY: the buffer holds at least `n` f32 in shared storage; its work has completed.
    unsafe {
        std::ptr::copy_nonoverlapping(b.contents().as_ptr().cast::<f32>(), v.as_mut_ptr(), n)
    };
    v
}

#[test]
fn borrowed_buffers_are_read_and_written_in_place_at_their_offsets() {
    let Some((device, queue)) = metal() else {
        return;
    };
    let ctx = Context::on_metal_queue(device.clone(), queue.clone()).expect("context");
    let values: Vec<f32> = (0..64).map(|i| i as f32 * 0.25 - 3.0).collect();
    let (xb, ob) = (shared(&device, &values), shared(&device, &[7.5; 64]));
    // 32 elements from byte 64 of each buffer: the 16 before and after stay as they were.
    // SAFETY: nothing else touches the buffers until the work is done.
    let (x, out) = unsafe {
        (
            ctx.borrow_metal_buffer(&xb, 64, DType::F32, &[32])
                .expect("x"),
            ctx.borrow_metal_buffer(&ob, 64, DType::F32, &[32])
                .expect("out"),
        )
    };
    let k = scale_kernel();
    ctx.launch_ir(&k)
        .arg("x", &x)
        .arg("out", &out)
        .scalar("scale", -2.0f32)
        .grid([1, 1, 1])
        .group_size(32)
        .run()
        .expect("launch");
    ctx.synchronize().expect("sync");
    let got = contents(&ob, 64);
    for (i, g) in got.iter().enumerate() {
        let want = if (16..48).contains(&i) {
            f64::from(values[i]) * -2.0
        } else {
            7.5
        };
        assert_eq!(f64::from(*g), want, "element {i}");
    }
    assert_eq!(out.to_vec::<f32>().expect("read"), got[16..48].to_vec());
}

#[test]
fn a_view_encodes_into_the_callers_command_buffer_and_commits_nothing() {
    let Some((device, queue)) = metal() else {
        return;
    };
    let ctx = Context::on_metal_queue(device.clone(), queue.clone()).expect("context");
    let values: Vec<f32> = (0..32).map(|i| 1.0 + i as f32).collect();
    let (xb, ob) = (shared(&device, &values), shared(&device, &[0.0; 32]));
    let cb = queue.commandBuffer().expect("command buffer");
    let enc = ctx.on_metal_command_buffer(cb.clone()).expect("view");
    // Bound through the view that launches (a context binds only its own tensors).
    // SAFETY: nothing else touches the buffers until the command buffer completes.
    let (x, out) = unsafe {
        (
            enc.borrow_metal_buffer(&xb, 0, DType::F32, &[32])
                .expect("x"),
            enc.borrow_metal_buffer(&ob, 0, DType::F32, &[32])
                .expect("out"),
        )
    };
    let k = scale_kernel();
    enc.launch_ir(&k)
        .arg("x", &x)
        .arg("out", &out)
        .scalar("scale", 3.0f32)
        .grid([1, 1, 1])
        .group_size(32)
        .run()
        .expect("encode");
    // Nothing ran yet: the caller has not committed.
    assert_eq!(contents(&ob, 32), vec![0.0; 32]);
    assert!(
        enc.synchronize().is_err(),
        "waiting on uncommitted work must be refused"
    );
    assert!(
        out.to_vec::<f32>().is_err(),
        "a read not ordered with it must be refused"
    );
    cb.commit();
    cb.waitUntilCompleted();
    let want: Vec<f32> = values.iter().map(|v| v * 3.0).collect();
    assert_eq!(contents(&ob, 32), want);
    assert!(
        ctx.on_metal_command_buffer(cb).is_err(),
        "a committed command buffer is refused"
    );
}

#[test]
fn bad_borrows_are_refused() {
    let Some((device, queue)) = metal() else {
        return;
    };
    let ctx = Context::on_metal_queue(device.clone(), queue).expect("context");
    let b = shared(&device, &[1.0; 16]);
    // SAFETY: each borrow is refused before anything is bound.
    unsafe {
        let misaligned = ctx.borrow_metal_buffer(&b, 4, DType::F32, &[4]);
        assert!(format!("{}", misaligned.unwrap_err()).contains("16-byte"));
        let past_end = ctx.borrow_metal_buffer(&b, 16, DType::F32, &[16]);
        assert!(format!("{}", past_end.unwrap_err()).contains("does not fit"));
        assert!(Context::cpu()
            .borrow_metal_buffer(&b, 0, DType::F32, &[4])
            .is_err());
    }
    assert_eq!(contents(&b, 16), vec![1.0; 16]);
}
