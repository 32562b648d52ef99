//! Identifiers in the generated MSL: user names kept where they are safe, made unique, and
//! never colliding with MSL / C++ keywords, Metal types or the emitter's own names.

use std::collections::HashSet;

/// Words a user name must not take as is.
const RESERVED: &[&str] = &[
    // C++ keywords and common macros.
    "alignas",
    "alignof",
    "and",
    "asm",
    "auto",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "constexpr",
    "const_cast",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "nullptr",
    "operator",
    "or",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "while",
    "xor",
    "main",
    "NULL",
    "INFINITY",
    "NAN",
    // Metal address spaces, function qualifiers and types.
    "kernel",
    "vertex",
    "fragment",
    "device",
    "constant",
    "threadgroup",
    "thread",
    "metal",
    "half",
    "bfloat",
    "uint",
    "uchar",
    "ushort",
    "size_t",
    "ptrdiff_t",
    "atomic",
    "sampler",
    "texture",
    "simd",
    "as_type",
    "select",
    "min",
    "max",
    "abs",
    "exp",
    "log",
    "sqrt",
    "pow",
    "fma",
    "sin",
    "cos",
    "tanh",
    "floor",
    "ceil",
    "isnan",
    "isinf",
    "fmin",
    "fmax",
    "fmod",
];

/// Hands out unique, safe identifiers.
#[derive(Default)]
pub struct Names {
    taken: HashSet<String>,
}

impl Names {
    /// A safe, unused identifier derived from `wanted`.
    pub fn fresh(&mut self, wanted: &str) -> String {
        let mut base: String = wanted
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
            base.insert(0, 'k');
        }
        if is_reserved(&base) {
            base.push('_');
        }
        let mut name = base.clone();
        let mut n = 1;
        while self.taken.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

/// Reserved words, type-like names (`float4`, `uint2`…), the emitter's value names (`v12`)
/// and its prefixes (`tsr_`, `TESSERA_`, leading `_`, which C++ reserves in places).
fn is_reserved(s: &str) -> bool {
    if RESERVED.contains(&s) || s.starts_with("tsr_") || s.starts_with("TESSERA") {
        return true;
    }
    if s.starts_with('_') || s.starts_with("simd_") || s.starts_with("atomic_") {
        return true;
    }
    let is_value_name =
        s.len() > 1 && s.starts_with('v') && s[1..].chars().all(|c| c.is_ascii_digit() || c == '_');
    let vector_like = [
        "float", "half", "bfloat", "int", "uint", "char", "uchar", "bool", "short", "ushort",
    ]
    .iter()
    .any(|t| {
        s.strip_prefix(t).is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == 'x')
        })
    });
    is_value_name || vector_like
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_and_unique() {
        let mut n = Names::default();
        assert_eq!(n.fresh("x"), "x");
        assert_eq!(n.fresh("x"), "x_1");
        assert_eq!(n.fresh("half"), "half_");
        assert_eq!(n.fresh("v12"), "v12_");
        assert_eq!(n.fresh("float4"), "float4_");
        assert_eq!(n.fresh("tsr_tid"), "tsr_tid_");
        assert_eq!(n.fresh("9lives"), "k9lives");
        assert_eq!(n.fresh("a-b"), "a_b");
    }
}
