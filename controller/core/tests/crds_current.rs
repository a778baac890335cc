//! `crds/` must be exactly what `coxswain crd` generates from the API types.

use std::path::Path;

#[test]
fn crds_directory_matches_the_api_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    let files = coxswain_core::crds::render_all().expect("CRDs serialize");
    assert_eq!(files.len(), 3);
    for (name, generated) in files {
        let committed = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        assert!(
            committed == generated,
            "crds/{name} is stale: run `cargo run -p coxswain -- crd --out-dir crds` and commit it"
        );
    }
}
