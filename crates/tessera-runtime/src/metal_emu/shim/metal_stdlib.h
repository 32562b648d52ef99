// Tessera's model of the Metal Shading Language for g++ (C++17): the Metal scalar and
// vector types, `half` and `bfloat` (bit-exact, round-to-nearest-even conversions), the
// address-space qualifiers as empty macros, the math library, atomics, and simdgroup /
// threadgroup collectives.
//
// It serves two uses. `g++ -fsyntax-only` against it checks that generated MSL is well
// formed. With TESSERA_EMU defined, the collectives become rendezvous points of the
// fiber emulator (tessera_emu_runtime.h), which runs a threadgroup's threads as fibers.
//
// Collectives and barriers are macros that pass __LINE__, so that lanes meeting at
// different call sites are reported rather than silently paired.
#ifndef TESSERA_METAL_STDLIB_H
#define TESSERA_METAL_STDLIB_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#ifdef TESSERA_EMU
#include "tessera_emu_runtime.h"
#endif

namespace tsr_emu {
// Implemented by the emulator runtime; only declared for a syntax check.
using ResolveFn = void (*)(const void* const* ins, void* const* outs, const unsigned* args, int n);
void simd_exchange(const void* in, void* out, unsigned arg, ResolveFn fn, int line);
void barrier_at(int line);
unsigned current_lane();
[[noreturn]] void trap(int code, int line);
}  // namespace tsr_emu

namespace metal {

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;

// ── half and bfloat ─────────────────────────────────────────────────────────────

inline uint32_t tsr_f32_bits(float x) { uint32_t b; std::memcpy(&b, &x, 4); return b; }
inline float tsr_bits_f32(uint32_t b) { float x; std::memcpy(&x, &b, 4); return x; }

inline uint16_t tsr_f32_to_f16(float f) {
    uint32_t x = tsr_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xffu) return uint16_t(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int e = int(exp) - 127 + 15;
    if (e >= 0x1f) return uint16_t(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return uint16_t(sign);
        man |= 0x800000u;
        uint32_t shift = uint32_t(14 - e);
        uint32_t half_man = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (half_man & 1u))) half_man++;
        return uint16_t(sign | half_man);
    }
    uint32_t h = sign | (uint32_t(e) << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return uint16_t(h);
}

inline float tsr_f16_to_f32(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) return tsr_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return tsr_bits_f32(sign);
        float v = std::ldexp(float(man), -24);
        return sign ? -v : v;
    }
    return tsr_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t tsr_f32_to_bf16(float f) {
    uint32_t x = tsr_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return uint16_t((x + rounding) >> 16);
}

struct half {
    uint16_t bits;
    half() = default;
    half(float f) : bits(tsr_f32_to_f16(f)) {}
    half(double f) : half(float(f)) {}
    half(int i) : half(float(i)) {}
    half(uint i) : half(float(i)) {}
    operator float() const { return tsr_f16_to_f32(bits); }
};

struct bfloat {
    uint16_t bits;
    bfloat() = default;
    bfloat(float f) : bits(tsr_f32_to_bf16(f)) {}
    bfloat(double f) : bfloat(float(f)) {}
    bfloat(int i) : bfloat(float(i)) {}
    bfloat(uint i) : bfloat(float(i)) {}
    bfloat(half h) : bfloat(float(h)) {}
    operator float() const { return tsr_bits_f32(uint32_t(bits) << 16); }
};

// ── vectors ─────────────────────────────────────────────────────────────────────

template <typename T, int N> struct tsr_vec;

// Lanes are reachable both as .x/.y/.z/.w and by index (GNU anonymous structs in a union).
#define TSR_VEC_COMMON(N)                                                              \
    T& operator[](int i) { return v[i]; }                                              \
    const T& operator[](int i) const { return v[i]; }                                  \
    tsr_vec() = default;                                                               \
    template <typename U> explicit tsr_vec(const tsr_vec<U, N>& o) {                   \
        for (int i = 0; i < N; ++i) v[i] = T(o[i]);                                    \
    }

