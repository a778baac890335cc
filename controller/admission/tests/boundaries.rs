//! Admission judges requests and never acts on what users own: its crate
//! depends on no reconciler (the controller, records, the viewer), and the
//! only objects it writes are those that serve it — the SelfSubjectReview
//! and SubjectAccessReviews it asks, its TLS Secret and its webhook
//! configurations. A Run, Flow or Approval is only ever read here.

use std::path::Path;

/// The `coxswain-*` crates this crate's manifest depends on.
fn coxswain_dependencies() -> Vec<String> {
    include_str!("../Cargo.toml")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.starts_with("coxswain-"))
        .map(String::from)
        .collect()
}

/// Each source file of the crate, by name, with its text.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found: Vec<(String, String)> = std::fs::read_dir(&src)
        .expect("the source folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect();
    found.sort();
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
        .map(|l| VERBS.iter().filter(|v| l.contains(*v)).count())
        .sum::<usize>()
        + code.matches("api.replace(").count()
}

#[test]
fn admission_depends_on_no_reconciler() {
    let found = coxswain_dependencies();
    for actor in [
        "coxswain-k8s",
        "coxswain-records",
        "coxswain-ui",
        "coxswain",
    ] {
        assert!(!found.iter().any(|f| f == actor), "{actor} in {found:?}");
    }
}

#[test]
fn admission_writes_only_what_serves_it() {
    const SERVING: [&str; 4] = ["admit.rs", "lib.rs", "register.rs", "tls.rs"];
    let sources = sources();
    assert!(
        sources.len() >= 10,
        "the crate's sources: {}",
        sources.len()
    );
    let mut wrong = Vec::new();
    for (name, code) in &sources {
        let n = writes(code);
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
