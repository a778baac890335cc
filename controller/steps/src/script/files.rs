//! The list of files a script left in `$OUTPUTS`, under a cap: a folder of
//! twenty thousand files must not become an output bigger than any other
//! output may be. When the list is cut, the output says so.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;

use serde_json::{Map, Value};

/// The most file names listed.
pub const DEFAULT_MAX_FILES: usize = 1000;
/// The most bytes of file names listed (as JSON strings, with separators).
pub const DEFAULT_MAX_LISTING_BYTES: usize = 64 << 10;

/// The caps of a listing.
#[derive(Debug, Clone, Copy)]
pub struct ListingCaps {
    /// The most names.
    pub max_files: usize,
    /// The most bytes of names.
    pub max_bytes: usize,
}

impl Default for ListingCaps {
    fn default() -> Self {
        ListingCaps {
            max_files: DEFAULT_MAX_FILES,
            max_bytes: DEFAULT_MAX_LISTING_BYTES,
        }
    }
}

/// The first files in sorted order, and how many there were in all.
#[derive(Debug, PartialEq, Eq)]
pub struct Listing {
    /// `/`-separated paths relative to the folder, sorted.
    pub files: Vec<String>,
    /// Every regular file found.
    pub total: usize,
}

impl Listing {
    /// Whether some files are left out of [`Listing::files`].
    pub fn truncated(&self) -> bool {
        self.files.len() < self.total
    }

    /// Adds `files` to an object output that has none of its own; a cut
    /// list also gets `filesTruncated: true` and `filesTotal`.
    pub fn add_to(self, output: &mut Value) {
        let Value::Object(map) = output else { return };
        if self.total == 0 || map.contains_key("files") {
            return;
        }
        let truncated = self.truncated();
        let total = self.total;
        map.insert(
            "files".into(),
            Value::Array(self.files.into_iter().map(Value::String).collect()),
        );
        if truncated {
            insert_absent(map, "filesTruncated", Value::Bool(true));
            insert_absent(map, "filesTotal", Value::from(total));
        }
    }
}

fn insert_absent(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key).or_insert(value);
}

/// Every regular file under `dir`, keeping the first names within `caps`.
/// Memory stays bounded by the caps whatever the folder holds.
pub fn list_files(dir: &Path, caps: ListingCaps) -> io::Result<Listing> {
    let mut kept: BTreeSet<String> = BTreeSet::new();
    let mut total = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file()
                && let Ok(relative) = entry.path().strip_prefix(dir)
            {
                total += 1;
                kept.insert(slash_path(relative));
                if kept.len() > caps.max_files {
                    kept.pop_last();
                }
            }
        }
    }
    let mut bytes = 0;
    let files = kept
        .into_iter()
        .take_while(|name| {
            // Quotes and a comma around each name, as in the JSON list.
            bytes += name.len() + 3;
            bytes <= caps.max_bytes
        })
        .collect();
    Ok(Listing { files, total })
}

fn slash_path(relative: &Path) -> String {
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn folder(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for name in names {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
        dir
    }

    #[test]
    fn the_first_names_in_order_are_kept_and_the_total_counted() {
        let dir = folder(&["c", "a", "sub/b", "d"]);
        let caps = ListingCaps {
            max_files: 2,
            max_bytes: 1000,
        };
        let listing = list_files(dir.path(), caps).unwrap();
        assert_eq!(listing.files, ["a", "c"]);
        assert_eq!(listing.total, 4);
    }

    #[test]
    fn long_names_are_cut_by_bytes() {
        let long = "x".repeat(100);
        let dir = folder(&[&format!("a{long}"), &format!("b{long}"), "c"]);
        let caps = ListingCaps {
            max_files: 10,
            max_bytes: 150,
        };
        let listing = list_files(dir.path(), caps).unwrap();
        assert_eq!(listing.files, [format!("a{long}")]);
        assert_eq!(listing.total, 3);
    }

    #[test]
    fn a_cut_list_says_so_and_a_whole_one_does_not() {
        let mut output = json!({"ok": true});
        Listing {
            files: vec!["a".into()],
            total: 3,
        }
        .add_to(&mut output);
        assert_eq!(
            output,
            json!({"ok": true, "files": ["a"], "filesTruncated": true, "filesTotal": 3})
        );
        let mut output = json!({});
        Listing {
            files: vec!["a".into()],
            total: 1,
        }
        .add_to(&mut output);
        assert_eq!(output, json!({"files": ["a"]}));
    }
}