template <typename T> struct alignas(sizeof(T) * 2) tsr_vec<T, 2> {
    union { struct { T x, y; }; T v[2]; };
    TSR_VEC_COMMON(2)
    tsr_vec(T a, T b) : v{a, b} {}
    explicit tsr_vec(T a) : v{a, a} {}
};
template <typename T> struct alignas(sizeof(T) * 4) tsr_vec<T, 3> {
    union { struct { T x, y, z; }; T v[3]; };
    TSR_VEC_COMMON(3)
    tsr_vec(T a, T b, T c) : v{a, b, c} {}
    explicit tsr_vec(T a) : v{a, a, a} {}
};
template <typename T> struct alignas(sizeof(T) * 4) tsr_vec<T, 4> {
    union { struct { T x, y, z, w; }; T v[4]; };
    TSR_VEC_COMMON(4)
    tsr_vec(T a, T b, T c, T d) : v{a, b, c, d} {}
    explicit tsr_vec(T a) : v{a, a, a, a} {}
};
#undef TSR_VEC_COMMON

#define TSR_VEC_OP(op)                                                                 \
    template <typename T, int N>                                                       \
    tsr_vec<T, N> operator op(const tsr_vec<T, N>& a, const tsr_vec<T, N>& b) {        \
        tsr_vec<T, N> r;                                                               \
        for (int i = 0; i < N; ++i) r[i] = T(a[i] op b[i]);                            \
        return r;                                                                      \
    }                                                                                  \
    template <typename T, int N>                                                       \
    tsr_vec<T, N> operator op(const tsr_vec<T, N>& a, T b) {                           \
        tsr_vec<T, N> r;                                                               \
        for (int i = 0; i < N; ++i) r[i] = T(a[i] op b);                               \
        return r;                                                                      \
    }
TSR_VEC_OP(+)
TSR_VEC_OP(-)
TSR_VEC_OP(*)
TSR_VEC_OP(/)
#undef TSR_VEC_OP

#define TSR_VEC_TYPES(T, name)                                                         \
    typedef tsr_vec<T, 2> name##2;                                                     \
    typedef tsr_vec<T, 3> name##3;                                                     \
    typedef tsr_vec<T, 4> name##4;
TSR_VEC_TYPES(float, float)
TSR_VEC_TYPES(half, half)
TSR_VEC_TYPES(bfloat, bfloat)
TSR_VEC_TYPES(int, int)
TSR_VEC_TYPES(uint, uint)
TSR_VEC_TYPES(short, short)
TSR_VEC_TYPES(ushort, ushort)
TSR_VEC_TYPES(char, char)
TSR_VEC_TYPES(uchar, uchar)
TSR_VEC_TYPES(bool, bool)
#undef TSR_VEC_TYPES

// ── reinterpretation and math ───────────────────────────────────────────────────

template <typename To, typename From> inline To as_type(const From& f) {
    static_assert(sizeof(To) == sizeof(From), "as_type needs types of one size");
    To t;
    std::memcpy(static_cast<void*>(&t), static_cast<const void*>(&f), sizeof(To));
    return t;
}

