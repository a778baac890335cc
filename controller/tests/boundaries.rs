//! The crates are split by who acts, and each keeps to its side:
//! - `coxswain-kube` is what every actor shares and acts on nothing;
//! - `coxswain-admission` judges requests and writes only what serves it
//!   (the reviews it asks, its TLS Secret, its webhook configurations);
//! - `coxswain-k8s` is the controller acting as itself;
//! - `coxswain-client` acts as a person: it reads without side effects and
//!   writes only an Approval's answer;
//! - the viewer (`coxswain-ui`) and the kubectl plugin act as the person
//!   using them, through the client, never through the controller's crate.
//!
//! Each test reads a crate's manifest (its `[dependencies]`) and sources.

use std::path::{Path, PathBuf};

/// The folder of crate `dir` (relative to this package's manifest).
fn crate_dir(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
}

/// The `coxswain-*` crates the `[dependencies]` of crate `dir` name (dev
/// and build dependencies do not ship, so they are not counted).
fn coxswain_dependencies(dir: &str) -> Vec<String> {
    let manifest =
        std::fs::read_to_string(crate_dir(dir).join("Cargo.toml")).expect("a readable manifest");
    let mut section = String::new();
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let name = line.split_whitespace().next().unwrap_or_default();
        if section == "[dependencies]" && name.starts_with("coxswain-") {
            found.push(name.to_string());
        }
    }
    found
}

/// Each `.rs` file below `dir`, by its path under it, with its text.
fn sources(dir: &str) -> Vec<(String, String)> {
    let found = coxswain_test_support::text_files(&crate_dir(dir), "rs");
    assert!(!found.is_empty(), "no sources under {dir}");
    found
}

/// The calls of kube's writing verbs in `code` (comment lines skipped).
fn writes(code: &str) -> usize {
    const VERBS: [&str; 7] = [
        ".create(",
        ".patch(",
        ".patch_status(",
        ".replace(&",
        ".replace_status(",
        ".delete(",
        ".delete_collection(",
    ];
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| {
            VERBS.iter().filter(|v| l.contains(*v)).count() + l.matches("api.replace(").count()
        })
        .sum()
}

/// The files under `dir` that write, with how many writes each.
fn writers(dir: &str) -> Vec<(String, usize)> {
    sources(dir)
        .into_iter()
        .map(|(name, code)| (name, writes(&code)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Asserts that crate `dir` depends on none of `actors`.
fn depends_on_none(dir: &str, actors: &[&str]) -> Vec<String> {
    let found = coxswain_dependencies(dir);
    for actor in actors {
        assert!(
            !found.iter().any(|f| f == actor),
            "{dir} depends on {actor}: {found:?}"
        );
    }
    found
}

#[test]
fn the_shared_crate_depends_on_no_actor_and_writes_nothing() {
    let found = depends_on_none(
        "kube",
        &[
            "coxswain-admission",
            "coxswain-k8s",
            "coxswain-client",
            "coxswain-ui",
            "coxswain-records",
        ],
    );
    assert!(found.contains(&"coxswain-core".to_string()), "{found:?}");
    assert_eq!(writers("kube/src"), Vec::<(String, usize)>::new());
}

#[test]
fn admission_depends_on_no_reconciler_and_writes_only_what_serves_it() {
    depends_on_none(
        "admission",
        &[
            "coxswain-k8s",
            "coxswain-client",
            "coxswain-records",
            "coxswain-ui",
        ],
    );
    const SERVING: [&str; 4] = ["admit.rs", "lib.rs", "register.rs", "tls.rs"];
    let mut wrong = Vec::new();
    for (name, code) in sources("admission/src") {
        let n = writes(&code);
        if n > 0 && !SERVING.contains(&name.as_str()) {
            wrong.push(format!("{name}: {n} write(s)"));
        }
        for owned in ["Api<Run>", "Api<Flow>", "Api<Approval>"] {
            if n > 0 && code.contains(owned) {
                wrong.push(format!("{name} writes and holds an {owned}"));
            }
        }
    }
    assert!(wrong.is_empty(), "admission must not act: {wrong:?}");
}

#[test]
fn the_controller_does_not_build_on_what_acts_as_a_person() {
    depends_on_none("k8s", &["coxswain-client", "coxswain-ui"]);
}

#[test]
fn the_client_reads_without_side_effects_and_writes_only_answers() {
    let found = depends_on_none(
        "client",
        &[
            "coxswain-k8s",
            "coxswain-admission",
            "coxswain-records",
            "coxswain-steps",
            "coxswain-ui",
        ],
    );
    assert_eq!(found, ["coxswain-core", "coxswain-kube"]);
    let writers = writers("client/src");
    assert_eq!(writers.len(), 1, "{writers:?}");
    assert_eq!(writers[0].0, "answer.rs", "{writers:?}");
    for (name, code) in sources("client/src") {
        for verb in [".create(", ".delete(", ".patch_status("] {
            assert!(!code.contains(verb), "{name} calls {verb}");
        }
    }
}

#[test]
fn the_viewer_and_the_plugin_act_only_as_the_person() {
    depends_on_none(
        "ui",
        &["coxswain-k8s", "coxswain-admission", "coxswain-records"],
    );
    // The viewer's one write is asking who its caller is.
    let ui = writers("ui/src");
    assert_eq!(ui, [("access.rs".to_string(), 1)], "{ui:?}");
    for (name, code) in sources("ui/src")
        .into_iter()
        .chain(sources("src/cli/plugin"))
    {
        for actor in ["coxswain_k8s", "coxswain_admission"] {
            assert!(!code.contains(actor), "{name} uses {actor}");
        }
    }
}

#[test]
fn the_write_counter_sees_kube_verbs_and_not_string_replace() {
    assert_eq!(
        writes("let x = api.create(&PostParams::default(), &o).await?;"),
        1
    );
    assert_eq!(
        writes("api.replace(name, &PostParams::default(), &s).await"),
        1
    );
    assert_eq!(writes("s.replace('~', \"~0\")"), 0);
    assert_eq!(writes("// api.delete(&name, &dp)"), 0);
}
