//! The fixed part of every emitted CUDA C file: integer helpers with the IR's wrapping
//! rules, NaN / infinity tests, and — only where the kernel uses them — the f16 and bf16
//! types with their conversions. Nothing here includes a header: NVRTC alone compiles it.

/// Helpers every kernel gets.
pub const CORE: &str = r#"#define TS_FULL 0xffffffffu
// i32 division and remainder that wrap on INT_MIN / -1 as the IR requires.
static __device__ __forceinline__ int ts_div_i32(int a, int b) { return b == -1 ? (int)(0u - (unsigned int)a) : a / b; }
static __device__ __forceinline__ int ts_rem_i32(int a, int b) { return b == -1 ? 0 : a % b; }
static __device__ __forceinline__ int ts_clamp_i32(int x, int lo, int hi) { return x < lo ? lo : (x > hi ? hi : x); }
static __device__ __forceinline__ bool ts_isnan(float x) { return x != x; }
static __device__ __forceinline__ bool ts_isinf(float x) { return fabsf(x) == __uint_as_float(0x7f800000u); }
// Programmatic dependent launch (sm_90 and up): a kernel may be launched while the one
// before it on the stream drains, and waits here for that grid's completion and memory
// before touching memory. It lets the next kernel launch only as it exits (an early
// trigger let waiting blocks slow the kernels still running: H200, decode 4k 10.6 -> 12.1
// us). Earlier GPUs serialise launches themselves.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TS_AFTER_PREVIOUS_GRID() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define TS_AFTER_PREVIOUS_GRID() do { } while (0)
#endif
"#;

/// IEEE binary16 held as its bits; conversions are the hardware's round-to-nearest-even.
pub const F16: &str = r#"// f16: IEEE binary16 as bits. Math happens in f32; conversions round to nearest even.
struct ts_f16 { unsigned short bits; };
static __device__ __forceinline__ float ts_f16_to_f32(ts_f16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
static __device__ __forceinline__ ts_f16 ts_f16_from_f32(float f) {
  ts_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
"#;

/// bfloat16 held as its bits: widening is a shift; narrowing rounds to nearest even (in
/// hardware from sm_80, in integer code before).
pub const BF16: &str = r#"// bf16: the high half of an f32. Narrowing rounds to nearest even; NaN stays NaN.
struct ts_bf16 { unsigned short bits; };
static __device__ __forceinline__ float ts_bf16_to_f32(ts_bf16 h) {
  return __uint_as_float(((unsigned int)h.bits) << 16);
}
static __device__ __forceinline__ ts_bf16 ts_bf16_from_f32(float f) {
  ts_bf16 h;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    h.bits = (unsigned short)((u >> 16) | 0x0040u);
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    h.bits = (unsigned short)(u >> 16);
  }
#endif
  return h;
}
"#;

/// Asynchronous copies into shared memory: `cp.async` from sm_80, by the 32-bit shared and
/// the global address of each side (converted here, no headers), with a source size of 0
/// for the zero-fill form; earlier GPUs copy synchronously (`TS_CP_ASYNC` 0) and their
/// commits and waits are nothing.
pub const ASYNC_COPY: &str = r#"// Asynchronous copies (cp.async from sm_80; plain copies before).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TS_CP_ASYNC 1
static __device__ __forceinline__ unsigned int ts_shared_addr(const void* p) {
  unsigned int a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
static __device__ __forceinline__ unsigned long long ts_global_addr(const void* p) {
  unsigned long long a;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(a) : "l"(p));
  return a;
}
// 16 bytes bypass L1 (.cg); 4 and 8 go through it (.ca, the only form for them).
static __device__ __forceinline__ void ts_cp_async16(void* dst, const void* src, unsigned int n) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(ts_shared_addr(dst)), "l"(ts_global_addr(src)), "r"(n) : "memory");
}
static __device__ __forceinline__ void ts_cp_async8(void* dst, const void* src, unsigned int n) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" :: "r"(ts_shared_addr(dst)), "l"(ts_global_addr(src)), "r"(n) : "memory");
}
static __device__ __forceinline__ void ts_cp_async4(void* dst, const void* src, unsigned int n) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(ts_shared_addr(dst)), "l"(ts_global_addr(src)), "r"(n) : "memory");
}
#define TS_CP_ASYNC_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define TS_CP_ASYNC_WAIT(N) asm volatile("cp.async.wait_group " #N ";" ::: "memory")
#else
#define TS_CP_ASYNC 0
#define TS_CP_ASYNC_COMMIT() do { } while (0)
#define TS_CP_ASYNC_WAIT(N) do { } while (0)
#endif
"#;

/// Tile products (`matrix_mma_tiles`): warpgroup MMA (`wgmma.mma_async`) reading both tiles
/// through shared-memory descriptors where the kernel is compiled for sm_90a
/// (`TS_WGMMA` 1), `ldmatrix` + `mma.sync` on the same swizzled tiles elsewhere. A
/// descriptor names a K-major tile in the 128-byte swizzle (mode 1), 1024 bytes between
/// groups of eight rows; its start address moves 32 bytes per 16 columns.
pub const TILE_MMA: &str = r#"// Tile products (wgmma on sm_90a; ldmatrix + mma.sync on swizzled tiles elsewhere).
static __device__ __forceinline__ unsigned int ts_tile_addr(const void* p) {
  unsigned int a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TS_WGMMA 1
static __device__ __forceinline__ unsigned long long ts_wgmma_desc(const void* tile) {
  const unsigned long long a = ts_tile_addr(tile);
  return ((a & 0x3FFFFull) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
// An MN-major tile ([K, N] in 64-column blocks): blocks 8 KiB apart (LBO), 8-row groups of K 1 KiB apart (SBO).
static __device__ __forceinline__ unsigned long long ts_wgmma_desc_kn(const void* tile) {
  const unsigned long long a = ts_tile_addr(tile);
  return ((a & 0x3FFFFull) >> 4) | (512ull << 16) | (64ull << 32) | (1ull << 62);
}
#else
#define TS_WGMMA 0
#endif
// Four 8x8 quarters of 16-bit elements; lane l gives the address of row l % 8 of quarter l / 8.
static __device__ __forceinline__ void ts_ldmatrix4(unsigned int* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ts_tile_addr(p)) : "memory");
}
static __device__ __forceinline__ void ts_ldmatrix4_trans(unsigned int* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(ts_tile_addr(p)) : "memory");
}
"#;
