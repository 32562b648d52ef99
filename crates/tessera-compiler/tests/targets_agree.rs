//! CUDA C and MSL come from one emitter core, so the constructs they share are lowered the
//! same way: here, loops whose step is not a known positive constant. On both targets such
//! a loop runs only for a positive step and otherwise reaches the target's trap, whatever
//! its bounds — the CPU sanitizer's rule — and a constant non-positive step is an error
//! when reached, not when compiled.

use tessera_compiler::{compile, emit, Source, Target};
use tessera_ir::{BinaryOp, Block, Builder, Builtin, Kernel, Literal, Op, Scalar, Type, Value};

/// Three loops: a runtime u32 step, a runtime i32 step counting over negative bounds, and
/// `step * 0`, under a branch no thread takes.
fn loops() -> Kernel {
    let mut b = Builder::kernel("loops");
    let out = b.tensor_param("out", Scalar::F32, true);
    let step = b.scalar_param("step", Scalar::U32);
    let istep = b.scalar_param("istep", Scalar::I32);
    let n = b.scalar_param("n", Scalar::U32);
    let tid = b.builtin(Builtin::ThreadId);
    let (i, c) = b.begin_for(tid, n, step, &[Value::Float(0.0)]).unwrap();
    let f = b.cast(i, Scalar::F32).unwrap();
    let s = b.binary(BinaryOp::Add, c[0], f).unwrap();
    let r = b.end_for(&[s]).unwrap();
    let (j, d) = b
        .begin_for(Value::Int(-5), Value::Int(7), istep, &[r[0]])
        .unwrap();
    let jf = b.cast(j, Scalar::F32).unwrap();
    let s = b.binary(BinaryOp::Mul, d[0], jf).unwrap();
    let r = b.end_for(&[s]).unwrap();
    let never = b.binary(BinaryOp::Gt, tid, Value::Int(1 << 20)).unwrap();
    b.begin_if(never).unwrap();
    // Made the constant 0 below (the builder refuses a literal 0 step).
    let zero = b.binary(BinaryOp::Mul, step, Value::Int(0)).unwrap();
    let (_, e) = b.begin_for(Value::Int(0), n, zero, &[r[0]]).unwrap();
    let s = b.binary(BinaryOp::Add, e[0], Value::Float(1.0)).unwrap();
    let r2 = b.end_for(&[s]).unwrap();
    b.begin_else(&[r2[0]]).unwrap();
    let r = b.end_if(&[r[0]]).unwrap();
    b.store(out, tid, r[0]).unwrap();
    b.finish_kernel().unwrap()
}

/// The lines of `text`, trimmed.
fn lines(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).collect()
}

/// Checks that every `for` of `text` sits in `if (<step> > 0) { … } else { <trap> }`.
fn every_loop_is_guarded(text: &str, trap: &str) {
    let l = lines(text);
    let fors: Vec<usize> = (0..l.len())
        .filter(|&i| l[i].starts_with("for ("))
        .collect();
    assert_eq!(fors.len(), 3, "{text}");
    for &i in &fors {
        let guard = l[i - 1];
        assert!(
            guard.starts_with("if (") && guard.ends_with(" > 0) {"),
            "loop at line {i} is not guarded by a positive-step test:\n{text}"
        );
        // The loop's header steps by the variable the guard tests.
        let step = &guard["if (".len()..guard.len() - " > 0) {".len()];
        assert!(l[i].contains(step), "{}", l[i]);
        // After the loop's closing brace: the else branch reaches the trap.
        let close = (i + 1..l.len())
            .find(|&k| l[k] == "} else {" && l[k + 1] == trap)
            .unwrap_or_else(|| panic!("no trap after the loop at line {i}:\n{text}"));
        assert!(close > i);
    }
}

#[test]
fn loops_with_unknown_or_non_positive_steps_trap_on_both_targets() {
    let cuda = compile(loops(), Target::Cuda).unwrap();
    let msl = compile(loops(), Target::Metal).unwrap();
    let (Source::Cuda(c), Source::Msl(m)) = (&cuda.source, &msl.source) else {
        panic!("wrong source kinds");
    };
    every_loop_is_guarded(&c.source, "__trap();");
    every_loop_is_guarded(&m.code, "TESSERA_TRAP(2);");
    // The i32 loop measures its remaining distance as u32 on both targets.
    assert!(
        c.source.contains("(unsigned int)p_istep ? "),
        "{}",
        c.source
    );
    assert!(m.code.contains("uint(istep) ? "), "{}", m.code);
}

#[test]
fn a_constant_zero_step_is_an_error_when_reached_not_when_emitted() {
    // Turn `step * 0` into the constant 0, as a folding pass could.
    let mut k = tessera_compiler::optimize(loops(), Target::Cuda).unwrap();
    fn zero_products(b: &mut Block, values: &[Type]) {
        for inst in &mut b.insts {
            let is_u32 = inst
                .result()
                .is_some_and(|r| values[r.index()] == Type::Scalar(Scalar::U32));
            if is_u32 && matches!(inst.op, Op::Binary(BinaryOp::Mul, ..)) {
                inst.op = Op::Const(Literal::U32(0));
            }
            for nested in inst.op.blocks_mut() {
                zero_products(nested, values);
            }
        }
    }
    let values = k.body.values.clone();
    zero_products(&mut k.body.block, &values);
    for (target, trap) in [
        (Target::Cuda, "__trap();"),
        (Target::Metal, "TESSERA_TRAP(2);"),
    ] {
        let src = emit(&k, target).unwrap();
        let text = src.text();
        every_loop_is_guarded(text, trap);
        assert!(text.contains("if (0u > 0) {"), "{text}");
    }
}

#[test]
fn the_cpu_target_has_no_source_but_gets_the_optimised_ir() {
    let k = compile(loops(), Target::Cpu).unwrap();
    assert_eq!(k.source, Source::Cpu);
    assert_eq!(k.source.text(), "");
    assert_eq!(k.kernel.name, "loops");
}
