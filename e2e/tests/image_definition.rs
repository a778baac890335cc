//! One image, two definitions: `controller/Dockerfile` (what people build)
//! and `e2e/image/build` (what the tests build without a Docker engine)
//! must make the same image. These checks fail when the two drift: the
//! package list, the user, where the executable sits and that it is static.

use coxswain_e2e::{COXSWAIN_IMAGE, workspace_root};
use coxswain_k8s::jobs::{DEFAULT_RUN_AS_USER, IN_IMAGE_EXECUTABLE};

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The packages of `controller/image-packages`, comments dropped.
fn packages() -> Vec<String> {
    read("controller/image-packages")
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_package_list_is_read_by_both_definitions() {
    let packages = packages();
    for needed in ["ca-certificates", "git", "openssh-client"] {
        assert!(
            packages.iter().any(|p| p == needed),
            "{needed} (workspace Jobs and http steps need it) is not in controller/image-packages: {packages:?}"
        );
    }
    let dockerfile = read("controller/Dockerfile");
    assert!(
        dockerfile.contains("COPY controller/image-packages /tmp/image-packages"),
        "the Dockerfile does not copy the package list"
    );
    assert!(
        dockerfile.contains("/tmp/image-packages | xargs apt-get install"),
        "the Dockerfile does not install the package list"
    );
    let build = read("e2e/image/build");
    assert!(
        build.contains("controller/image-packages | xargs"),
        "e2e/image/build does not debootstrap the package list"
    );
    // Neither names a package of its own outside the list.
    assert!(
        !dockerfile.contains("install -y --no-install-recommends ca-certificates"),
        "the Dockerfile installs packages by name"
    );
    assert!(!build.contains("packages=ca-certificates"));
}

#[test]
fn both_definitions_make_the_same_user_entrypoint_and_static_executable() {
    let dockerfile = read("controller/Dockerfile");
    let build = read("e2e/image/build");
    let uid = DEFAULT_RUN_AS_USER.to_string();
    assert!(dockerfile.contains(&format!("USER {uid}:{uid}")));
    assert!(dockerfile.contains(&format!("useradd --uid {uid} --gid {uid}")));
    assert!(build.contains(&format!("user_id={uid}")));
    assert_eq!(IN_IMAGE_EXECUTABLE, "/usr/local/bin/coxswain");
    assert!(dockerfile.contains(&format!(
        "COPY --from=build /coxswain {IN_IMAGE_EXECUTABLE}"
    )));
    assert!(dockerfile.contains(&format!("ENTRYPOINT [\"{IN_IMAGE_EXECUTABLE}\"]")));
    assert!(build.contains(&format!("\"$bin\" {IN_IMAGE_EXECUTABLE}")));
    assert!(build.contains(&format!("--entrypoint '[\"{IN_IMAGE_EXECUTABLE}\"]'")));
    // Static in both: crt-static with an explicit --target, and refused
    // when the executable asks for a program interpreter.
    let static_build = read("e2e/image/static-coxswain");
    for (name, text) in [
        ("Dockerfile", &dockerfile),
        ("static-coxswain", &static_build),
    ] {
        assert!(
            text.contains("RUSTFLAGS=\"-C target-feature=+crt-static\""),
            "{name} does not link statically"
        );
        assert!(
            text.contains("--target"),
            "{name} gives no explicit --target"
        );
        assert!(
            text.contains("Requesting program interpreter"),
            "{name} does not check"
        );
    }
    assert!(build.contains("Requesting program interpreter"));
    // The tests name the image by the version the controller defaults to.
    assert!(COXSWAIN_IMAGE.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))));
}
