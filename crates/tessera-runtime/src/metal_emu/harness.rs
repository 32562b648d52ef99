//! The C++ program the emulator builds for one kernel: the generated MSL, compiled against
//! the Metal model with the fiber runtime, plus glue that binds the argument slots and the
//! per-thread attributes to the kernel's entry point.

use tessera_compiler::msl::{msl_scalar_type, MslArg, MslBuiltin, MslSource};

/// The name of the MSL "file" in diagnostics and reports.
pub(crate) fn msl_file(source: &MslSource) -> String {
    format!("{}.metal", source.entry)
}

/// The whole translation unit for `source`, whose kernel declares `local_bytes` bytes of
/// per-thread arrays (to size fiber stacks).
pub(crate) fn program(source: &MslSource, nparams: usize, local_bytes: usize) -> String {
    let mut call = Vec::new();
    let mut is_tensor = vec!["false"; nparams];
    let mut names = vec!["\"?\"".to_string(); nparams];
    for arg in &source.args {
        match arg {
            MslArg::Tensor {
                param,
                elem,
                writable,
                name,
                ..
            } => {
                let c = if *writable { "" } else { "const " };
                call.push(format!(
                    "({c}{}*)tsr_slots[{param}]",
                    msl_scalar_type(*elem)
                ));
                if let Some(t) = is_tensor.get_mut(*param) {
                    *t = "true";
                }
                if let Some(n) = names.get_mut(*param) {
                    *n = format!("\"{name}\"");
                }
            }
            MslArg::Scalar {
                param, ty, name, ..
            } => {
                call.push(format!("*({}*)tsr_slots[{param}]", msl_scalar_type(*ty)));
                if let Some(n) = names.get_mut(*param) {
                    *n = format!("\"{name}\"");
                }
            }
            MslArg::Builtin(b) => call.push(
                match b {
                    MslBuiltin::ThreadPositionInThreadgroup => "uint3(t.tid, 0u, 0u)",
                    MslBuiltin::ThreadgroupPositionInGrid => "uint3(t.gid[0], t.gid[1], t.gid[2])",
                    MslBuiltin::ThreadsPerThreadgroup => "uint3(t.group_size, 1u, 1u)",
                    MslBuiltin::ThreadgroupsPerGrid => "uint3(t.grid[0], t.grid[1], t.grid[2])",
                    MslBuiltin::ThreadIndexInSimdgroup => "t.lane",
                    MslBuiltin::SimdgroupIndexInThreadgroup => "t.simd_id",
                    MslBuiltin::SimdgroupsPerThreadgroup => "t.simd_groups",
                }
                .to_string(),
            ),
        }
    }
    let n = nparams.max(1);
    let pad = |v: Vec<String>| {
        if v.is_empty() {
            "0".to_string()
        } else {
            v.join(", ")
        }
    };
    let kernel_name = source.kernel_name.replace(['\\', '"'], "_");
    format!(
        "#define TESSERA_EMU 1\n\
         #define TESSERA_TRAP(code) ::tsr_emu::trap((code), __LINE__)\n\
         #define TESSERA_THREADGROUP_ARRAY static thread_local\n\
         #line 1 \"{file}\"\n\
         {code}\n\
         #line 1 \"tessera-emu-glue\"\n\
         static void* tsr_slots[{n}];\n\
         static void tsr_entry(const ::tsr_emu::ThreadInfo& t) {{\n    \
         {entry}({call});\n}}\n\
         int main(int argc, char** argv) {{\n    \
         static const bool is_tensor[{n}] = {{{is_tensor}}};\n    \
         static const char* const names[{n}] = {{{names}}};\n    \
         return ::tsr_emu::main(argc, argv, {nparams}, is_tensor, names, tsr_slots, &tsr_entry,\n        \
         \"{kernel_name}\", {local_bytes});\n}}\n",
        file = msl_file(source),
        code = source.code,
        entry = source.entry,
        call = call.join(",\n        "),
        is_tensor = pad(is_tensor.iter().map(|s| s.to_string()).collect()),
        names = pad(names),
    )
}
