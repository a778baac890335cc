//! Images for the real node, which has no registry to pull from: built here
//! with buildah (`e2e/image/build`, `e2e/image/test-images`) and imported
//! into its containerd (`e2e/cluster/load-image`) under the names they
//! carry, so pods name them as on any cluster.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::cluster::{kubeconfig, state_dir, workspace_root};
use crate::{Error, Result};

/// The Coxswain image as pods name it: the controller's default
/// `--job-image` (its init containers and steps with no `image`).
pub const COXSWAIN_IMAGE: &str = concat!("coxswain:", env!("CARGO_PKG_VERSION"));

/// Where the static `coxswain` sits in [`COXSWAIN_IMAGE`]: the controller's
/// `--job-executable` on the real node.
pub const IN_IMAGE_EXECUTABLE: &str = "/usr/local/bin/coxswain";

/// The test images (`e2e/image/test-images` says what each holds).
pub const BUSYBOX_IMAGE: &str = "coxswain-e2e/busybox:1";
/// Musl's loader and libc, no glibc.
pub const MUSL_IMAGE: &str = "coxswain-e2e/musl:1";
/// No shell and no libc: only `/greet`.
pub const STATIC_IMAGE: &str = "coxswain-e2e/static:1";
/// Debian minbase.
pub const DEBIAN_IMAGE: &str = "coxswain-e2e/debian:1";

/// Builds the Coxswain image (with the static runner) and the test images,
/// and imports them into this test binary's real node, once per process.
/// Starts the cluster first if needed.
pub fn real_node_images() -> Result<()> {
    static LOADED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| build_and_load().map_err(|e| e.to_string()))
        .clone()
        .map_err(Error::Images)
}

fn build_and_load() -> Result<()> {
    kubeconfig()?;
    let root = workspace_root();
    let image = script_output(&root.join("e2e/image/build"))?;
    if !image.starts_with("oci-archive:") {
        return Err(Error::Start(format!(
            "e2e/image/build printed {image:?}, not the image it made"
        )));
    }
    load_image(&root.join("target/image/coxswain.docker.tar"))?;
    let tests = script_output(&root.join("e2e/image/test-images"))?;
    for tar in tests.split_whitespace() {
        load_image(Path::new(tar))?;
    }
    Ok(())
}

/// Imports a docker- or OCI-archive into the real node's containerd under
/// the name it carries (`e2e/cluster/load-image`).
pub fn load_image(tar: &Path) -> Result<()> {
    let root = workspace_root();
    let out = Command::new(root.join("e2e/cluster/load-image"))
        .arg(tar)
        .arg("--state")
        .arg(state_dir())
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Start(format!(
            "e2e/cluster/load-image {} exited with {}: {}",
            tar.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Runs one of the image scripts (progress to this process's stderr) and
/// returns the last line it printed.
fn script_output(script: &PathBuf) -> Result<String> {
    let out = Command::new(script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(Error::Build(format!(
            "{} exited with {}",
            script.display(),
            out.status
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(stdout.lines().last().unwrap_or_default().trim().to_string())
}
