//! How admission is served, against the real API server: `coxswain
//! webhook` alone makes the same checks as the controller, and a
//! certificate rotated (the self-managed CA's Secret deleted, or
//! cert-manager's mounted Secret renewed) is served and registered
//! without a restart.

mod admission;

use admission::{ALICE, BOUND, REVIEWED, assert_refused, setup_with};
use coxswain_e2e::wait_for;
use serde_json::json;

#[tokio::test]
async fn coxswain_webhook_alone_serves_the_same_checks() {
    let s = setup_with(true, &[]).await;
    s.apply_as(&ALICE, REVIEWED)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_refused(
        s.create_run_as(&ALICE, "reviewed", json!({"brief": 1})),
        "runs.coxswain.dev",
        &["input.brief: expected string"],
    );
    s.run_created_by_alice("reviewed", json!({"brief": "hello"}));
}

/// Deleting the TLS Secret is how a person rotates the self-managed CA: the
/// running controller makes a new CA and certificate, serves them and
/// registers the new caBundle without a restart.
#[tokio::test]
async fn a_deleted_tls_secret_is_made_anew_served_and_registered_without_a_restart() {
    let s = setup_with(false, &["--webhook-cert-check", "1s"]).await;
    let ns = s.ns.name();
    let secret_ca = || -> Option<String> {
        s.kubectl
            .run(&[
                "get",
                "secret",
                "coxswain-webhook-tls",
                "-n",
                ns,
                "-o",
                "jsonpath={.data.ca\\.crt}",
            ])
            .ok()
            .filter(|ca| !ca.is_empty())
    };
    let before = secret_ca().expect("the controller made the TLS Secret");
    s.wait_bundle(&before).await;

    s.kubectl
        .run(&["delete", "secret", "coxswain-webhook-tls", "-n", ns])
        .unwrap_or_else(|e| panic!("{e}"));
    let made = wait_for("a new TLS Secret", BOUND, || async {
        Ok(secret_ca().filter(|ca| *ca != before))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\ncontroller log:\n{}", s.logs()));
    s.wait_bundle(&made).await;
    s.wait_refusing().await;
    assert!(
        s.logs().contains("webhook certificate reloaded"),
        "{}",
        s.logs()
    );
}

/// Writes `cert` into `dir` as the kubelet mounts a Secret (cert-manager's
/// included): the files in a folder of their own, `..data` pointing at it
/// (swapped by a rename, so a reader sees one version or the other) and
/// each key a link through `..data`.
fn mount_secret(dir: &std::path::Path, version: u32, cert: &coxswain_e2e::tls::LoopbackCert) {
    let folder = format!("..v{version}");
    std::fs::create_dir_all(dir.join(&folder)).expect("the version's folder");
    for (name, text) in [
        ("tls.crt", &cert.cert_pem),
        ("tls.key", &cert.key_pem),
        ("ca.crt", &cert.ca_pem),
    ] {
        std::fs::write(dir.join(&folder).join(name), text).expect("a mounted file");
    }
    let swap = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&swap);
    std::os::unix::fs::symlink(&folder, &swap).expect("the new ..data");
    std::fs::rename(&swap, dir.join("..data")).expect("..data swapped");
    for name in ["tls.crt", "tls.key", "ca.crt"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).expect("a key's link");
        }
    }
}

/// cert-manager renews the certificate in the mounted Secret: the running
/// controller serves the new one and registers the new CA from `ca.crt`
/// without a restart.
#[tokio::test]
async fn a_certificate_renewed_in_the_cert_dir_is_served_and_registered_without_a_restart() {
    use base64::Engine;
    let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    let dir = coxswain_e2e::workspace_root().join(format!(
        "target/e2e/cert-dirs/{}-{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond()
    ));
    let first = coxswain_e2e::tls::loopback_cert("first CA").expect("a certificate");
    mount_secret(&dir, 1, &first);
    let path = dir.to_string_lossy().into_owned();
    let s = setup_with(
        false,
        &["--webhook-cert-dir", &path, "--webhook-cert-check", "1s"],
    )
    .await;
    s.wait_bundle(&encode(&first.ca_pem)).await;

    let second = coxswain_e2e::tls::loopback_cert("second CA").expect("a certificate");
    mount_secret(&dir, 2, &second);
    s.wait_bundle(&encode(&second.ca_pem)).await;
    s.wait_refusing().await;
    let _ = std::fs::remove_dir_all(&dir);
}
