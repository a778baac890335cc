//! The shared crate stays below every actor: its manifest names none of
//! the crates that act (admission, the controller, the viewer), so nothing
//! here can grow a dependency on how one of them works.

/// The `coxswain-*` crates this crate's manifest depends on.
fn coxswain_dependencies() -> Vec<String> {
    let manifest = include_str!("../Cargo.toml");
    manifest
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.starts_with("coxswain-"))
        .map(String::from)
        .collect()
}

#[test]
fn the_shared_crate_depends_on_no_actor() {
    let found = coxswain_dependencies();
    assert!(found.contains(&"coxswain-core".to_string()), "{found:?}");
    for actor in [
        "coxswain-admission",
        "coxswain-k8s",
        "coxswain-ui",
        "coxswain-records",
    ] {
        assert!(!found.iter().any(|f| f == actor), "{actor} in {found:?}");
    }
}
