//! K/V blocks staged through registers, shared by the fragment kernels: a thread fetches
//! its 16-byte vectors of the next block into registers one block ahead and stores them
//! into padded threadgroup tiles at the top of the next step.

use tessera_macros::func;

/// Stores this thread's `n` 16-byte vectors of a K/V block (vector `tid + 128 i`, `vecs` to
/// a key row), held in `kr` and `vr`, into the padded K and V tiles (a key row every `dp`
/// elements) from `k_at` in `kt` and `v_at` in `vt`. The two may be one array.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn regs_to_tiles<T>(
    mut kt: Mem<T>,
    k_at: u32,
    mut vt: Mem<T>,
    v_at: u32,
    kr: Mem<T>,
    vr: Mem<T>,
    n: u32,
    tid: u32,
    vecs: u32,
    dp: u32,
) {
    for i in 0..n {
        let vi = tid + 128 * i;
        let at = (vi / vecs) * dp + (vi % vecs) * 8;
        for e in 0..8 {
            store(kt[k_at + at + e], load(kr[i * 8 + e]));
        }
        for e in 0..8 {
            store(vt[v_at + at + e], load(vr[i * 8 + e]));
        }
    }
}