inline float exp(float x) { return std::exp(x); }
inline float exp2(float x) { return std::exp2(x); }
inline float log(float x) { return std::log(x); }
inline float log2(float x) { return std::log2(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float sin(float x) { return std::sin(x); }
inline float cos(float x) { return std::cos(x); }
inline float tanh(float x) { return std::tanh(x); }
inline float floor(float x) { return std::floor(x); }
inline float ceil(float x) { return std::ceil(x); }
inline float fabs(float x) { return std::fabs(x); }
inline float abs(float x) { return std::fabs(x); }
inline float fmin(float a, float b) { return std::fmin(a, b); }
inline float fmax(float a, float b) { return std::fmax(a, b); }
inline float fmod(float a, float b) { return std::fmod(a, b); }
inline float pow(float a, float b) { return std::pow(a, b); }
inline float powr(float a, float b) { return std::pow(a, b); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isinf(float x) { return std::isinf(x); }
inline bool isfinite(float x) { return std::isfinite(x); }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline uint min(uint a, uint b) { return a < b ? a : b; }
inline uint max(uint a, uint b) { return a > b ? a : b; }
inline float clamp(float x, float lo, float hi) { return std::fmin(std::fmax(x, lo), hi); }
inline float mix(float a, float b, float t) { return a + (b - a) * t; }
template <typename T> inline T select(T a, T b, bool c) { return c ? b : a; }
namespace precise { using metal::exp; using metal::log; using metal::sqrt; using metal::tanh; }
namespace fast { using metal::exp; using metal::log; using metal::sqrt; using metal::tanh; }

// ── memory ──────────────────────────────────────────────────────────────────────

enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(unsigned(a) | unsigned(b)); }

enum memory_order { memory_order_relaxed };

template <typename T> struct tsr_atomic {
    static_assert(sizeof(T) == 4, "Metal atomics are 32-bit");
    T value;
};
typedef tsr_atomic<int> atomic_int;
typedef tsr_atomic<uint> atomic_uint;
typedef tsr_atomic<float> atomic_float;

template <typename T> inline T atomic_load_explicit(tsr_atomic<T>* p, memory_order) {
    return __atomic_load_n(&p->value, __ATOMIC_RELAXED);
}
inline float atomic_load_explicit(atomic_float* p, memory_order) {
    uint32_t b = __atomic_load_n(reinterpret_cast<uint32_t*>(&p->value), __ATOMIC_RELAXED);
    return tsr_bits_f32(b);
}
template <typename T> inline void atomic_store_explicit(tsr_atomic<T>* p, T v, memory_order) {
    __atomic_store_n(&p->value, v, __ATOMIC_RELAXED);
}
template <typename T> inline T atomic_exchange_explicit(tsr_atomic<T>* p, T v, memory_order) {
    return __atomic_exchange_n(&p->value, v, __ATOMIC_RELAXED);
}
template <typename T>
inline bool atomic_compare_exchange_weak_explicit(tsr_atomic<T>* p, T* expected, T desired,
                                                  memory_order, memory_order) {
    return __atomic_compare_exchange_n(&p->value, expected, desired, true, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}
template <typename T> inline T atomic_fetch_add_explicit(tsr_atomic<T>* p, T v, memory_order) {
    return __atomic_fetch_add(&p->value, v, __ATOMIC_RELAXED);
}
inline float atomic_fetch_add_explicit(atomic_float* p, float v, memory_order) {
    uint32_t* bits = reinterpret_cast<uint32_t*>(&p->value);
    uint32_t old = __atomic_load_n(bits, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(bits, &old, tsr_f32_bits(tsr_bits_f32(old) + v), true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return tsr_bits_f32(old);
}
template <typename T> inline T atomic_fetch_sub_explicit(tsr_atomic<T>* p, T v, memory_order) {
    return __atomic_fetch_sub(&p->value, v, __ATOMIC_RELAXED);
}
template <typename T> inline T atomic_fetch_and_explicit(tsr_atomic<T>* p, T v, memory_order) {
    return __atomic_fetch_and(&p->value, v, __ATOMIC_RELAXED);
}
template <typename T> inline T atomic_fetch_or_explicit(tsr_atomic<T>* p, T v, memory_order) {
    return __atomic_fetch_or(&p->value, v, __ATOMIC_RELAXED);
}
template <typename T> inline T atomic_fetch_xor_explicit(tsr_atomic<T>* p, T v, memory_order) {
    return __atomic_fetch_xor(&p->value, v, __ATOMIC_RELAXED);
}
template <typename T> inline T atomic_fetch_max_explicit(tsr_atomic<T>* p, T v, memory_order) {
    T old = __atomic_load_n(&p->value, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&p->value, &old, old > v ? old : v, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <typename T> inline T atomic_fetch_min_explicit(tsr_atomic<T>* p, T v, memory_order) {
    T old = __atomic_load_n(&p->value, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&p->value, &old, old < v ? old : v, true,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}

// ── simdgroup matrices ──────────────────────────────────────────────────────────
// Every lane holds the whole matrix (element (r, c) at e[r * Cols + c]); the operations
// are macros below that first meet the other lanes of the simdgroup, so a lane missing
// from a matrix operation is reported like one missing from a collective.

typedef unsigned long ulong;
struct ulong2 {
    ulong x, y;
    ulong2(ulong a, ulong b) : x(a), y(b) {}
};

template <typename T, int Cols, int Rows> struct simdgroup_matrix {
    T e[Rows * Cols];
};

template <typename T, int Cols, int Rows>
inline simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(T v) {
    simdgroup_matrix<T, Cols, Rows> m;
    for (int i = 0; i < Rows * Cols; ++i) m.e[i] = v;
    return m;
}

template <typename T, int Cols, int Rows>
inline void tsr_sg_load(simdgroup_matrix<T, Cols, Rows>& d, const T* src, ulong elements_per_row = Cols,
                        ulong2 origin = ulong2(0, 0), bool transpose = false) {
    for (int r = 0; r < Rows; ++r)
        for (int c = 0; c < Cols; ++c) {
            ulong row = transpose ? ulong(c) : ulong(r), col = transpose ? ulong(r) : ulong(c);
            d.e[r * Cols + c] = src[(origin.y + row) * elements_per_row + origin.x + col];
        }
}

template <typename T, int Cols, int Rows>
inline void tsr_sg_store(const simdgroup_matrix<T, Cols, Rows>& m, T* dst, ulong elements_per_row = Cols,
                         ulong2 origin = ulong2(0, 0), bool transpose = false) {
    for (int r = 0; r < Rows; ++r)
        for (int c = 0; c < Cols; ++c) {
            ulong row = transpose ? ulong(c) : ulong(r), col = transpose ? ulong(r) : ulong(c);
            dst[(origin.y + row) * elements_per_row + origin.x + col] = m.e[r * Cols + c];
        }
}

// d = a·b + c with products and sums in f32 (d may be c).
template <typename T, typename U, typename V, int K, int N, int M>
inline void tsr_sg_mma(simdgroup_matrix<T, N, M>& d, const simdgroup_matrix<U, K, M>& a,
                       const simdgroup_matrix<U, N, K>& b, const simdgroup_matrix<V, N, M>& c) {
    float out[M * N];
    for (int r = 0; r < M; ++r)
        for (int col = 0; col < N; ++col) {
            float acc = float(c.e[r * N + col]);
            for (int k = 0; k < K; ++k) acc += float(a.e[r * K + k]) * float(b.e[k * N + col]);
            out[r * N + col] = acc;
        }
    for (int i = 0; i < M * N; ++i) d.e[i] = T(out[i]);
}

// Per-element work on a matrix. On Metal each thread owns two elements
// (`thread_elements()`); here each thread holds the whole matrix, so the generated code's
// helpers give way to whole-matrix definitions.
#define TESSERA_SG_ELEMENTWISE 1
template <typename T, typename U, int Cols, int Rows>
inline simdgroup_matrix<T, Cols, Rows> tsr_sg_convert(const simdgroup_matrix<U, Cols, Rows>& m) {
    simdgroup_matrix<T, Cols, Rows> r;
    for (int i = 0; i < Rows * Cols; ++i) r.e[i] = T(float(m.e[i]));
    return r;
}
template <typename T, int Cols, int Rows>
inline simdgroup_matrix<T, Cols, Rows> tsr_sg_scale(simdgroup_matrix<T, Cols, Rows> m, float s) {
    for (int i = 0; i < Rows * Cols; ++i) m.e[i] = T(float(m.e[i]) * s);
    return m;
}

}  // namespace metal

// ── simdgroup collectives (semantics; the rendezvous is the runtime's) ──────────

namespace tsr_emu {
using metal::uint;

template <typename T> struct Acc { typedef T type; };
template <> struct Acc<int> { typedef uint type; };  // signed sums wrap
template <> struct Acc<metal::half> { typedef float type; };
template <> struct Acc<metal::bfloat> { typedef float type; };

enum class Fold { Sum, Product, Max, Min, And, Or, Xor };

template <typename T> inline T fold_step(Fold f, T a, T b) {
    typedef typename Acc<T>::type A;
    switch (f) {
    case Fold::Sum: return T(A(a) + A(b));
    case Fold::Product: return T(A(a) * A(b));
    case Fold::Max:
        if constexpr (std::is_floating_point<A>::value) return T(std::fmax(A(a), A(b)));
        else return a > b ? a : b;
    case Fold::Min:
        if constexpr (std::is_floating_point<A>::value) return T(std::fmin(A(a), A(b)));
        else return a < b ? a : b;
    case Fold::And:
        if constexpr (std::is_integral<T>::value) return T(a & b); else return a;
    case Fold::Or:
        if constexpr (std::is_integral<T>::value) return T(a | b); else return a;
    case Fold::Xor:
        if constexpr (std::is_integral<T>::value) return T(a ^ b); else return a;
    }
    return a;
}

template <typename T, Fold F>
void resolve_reduce(const void* const* ins, void* const* outs, const unsigned*, int n) {
    T acc = *static_cast<const T*>(ins[0]);
    for (int i = 1; i < n; ++i) acc = fold_step<T>(F, acc, *static_cast<const T*>(ins[i]));
    for (int i = 0; i < n; ++i) *static_cast<T*>(outs[i]) = acc;
}

template <typename T, bool Inclusive>
void resolve_prefix(const void* const* ins, void* const* outs, const unsigned*, int n) {
    T acc = T(0);
    for (int i = 0; i < n; ++i) {
        T x = *static_cast<const T*>(ins[i]);
        if (Inclusive) acc = fold_step<T>(Fold::Sum, acc, x);
        *static_cast<T*>(outs[i]) = acc;
        if (!Inclusive) acc = fold_step<T>(Fold::Sum, acc, x);
    }
}

template <bool All> void resolve_vote(const void* const* ins, void* const* outs, const unsigned*, int n) {
    bool r = All;
    for (int i = 0; i < n; ++i) {
        bool b = *static_cast<const bool*>(ins[i]);
        r = All ? (r && b) : (r || b);
    }
    for (int i = 0; i < n; ++i) *static_cast<bool*>(outs[i]) = r;
}

enum class Shuffle { Index, Xor, Up, Down };

// Lanes outside the simdgroup keep their own value for Up / Down (Metal's rule); an Index
// or Xor lane outside it is an error (code 3).
template <typename T, Shuffle S>
void resolve_shuffle(const void* const* ins, void* const* outs, const unsigned* args, int n) {
    for (int i = 0; i < n; ++i) {
        unsigned a = args[i];
        long src = i;
        switch (S) {
        case Shuffle::Index: src = long(a); break;
        case Shuffle::Xor: src = long(unsigned(i) ^ a); break;
        case Shuffle::Up: src = long(i) - long(a); if (src < 0) src = i; break;
        case Shuffle::Down: src = long(i) + long(a); if (src >= 32) src = i; break;
        }
        if (src < 0 || src >= n) {
            if (S == Shuffle::Index || S == Shuffle::Xor) trap(3, int(src & 0x7fffffff));
            src = i;
        }
        *static_cast<T*>(outs[i]) = *static_cast<const T*>(ins[src]);
    }
}

template <typename T> inline T collective(T x, unsigned arg, ResolveFn fn, int line) {
    T out;
    simd_exchange(&x, &out, arg, fn, line);
    return out;
}
}  // namespace tsr_emu

#define simd_sum(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_reduce<std::decay_t<decltype(x)>, ::tsr_emu::Fold::Sum>, __LINE__)
#define simd_product(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_reduce<std::decay_t<decltype(x)>, ::tsr_emu::Fold::Product>, __LINE__)
#define simd_max(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_reduce<std::decay_t<decltype(x)>, ::tsr_emu::Fold::Max>, __LINE__)
#define simd_min(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_reduce<std::decay_t<decltype(x)>, ::tsr_emu::Fold::Min>, __LINE__)
#define simd_and(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_reduce<std::decay_t<decltype(x)>, ::tsr_emu::Fold::And>, __LINE__)
#define simd_or(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_reduce<std::decay_t<decltype(x)>, ::tsr_emu::Fold::Or>, __LINE__)
#define simd_xor(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_reduce<std::decay_t<decltype(x)>, ::tsr_emu::Fold::Xor>, __LINE__)
#define simd_prefix_inclusive_sum(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_prefix<std::decay_t<decltype(x)>, true>, __LINE__)
#define simd_prefix_exclusive_sum(x) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), 0u, &::tsr_emu::resolve_prefix<std::decay_t<decltype(x)>, false>, __LINE__)
#define simd_all(x) ::tsr_emu::collective<bool>(bool(x), 0u, &::tsr_emu::resolve_vote<true>, __LINE__)
#define simd_any(x) ::tsr_emu::collective<bool>(bool(x), 0u, &::tsr_emu::resolve_vote<false>, __LINE__)
#define simd_shuffle(x, l) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), unsigned(l), &::tsr_emu::resolve_shuffle<std::decay_t<decltype(x)>, ::tsr_emu::Shuffle::Index>, __LINE__)
#define simd_broadcast(x, l) simd_shuffle(x, l)
#define simd_shuffle_xor(x, m) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), unsigned(m), &::tsr_emu::resolve_shuffle<std::decay_t<decltype(x)>, ::tsr_emu::Shuffle::Xor>, __LINE__)
#define simd_shuffle_up(x, d) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), unsigned(d), &::tsr_emu::resolve_shuffle<std::decay_t<decltype(x)>, ::tsr_emu::Shuffle::Up>, __LINE__)
#define simd_shuffle_down(x, d) ::tsr_emu::collective<std::decay_t<decltype(x)>>((x), unsigned(d), &::tsr_emu::resolve_shuffle<std::decay_t<decltype(x)>, ::tsr_emu::Shuffle::Down>, __LINE__)
namespace tsr_emu {
// A rendezvous of the simdgroup with no data: every lane must reach the same line.
inline void simd_meet(int line) {
    (void)collective<unsigned>(0u, 0u, &resolve_reduce<unsigned, Fold::Or>, line);
}
}  // namespace tsr_emu
#define simdgroup_load(...) (::tsr_emu::simd_meet(__LINE__), ::metal::tsr_sg_load(__VA_ARGS__))
#define simdgroup_store(...) (::tsr_emu::simd_meet(__LINE__), ::metal::tsr_sg_store(__VA_ARGS__))
#define simdgroup_multiply_accumulate(...) (::tsr_emu::simd_meet(__LINE__), ::metal::tsr_sg_mma(__VA_ARGS__))
#define threadgroup_barrier(flags) ((void)(flags), ::tsr_emu::barrier_at(__LINE__))
#define simdgroup_barrier(flags) ((void)(flags), ::tsr_emu::simd_meet(__LINE__))

// ── Metal keywords ──────────────────────────────────────────────────────────────
// Address spaces and the kernel qualifier carry no meaning in the emulator: device and
// constant buffers are host memory; threadgroup arrays are declared through
// TESSERA_THREADGROUP_ARRAY, which the emulator defines before the kernel.
#define kernel
#define device
#define constant
#define threadgroup
#define thread

#endif  // TESSERA_METAL_STDLIB_H
