//! docs/kernels.md's op tables are generated from the op declarations: this regenerates
//! them and fails when the checked-in copy is stale. `TESSERA_UPDATE_DOCS=1 cargo test -p
//! tessera-cli --test docs_tables` rewrites them.

use std::path::PathBuf;
use tessera_std::decl::markdown;
use tessera_std::ops;

#[test]
fn kernels_md_tables_match_the_declarations() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/kernels.md");
    let doc = std::fs::read_to_string(&path).expect("docs/kernels.md is readable");
    let fresh = markdown::splice(&doc, &markdown::tables(&ops())).expect("markers present");
    if std::env::var_os("TESSERA_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &fresh).expect("docs/kernels.md is writable");
        return;
    }
    assert!(
        fresh == doc,
        "docs/kernels.md's op tables are stale; regenerate them with \
         `TESSERA_UPDATE_DOCS=1 cargo test -p tessera-cli --test docs_tables`"
    );
}

#[test]
fn splice_replaces_only_the_marked_part() {
    let doc = format!("head\n{}\nold\n{}\ntail\n", markdown::BEGIN, markdown::END);
    let out = markdown::splice(&doc, "new").expect("markers");
    assert_eq!(
        out,
        format!(
            "head\n{}\n\nnew\n{}\ntail\n",
            markdown::BEGIN,
            markdown::END
        )
    );
    assert!(markdown::splice("no markers", "x").is_err());
}
