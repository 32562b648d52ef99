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
    /// Row vectors of 16×16 fragments (`tsr_rows`) and the row ops on 2×2 arrays of
    /// float simdgroup matrices.
    SgRows,
    /// An 8×8 simdgroup matrix gathered from a 128-byte-swizzled tile (`matrix_mma_tiles`).
    SgSwizzledLoad,
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
            Helper::SgRows => SG_ROWS,
            Helper::SgSwizzledLoad => SG_SWIZZLED_LOAD,
        }
    }
}

/// Block `(r0, c0)` of a swizzled tile as an 8×8 matrix: element `(i, j)` is the tile's
/// logical `(r0 + i, c0 + j)` (mode 1: `(c0 + j, r0 + i)`), at `64·row + 8·((col / 8) ⊕
/// (row mod 8)) + col mod 8`; mode 2 reads `(r0 + i, c0 + j)` of a `[K, N]` tile in
/// 64-column blocks 4096 elements apart. On Metal a lane fills its two elements (the
/// `thread_elements` layout of [`SG_ROWS`]); in the emulator every lane holds the whole
/// matrix.
const SG_SWIZZLED_LOAD: &str = "inline uint tsr_swz(uint r, uint c) { return r * 64u + ((((c >> 3) ^ (r & 7u))) << 3) + (c & 7u); }
inline uint tsr_swz_at(uint r, uint c, uint mode) {
    return mode == 0u ? tsr_swz(r, c) : mode == 1u ? tsr_swz(c, r) : (c >> 6) * 4096u + tsr_swz(r, c & 63u);
}
#ifndef TESSERA_SG_ELEMENTWISE
template <typename T>
inline void tsr_sg_load_swz(thread simdgroup_matrix<T, 8, 8>& m, const threadgroup T* tile, uint r0, uint c0, uint mode, ushort lane) {
    uint fm = ((lane >> 2) & 4u) + ((lane >> 1) & 3u), fn = ((lane >> 2) & 2u) * 2u + (lane & 1u) * 2u;
    for (uint k = 0; k < 2; ++k) {
        m.thread_elements()[k] = tile[tsr_swz_at(r0 + fm, c0 + fn + k, mode)];
    }
}
#else
template <typename T>
inline void tsr_sg_load_swz(thread simdgroup_matrix<T, 8, 8>& m, const threadgroup T* tile, uint r0, uint c0, uint mode, ushort lane) {
    (void)lane;
    for (uint i = 0; i < 8; ++i)
        for (uint j = 0; j < 8; ++j)
            m.e[i * 8 + j] = tile[tsr_swz_at(r0 + i, c0 + j, mode)];
}
#endif
";

/// Row vectors and row ops. On Metal lane `l` holds elements `(fm, fn)` and `(fm, fn + 1)`
/// of each 8×8 matrix (`thread_elements()`), `fm = (l / 4 & 4) + (l / 2) % 4` and `fn =
/// (l / 4 & 2) · 2 + (l % 2) · 2`; the lanes of a row differ in bits 0 and 3, so a row
/// reduction is the lane's pair, then `simd_shuffle_xor` by 1 and by 8, and a row vector is
/// the lane's two rows `fm` and `fm + 8`. The Linux emulator holds whole matrices per
/// thread: there a row vector holds all 16 rows.
const SG_ROWS: &str = "#ifndef TESSERA_SG_ELEMENTWISE
#define TSR_ROWS 2
struct tsr_rows { float v[2]; };
inline void tsr_row_reduce(thread tsr_rows& r, thread simdgroup_matrix<float, 8, 8>* m, bool sum) {
    for (int h = 0; h < 2; ++h) {
        float a0 = m[2 * h].thread_elements()[0], a1 = m[2 * h].thread_elements()[1];
        float b0 = m[2 * h + 1].thread_elements()[0], b1 = m[2 * h + 1].thread_elements()[1];
        float x = sum ? (a0 + a1) + (b0 + b1) : fmax(fmax(a0, a1), fmax(b0, b1));
        float y = simd_shuffle_xor(x, 1);
        x = sum ? x + y : fmax(x, y);
        y = simd_shuffle_xor(x, 8);
        x = sum ? x + y : fmax(x, y);
        r.v[h] = sum ? r.v[h] + x : fmax(r.v[h], x);
    }
}
inline void tsr_row_map(thread simdgroup_matrix<float, 8, 8>* m, tsr_rows r, bool exp2_sub) {
    for (int b = 0; b < 4; ++b) {
        float mr = r.v[b >> 1];
        for (int k = 0; k < 2; ++k) {
            float x = m[b].thread_elements()[k];
            m[b].thread_elements()[k] = exp2_sub ? (x == -INFINITY ? 0.0f : exp2(x - mr)) : x * mr;
        }
    }
}
inline void tsr_frag_mask(thread simdgroup_matrix<float, 8, 8>* m, int diag, int cap, float v, ushort lane) {
    int fm = int(((lane >> 2) & 4) + ((lane >> 1) & 3)), fn = int(((lane >> 2) & 2) * 2 + (lane & 1) * 2);
    for (int b = 0; b < 4; ++b) {
        for (int k = 0; k < 2; ++k) {
            int r = 8 * (b >> 1) + fm, c = 8 * (b & 1) + fn + k;
            if (c - r >= diag || c >= cap) m[b].thread_elements()[k] = v;
        }
    }
}
inline void tsr_frag_add(thread simdgroup_matrix<float, 8, 8>* d, thread simdgroup_matrix<float, 8, 8>* a, thread simdgroup_matrix<float, 8, 8>* b) {
    for (int i = 0; i < 4; ++i)
        for (int k = 0; k < 2; ++k) d[i].thread_elements()[k] = a[i].thread_elements()[k] + b[i].thread_elements()[k];
}
#else
#define TSR_ROWS 16
struct tsr_rows { float v[16]; };
inline void tsr_row_reduce(thread tsr_rows& r, thread simdgroup_matrix<float, 8, 8>* m, bool sum) {
    for (int row = 0; row < 16; ++row) {
        float x = r.v[row];
        for (int c = 0; c < 16; ++c) {
            float e = m[2 * (row >> 3) + (c >> 3)].e[(row & 7) * 8 + (c & 7)];
            x = sum ? x + e : fmax(x, e);
        }
        r.v[row] = x;
    }
}
inline void tsr_row_map(thread simdgroup_matrix<float, 8, 8>* m, tsr_rows r, bool exp2_sub) {
    for (int row = 0; row < 16; ++row)
        for (int c = 0; c < 16; ++c) {
            thread float& x = m[2 * (row >> 3) + (c >> 3)].e[(row & 7) * 8 + (c & 7)];
            x = exp2_sub ? (x == -INFINITY ? 0.0f : exp2(x - r.v[row])) : x * r.v[row];
        }
}
inline void tsr_frag_mask(thread simdgroup_matrix<float, 8, 8>* m, int diag, int cap, float v, ushort lane) {
    (void)lane;
    for (int row = 0; row < 16; ++row)
        for (int c = 0; c < 16; ++c)
            if (c - row >= diag || c >= cap) m[2 * (row >> 3) + (c >> 3)].e[(row & 7) * 8 + (c & 7)] = v;
}
inline void tsr_frag_add(thread simdgroup_matrix<float, 8, 8>* d, thread simdgroup_matrix<float, 8, 8>* a, thread simdgroup_matrix<float, 8, 8>* b) {
    for (int i = 0; i < 4; ++i)
        for (int k = 0; k < 64; ++k) d[i].e[k] = a[i].e[k] + b[i].e[k];
}
#endif
";
