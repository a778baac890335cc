//! The book (`docs/`) and README.md, tested as a reader uses them:
//! - the generated reference pages are what `coxswain docs` writes now;
//! - every error code the code fails with has its entry in the reference;
//! - every flow in a ```` ```yaml ```` block passes `coxswain lint`, and a
//!   block that holds steps but no whole Flow says so (```` ```yaml
//!   fragment ````);
//! - every ```` ```sh runnable ```` block runs, pasted whole into bash, with
//!   this build's `coxswain` (the ```` ```sh runnable-on-cluster ```` ones
//!   run in `e2e/tests/readme_on_kubernetes.rs`);
//! - every page is in `SUMMARY.md`, and every relative link (and `#anchor`)
//!   between pages and from README.md leads somewhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// The book's sources.
fn src() -> PathBuf {
    root().join("docs/src")
}

/// Every Markdown page under `docs/src`, by its path under it, with its text.
fn pages() -> BTreeMap<String, String> {
    coxswain_test_support::text_files(&src(), "md")
        .into_iter()
        .collect()
}

/// The book's pages and README.md, by a name to report them under.
fn documents() -> BTreeMap<String, String> {
    let mut all: BTreeMap<String, String> = pages()
        .into_iter()
        .map(|(name, text)| (format!("docs/src/{name}"), text))
        .collect();
    all.insert(
        "README.md".to_string(),
        std::fs::read_to_string(root().join("README.md")).expect("README"),
    );
    all
}

/// A fenced code block: its info string, its text and the line it starts on.
struct Block {
    info: String,
    text: String,
    line: usize,
}

/// The fenced code blocks (```` ``` ```` at any indentation) of a page.
fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(String, String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let indent = line[..line.len() - trimmed.len()].to_string();
                    open = Some((info.trim().to_string(), String::new(), i + 1, indent));
                }
            }
            Some((info, body, start, indent)) => {
                if trimmed.starts_with("```") {
                    found.push(Block {
                        info: info.clone(),
                        text: body.clone(),
                        line: *start,
                    });
                    open = None;
                } else {
                    body.push_str(line.strip_prefix(indent.as_str()).unwrap_or(line));
                    body.push('\n');
                }
            }
        }
    }
    found
}

/// Text outside fenced code blocks, line by line (code lines blanked, so
/// line numbers hold).
fn prose(text: &str) -> Vec<String> {
    let mut inside = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                inside = !inside;
                return String::new();
            }
            if inside {
                String::new()
            } else {
                line.to_string()
            }
        })
        .collect()
}

#[test]
fn the_generated_reference_is_current() {
    let pages = coxswain::cli::docs::render_all(&root().join("charts/coxswain"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut stale = Vec::new();
    for (name, text) in &pages {
        let path = src().join("reference").join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "generated pages differ from the code: {stale:?}; write them again with \
         `cargo run -p coxswain -- docs --out-dir docs/src/reference` and commit them"
    );
}

/// Every error code a step or run fails with: the constants of
/// `coxswain_core::engine::work::codes`, and the codes written out
/// elsewhere in the crates' sources (such as `records.lookup_failed`).
fn error_codes() -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    let work = std::fs::read_to_string(root().join("controller/core/src/engine/work.rs"))
        .expect("work.rs");
    let module = work
        .split_once("pub mod codes {")
        .expect("the codes module")
        .1;
    for line in module.lines() {
        if line.trim() == "}" {
            break;
        }
        if let Some((_, value)) = line.split_once(": &str = \"") {
            codes.insert(value.trim_end_matches("\";").to_string());
        }
    }
    let records =
        std::fs::read_to_string(root().join("controller/records/src/model.rs")).expect("model.rs");
    assert!(records.contains("\"records.lookup_failed\""));
    codes.insert("records.lookup_failed".to_string());
    assert!(codes.len() > 15, "{codes:?}");
    codes
}

#[test]
fn every_error_code_has_its_entry_and_no_entry_is_stale() {
    let page = std::fs::read_to_string(src().join("reference/errors.md")).expect("errors.md");
    let entries: BTreeSet<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix("## `"))
        .map(|l| l.trim_end_matches('`').to_string())
        .collect();
    let codes = error_codes();
    let missing: Vec<&String> = codes.difference(&entries).collect();
    let stale: Vec<&String> = entries.difference(&codes).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/src/reference/errors.md: codes without an entry {missing:?}; entries of no code {stale:?}"
    );
}

