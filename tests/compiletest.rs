//! The compile-fail suite of `#[tool]`: every misuse in `tests/ui/` must fail with the error in its
//! `.stderr`, and every supported form in `tests/ui-pass/` must compile and run.
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test --test compiletest`, then
//! review each `.stderr`: never edit one by hand.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui-pass/*.rs");
}
