//! Every construct the frontend does not handle is a compile error at its span that
//! says what to write instead, and a typed launch (`launch_*`) whose `Args` or `Consts`
//! field is misspelt, missing or mistyped does not build.

#[test]
fn unsupported_constructs_are_compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
