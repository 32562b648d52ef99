//! The `tessera` command line.
fn main() {}