#[test]
fn every_flow_in_the_book_passes_lint() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut linted = 0;
    let mut unmarked = Vec::new();
    for (name, text) in documents() {
        for block in blocks(&text) {
            let language = block.info.split_whitespace().next().unwrap_or_default();
            if language != "yaml" {
                continue;
            }
            let is_flow = block.text.lines().any(|l| l.trim_end() == "kind: Flow");
            if !is_flow {
                let has_steps = block.text.contains("steps:") || block.text.contains("- key:");
                if has_steps && !block.info.split_whitespace().any(|w| w == "fragment") {
                    unmarked.push(format!("{name}:{}", block.line));
                }
                continue;
            }
            let file = dir.path().join(format!("flow-{linted}.yaml"));
            std::fs::write(&file, &block.text).expect("write");
            let out = Command::new(env!("CARGO_BIN_EXE_coxswain"))
                .arg("lint")
                .arg(&file)
                .output()
                .expect("coxswain lint runs");
            assert!(
                out.status.success(),
                "{name}:{}: the flow does not pass `coxswain lint`:\n{}{}",
                block.line,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            linted += 1;
        }
    }
    assert!(
        unmarked.is_empty(),
        "yaml blocks with steps but no whole Flow, not marked ```yaml fragment: {unmarked:?}"
    );
    println!("{linted} flows linted");
    assert!(linted >= 10, "only {linted} flows found in the book");
}

#[test]
fn every_runnable_shell_block_runs() {
    let root = root();
    let coxswain = env!("CARGO_BIN_EXE_coxswain");
    let mut ran = 0;
    for (name, text) in documents() {
        for block in blocks(&text) {
            let mut words = block.info.split_whitespace();
            if words.next() != Some("sh") || !words.any(|w| w == "runnable") {
                continue;
            }
            // A folder of its own per block: the examples at hand, a home
            // and records file nobody else reads, `coxswain` this build.
            let place = tempfile::tempdir().expect("a temporary folder");
            std::os::unix::fs::symlink(root.join("examples"), place.path().join("examples"))
                .expect("link examples");
            let bin = place.path().join("bin");
            std::fs::create_dir(&bin).expect("bin");
            std::os::unix::fs::symlink(coxswain, bin.join("coxswain")).expect("link coxswain");
            let path = format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            let script = block
                .text
                .replace("cargo run -q -p coxswain --", "coxswain");
            let out = Command::new("timeout")
                .args(["--kill-after=10", "300", "bash", "-euo", "pipefail", "-c"])
                .arg(&script)
                .current_dir(place.path())
                .env("PATH", path)
                .env("HOME", place.path())
                .env("XDG_DATA_HOME", place.path().join("data"))
                .env("KUBECONFIG", place.path().join("no-kubeconfig"))
                .env_remove("COXSWAIN_RECORDS")
                .env_remove("COXSWAIN_RECORDS_DATABASE")
                .env_remove("KUBERNETES_SERVICE_HOST")
                .stdin(std::process::Stdio::null())
                .output()
                .expect("bash runs");
            assert!(
                out.status.success(),
                "{name}:{}: the block failed ({}):\n{script}\nstdout:\n{}\nstderr:\n{}",
                block.line,
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    println!("{ran} shell blocks ran");
    assert!(ran >= 3, "only {ran} runnable blocks found");
}

/// The id mdBook gives a heading: its text without Markdown, lowercased,
/// spaces as `-`, and only letters, digits, `-` and `_` kept.
fn heading_id(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [words](target) reads as its words.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a page: each heading's id (a repeated one numbered `-1`,
/// `-2`, … as mdBook does).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = BTreeSet::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let id = heading_id(heading.trim());
        let count = seen.entry(id.clone()).or_insert(0);
        found.insert(if *count == 0 {
            id.clone()
        } else {
            format!("{id}-{count}")
        });
        *count += 1;
    }
    found
}

/// The targets of the inline links and images of a page, outside code
/// blocks and code spans, with their line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in prose(text).iter().enumerate() {
        // Code spans hold examples, not links.
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(n, _)| n % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            found.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_page_is_in_the_summary_and_every_link_leads_somewhere() {
    let pages = pages();
    let summary = pages.get("SUMMARY.md").expect("docs/src/SUMMARY.md");
    let listed: BTreeSet<String> = links(summary).into_iter().map(|(_, t)| t).collect();
    let unlisted: Vec<&String> = pages
        .keys()
        .filter(|p| *p != "SUMMARY.md" && !listed.contains(*p))
        .collect();
    assert!(
        unlisted.is_empty(),
        "pages missing from SUMMARY.md (mdBook would not build them): {unlisted:?}"
    );
    let mut broken = Vec::new();
    let mut checked = 0;
    for (name, text) in documents() {
        let page = root().join(&name);
        let dir = page.parent().expect("a folder");
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            let Ok(path) = path.canonicalize() else {
                broken.push(format!("{name}:{line}: {target}: no such file"));
                continue;
            };
            // The book is built from docs/src alone: a link out of it
            // would lead nowhere on the built site.
            if name.starts_with("docs/src/")
                && !path.starts_with(src().canonicalize().expect("src"))
            {
                broken.push(format!("{name}:{line}: {target}: outside docs/src"));
                continue;
            }
            if let Some(anchor) = anchor {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&text).contains(anchor) {
                    broken.push(format!("{name}:{line}: {target}: no heading with that id"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 50, "only {checked} links checked");
}

#[test]
fn readme_stays_short() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; the book holds the rest"
    );
}
