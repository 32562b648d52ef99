//! A metal-emu cache directory that cannot be written (here: a path under a plain file,
//! which no user, root included, can create) does not stop the emulator: kernels build in
//! a directory under the temp dir and run, twice in a row without error. Needs g++.

mod common;

use common::iota_kernel;
use std::sync::Arc;
use tessera_runtime::metal_emu::MetalEmuBackend;
use tessera_runtime::{Context, DType};

#[test]
fn an_unwritable_cache_directory_only_costs_the_cache() {
    let blocker =
        std::env::temp_dir().join(format!("tessera-cache-blocker-{}", std::process::id()));
    std::fs::write(&blocker, b"not a directory").unwrap();
    // Set before the backend first names its cache; this test binary holds only this test.
    std::env::set_var("TESSERA_CACHE_DIR", blocker.join("cache"));
    let ctx = Context::with_backend(Arc::new(MetalEmuBackend::new().unwrap()));
    for k in [7u32, 11] {
        let out = ctx.zeros(DType::U32, &[64]).unwrap();
        let kernel = iota_kernel(k);
        ctx.launch_ir(&kernel)
            .arg("out", &out)
            .grid([2, 1, 1])
            .group_size(32)
            .run()
            .unwrap();
        let want: Vec<u32> = (0..64).map(|i| i + k).collect();
        assert_eq!(out.to_vec::<u32>().unwrap(), want);
    }
    let _ = std::fs::remove_file(&blocker);
}
