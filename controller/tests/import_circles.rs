//! No two sibling modules import each other. A circle between two files
//! of one folder (each `use`s the other) says one idea was split in the
//! wrong place: what both need belongs in a third module that knows
//! neither (as `records::model` for the stores, `admission::refusal` for
//! the kinds' rules, `ui::run_page` for the handlers and the live streams).
//!
//! Each test reads a crate's sources as text: `crate::` and `super::` paths
//! outside tests and comments, resolved to the files they name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The crates whose modules are checked, by folder under `controller/`.
const CRATES: [&str; 9] = [
    "core",
    "steps",
    "kube",
    "admission",
    "k8s",
    "client",
    "ui",
    "records",
    ".",
];

/// A module's path in its crate, as the names between `::`.
type ModPath = Vec<String>;

/// The module path of the file `name` (its path under `src/`).
fn module_of(name: &str) -> ModPath {
    let mut parts: ModPath = name
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of `text` that ships: before its tests, without comments.
fn shipped(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths `code` names after `crate::` or `super::`, each as written
/// (`super::super::x::Y` as `["super", "x", "Y"]` after `super`), with a
/// group (`crate::{a::X, b}`) read as one path per member.
fn named_paths(code: &str) -> Vec<(&'static str, Vec<String>)> {
    let mut found = Vec::new();
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root).map(|at| from + at) {
            let before = code[..at].chars().next_back();
            from = at + root.len();
            let rest = &code[from..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let kind = if root == "crate::" { "crate" } else { "super" };
            if let Some(group) = rest.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or_default();
                for member in inner.split(',') {
                    found.push((kind, idents(member.trim())));
                }
            } else {
                found.push((kind, idents(rest)));
            }
        }
    }
    found
}

/// The `a::b::c` idents at the start of `text`.
fn idents(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    loop {
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        parts.push(rest[..end].to_string());
        match rest[end..].strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    parts
}

/// Which files of the crate in `dir` each file imports, by module path.
fn imports(dir: &str) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join("src");
    let files: BTreeMap<ModPath, String> = coxswain_test_support::text_files(&src, "rs")
        .into_iter()
        .map(|(name, text)| (module_of(&name), text))
        .collect();
    assert!(!files.is_empty(), "no sources under {}", src.display());
    let mut edges = BTreeMap::new();
    for (module, text) in &files {
        let mut to = BTreeSet::new();
        for (kind, parts) in named_paths(&shipped(text)) {
            let mut path: ModPath = match kind {
                "crate" => Vec::new(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut parts = parts.as_slice();
            while let [first, tail @ ..] = parts
                && first == "super"
            {
                path.pop();
                parts = tail;
            }
            path.extend(parts.iter().cloned());
            // The longest prefix that is a file of the crate.
            if let Some(target) = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| files.contains_key(p))
                && target != *module
            {
                to.insert(target);
            }
        }
        edges.insert(module.clone(), to);
    }
    edges
}

/// Pairs of sibling files in the crate at `dir` that import each other.
fn circles(dir: &str) -> Vec<String> {
    let edges = imports(dir);
    let mut found = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            let siblings = !a.is_empty() && !b.is_empty() && a[..a.len() - 1] == b[..b.len() - 1];
            if a < b && siblings && edges.get(b).is_some_and(|t| t.contains(a)) {
                found.push(format!("{} <-> {}", a.join("::"), b.join("::")));
            }
        }
    }
    found
}

#[test]
fn no_two_sibling_modules_import_each_other() {
    let found: Vec<String> = CRATES
        .iter()
        .flat_map(|dir| circles(dir).into_iter().map(move |c| format!("{dir}: {c}")))
        .collect();
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_reader_sees_plain_grouped_and_super_paths() {
    let code = "use crate::{alpha::A, beta};\nuse super::super::gamma::G;\nlet x = crate::delta::f();\nmy_crate::omega::X;";
    let paths = named_paths(code);
    let names: Vec<String> = paths
        .iter()
        .map(|(kind, p)| format!("{kind}:{}", p.join("::")))
        .collect();
    assert_eq!(
        names,
        [
            "crate:alpha::A",
            "crate:beta",
            "crate:delta::f",
            "super:super::gamma::G"
        ]
    );
    assert_eq!(shipped("a\n// b\n#[cfg(test)]\nc"), "a");
    assert_eq!(module_of("run/mod.rs"), ["run"]);
    assert_eq!(module_of("run/stored.rs"), ["run", "stored"]);
}
