//! Small MSL functions the generated code calls where a single Metal expression would not
//! have the IR's meaning (saturating float → int casts, total integer division, float
//! atomics on threadgroup memory, per-element work on simdgroup matrices). Only the ones a
//! kernel uses are emitted.

/// One helper function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Helper {
    DivI32,
    RemI32,
    DivU32,
    RemU32,
    F2I32,
    F2U32,
    F2I8,
    F2U8,
    AtomicAddF32Threadgroup,
    /// A simdgroup matrix converted element by element (float to `half`/`bfloat` rounds,
    /// the other way widens).
    SgConvert,
    /// A float simdgroup matrix times a scalar.
    SgScale,
}

impl Helper {
    /// The helper's MSL definition.
    pub fn source(self) -> &'static str {
        match self {
            Helper::DivI32 => {
                "inline int tsr_div_i32(int a, int b) {\n    \
                 if (b == 0) { TESSERA_TRAP(1); return 0; }\n    \
                 return b == -1 ? int(0u - uint(a)) : a / b;\n}\n"
            }
            Helper::RemI32 => {
                "inline int tsr_rem_i32(int a, int b) {\n    \
                 if (b == 0) { TESSERA_TRAP(1); return 0; }\n    \
                 return b == -1 ? 0 : a % b;\n}\n"
            }
            Helper::DivU32 => {
                "inline uint tsr_div_u32(uint a, uint b) {\n    \
                 if (b == 0u) { TESSERA_TRAP(1); return 0u; }\n    \
                 return a / b;\n}\n"
            }
            Helper::RemU32 => {
                "inline uint tsr_rem_u32(uint a, uint b) {\n    \
                 if (b == 0u) { TESSERA_TRAP(1); return 0u; }\n    \
                 return a % b;\n}\n"
            }
            Helper::F2I32 => {
                "inline int tsr_f2i32(float x) {\n    \
                 return isnan(x) ? 0 : x <= -2147483648.0f ? int(0x80000000u)\n        \
                 : x >= 2147483648.0f ? 2147483647 : int(x);\n}\n"
            }
            Helper::F2U32 => {
                "inline uint tsr_f2u32(float x) {\n    \
                 return isnan(x) || x <= 0.0f ? 0u : x >= 4294967296.0f ? 4294967295u : uint(x);\n}\n"
            }
            Helper::F2I8 => {
                "inline char tsr_f2i8(float x) {\n    \
                 return isnan(x) ? char(0) : x <= -128.0f ? char(-128)\n        \
                 : x >= 127.0f ? char(127) : char(int(x));\n}\n"
            }
            Helper::F2U8 => {
                "inline uchar tsr_f2u8(float x) {\n    \
                 return isnan(x) || x <= 0.0f ? uchar(0) : x >= 255.0f ? uchar(255) : uchar(int(x));\n}\n"
            }
            Helper::AtomicAddF32Threadgroup => {
                "inline float tsr_atomic_add_f32(threadgroup atomic_uint* p, float v) {\n    \
                 uint old = atomic_load_explicit(p, memory_order_relaxed);\n    \
                 while (!atomic_compare_exchange_weak_explicit(p, &old,\n            \
                 as_type<uint>(as_type<float>(old) + v), memory_order_relaxed, memory_order_relaxed)) {\n    \
                 }\n    \
                 return as_type<float>(old);\n}\n"
            }
            // Each thread owns two elements of an 8×8 simdgroup matrix (`thread_elements`).
            // The Linux emulator holds whole matrices per thread and brings its own
            // definitions (TESSERA_SG_ELEMENTWISE).
            Helper::SgConvert => {
                "#ifndef TESSERA_SG_ELEMENTWISE\n\
                 template <typename T, typename U>\n\
                 inline simdgroup_matrix<T, 8, 8> tsr_sg_convert(simdgroup_matrix<U, 8, 8> m) {\n    \
                 simdgroup_matrix<T, 8, 8> r;\n    \
                 r.thread_elements()[0] = T(m.thread_elements()[0]);\n    \
                 r.thread_elements()[1] = T(m.thread_elements()[1]);\n    \
                 return r;\n}\n#endif\n"
            }
            Helper::SgScale => {
                "#ifndef TESSERA_SG_ELEMENTWISE\n\
                 inline simdgroup_matrix<float, 8, 8> tsr_sg_scale(simdgroup_matrix<float, 8, 8> m, float s) {\n    \
                 m.thread_elements()[0] *= s;\n    \
                 m.thread_elements()[1] *= s;\n    \
                 return m;\n}\n#endif\n"
            }
        }
    }
}
