//! The crate's module boundaries, checked on its source: admission judges
//! requests and never reconciles, so nothing under `src/admission/` uses the
//! reconcilers' modules (`run`, `jobs`, `offload`, and the `settings` and
//! `controller` that wire them), directly or through the modules it does
//! use. A change that needs one there is a sign the rule belongs elsewhere
//! (in `coxswain-core`, or in a neutral module such as `names`).

use std::path::{Path, PathBuf};

/// The modules of this crate admission may use, and the ones those use.
const ALLOWED: [&str; 5] = ["admission", "names", "ops", "rerun_source", "snapshot"];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The leading identifier of `text`.
fn identifier(text: &str) -> String {
    text.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The first segment of every `crate::` path in `code`, comment lines
/// skipped; `crate::{a, b::c}` gives `a` and `b`.
fn crate_modules(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::") {
            let rest = &line[at + "crate::".len()..];
            match rest.strip_prefix('{') {
                Some(group) => {
                    let group = group.split('}').next().unwrap_or("");
                    found.extend(group.split(',').map(identifier));
                }
                None => found.push(identifier(rest)),
            }
        }
    }
    found.retain(|m| !m.is_empty());
    found
}

#[test]
fn crate_paths_are_read_with_their_groups() {
    assert_eq!(
        crate_modules(
            "use crate::{names, run::pin};\nuse crate::ops::{self, A};\nlet x = crate::jobs::y;\n// crate::no"
        ),
        ["names", "run", "ops", "jobs"]
    );
}

#[test]
fn admission_reaches_nothing_of_the_reconcilers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![
        src.join("names.rs"),
        src.join("rerun_source.rs"),
        src.join("snapshot.rs"),
    ];
    sources(&src.join("admission"), &mut files);
    sources(&src.join("ops"), &mut files);
    let mut reached = Vec::new();
    for file in &files {
        let code = std::fs::read_to_string(file).expect("readable");
        for module in crate_modules(&code) {
            if !ALLOWED.contains(&module.as_str()) {
                reached.push(format!("{}: crate::{module}", file.display()));
            }
        }
    }
    assert!(
        reached.is_empty(),
        "admission, and the names and ops it uses, must not use other modules of the crate: {reached:?}"
    );
}
