//! No-panic fuzzing of the frontend: `#[kernel]` and `#[func]` expansion fed valid DSL
//! functions damaged at the token level (tokens deleted, duplicated, swapped, replaced by
//! others from the DSL's vocabulary, groups emptied) and random attribute arguments. The
//! expansion must return code or a `syn::Error`, never panic. It runs on the expansion
//! functions directly, so no rustc is involved; what the generated code later does when
//! it builds IR is covered by the IR fuzzers. `TESSERA_FUZZ_CASES` sets the number of
//! cases (256 by default).

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};
use proptest::prelude::*;

/// Valid DSL sources the mutations start from.
const SEEDS: [&str; 4] = [
    r#"
    fn mixed<T>(x: Tensor<T>, mut out: Tensor<T>, #[constexpr] k: u32, eps: f32) {
        let tid = thread_id();
        let scratch = threadgroup_array::<f32>(32);
        let regs = stack_array::<f32>(k);
        let mut best = neg_infinity();
        let mut count = 0u32;
        for j in 0..k {
            let v = load(x[tid * k + j]).cast::<f32>();
            store(regs[j], v);
            best = max(best, v);
            if !(v < 0.0) { count += 1; } else if v < -1.0 { count += 2; }
        }
        let sign = if best > 0.0 { 1.0f32 } else { -1.0 };
        if simd_lane() == 0 { store(scratch[simd_id()], best); }
        barrier();
        let first = load(scratch[0]) + eps;
        store(out[tid], (first * sign + count.cast::<f32>() + simd_sum(best)).cast::<T>());
    }
    "#,
    r#"
    fn strided(x: Tensor<f32>, mut out: Tensor<f32>, n: u32) {
        let row = group_id_x();
        let mut acc = 0.0f32;
        for i in range(thread_id(), n, group_size()) {
            let v = load(x[row * n + i]);
            acc += v * v;
        }
        let total = group_sum(acc);
        let r = select(total > 0.0, rsqrt(total), 0.0);
        for i in range(thread_id(), n, group_size()) {
            store(out[row * n + i], load(x[row * n + i]) * r);
        }
    }
    "#,
    r#"
    fn frags(a: Tensor<f16>, b: Tensor<f16>, mut c: Tensor<f32>) {
        let fa = matrix_a::<f16>();
        let fb = matrix_b::<f16>();
        let mut acc = matrix_acc();
        matrix_fill(acc, 0.0);
        matrix_load(fa, a, 0, 16);
        matrix_load(fb, b, 0, 16);
        matrix_mma(acc, fa, fb, acc);
        matrix_scale(acc, 0.5);
        matrix_store(acc, c, simd_id() * 256, 16);
        let old = atomic_add(c[0], 1.0);
        let s = simd_shuffle_xor(old, 1u32);
        store(c[thread_id()], s);
    }
    "#,
    r#"
    fn helper(x: f32, y: f32, mut dst: Mem<f32>, src: Mem<f32>) -> (f32, f32) {
        store(dst[0], load(src[1]) * x);
        (x + y, max(x, y))
    }
    "#,
];

/// Tokens the replacements draw from.
const VOCABULARY: [&str; 40] = [
    "let",
    "mut",
    "for",
    "in",
    "if",
    "else",
    "while",
    "loop",
    "match",
    "return",
    "break",
    "0",
    "1u32",
    "-1",
    "2.5",
    "1e40",
    "4294967296",
    "x",
    "out",
    "T",
    "f32",
    "u32",
    "bool",
    "load",
    "store",
    "cast",
    "range",
    "barrier",
    "simd_sum",
    "group_sum",
    "=",
    "+=",
    "..",
    "..=",
    "::",
    "<",
    ">",
    ";",
    ",",
    "|",
];

fn flatten(stream: TokenStream) -> Vec<TokenTree> {
    stream.into_iter().collect()
}

/// Applies one mutation at a position chosen by `x`, descending into groups.
fn mutate(tokens: &mut Vec<TokenTree>, kind: u8, x: u64) {
    if tokens.is_empty() {
        if let Ok(t) = VOCABULARY[(x % 40) as usize].parse::<TokenStream>() {
            tokens.extend(t);
        }
        return;
    }
    let at = (x % tokens.len() as u64) as usize;
    // Half of the time, recurse into a group at `at`.
    if let TokenTree::Group(g) = &tokens[at] {
        if (x >> 10).is_multiple_of(2) {
            let mut inner = flatten(g.stream());
            mutate(&mut inner, kind, x >> 11);
            let mut ng = Group::new(g.delimiter(), inner.into_iter().collect());
            ng.set_span(g.span());
            tokens[at] = TokenTree::Group(ng);
            return;
        }
    }
    match kind % 6 {
        0 => {
            tokens.remove(at);
        }
        1 => {
            let t = tokens[at].clone();
            tokens.insert(at, t);
        }
        2 => {
            let other = ((x >> 20) % tokens.len() as u64) as usize;
            tokens.swap(at, other);
        }
        3 => {
            if let Ok(t) = VOCABULARY[((x >> 20) % 40) as usize].parse::<TokenStream>() {
                tokens.splice(at..=at, t);
            }
        }
        4 => {
            let delim = [Delimiter::Parenthesis, Delimiter::Bracket, Delimiter::Brace]
                [((x >> 20) % 3) as usize];
            tokens[at] = TokenTree::Group(Group::new(delim, TokenStream::new()));
        }
        _ => {
            tokens.truncate(at);
        }
    }
}

fn cases() -> u32 {
    std::env::var("TESSERA_FUZZ_CASES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(256)
}

/// Attribute arguments, valid and not.
const ATTRS: [&str; 6] = [
    "",
    "group_size = 128",
    "group_size = 128, groups_per_core = 4",
    "group_size = 0",
    "groups_per_core",
    "group_size = \"x\", 7",
];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn expansion_never_panics_on_damaged_sources(
        seed in 0usize..SEEDS.len(),
        attr in 0usize..ATTRS.len(),
        mutations in prop::collection::vec((any::<u8>(), any::<u64>()), 0..6),
    ) {
        let mut tokens = flatten(SEEDS[seed].parse::<TokenStream>().expect("seed parses"));
        for &(kind, x) in &mutations {
            mutate(&mut tokens, kind, x);
        }
        let item: TokenStream = tokens.into_iter().collect();
        let attr: TokenStream = ATTRS[attr].parse().expect("attribute parses");
        let _ = crate::kernel::expand(attr.clone(), item.clone());
        let _ = crate::func::expand(attr, item);
    }
}
