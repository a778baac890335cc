//! Large values moved out of a run's stored record, and put back.
//!
//! A Run's status lives in etcd, which refuses objects past about 1.5 MiB,
//! and every status write goes to every watcher. So before the status is
//! written, [`split`] takes every value over a threshold out of it (step,
//! part and attempt outputs and texts, the run's output, reviewed work,
//! error messages: any text, and any free-JSON value) and, while the status
//! is still over its budget, the largest values left. Each moved value
//! leaves in its place a short text that says it is a preview, with the
//! value's size and digest and where it went, and an entry in
//! `status.values` that [`join`] reads to put the values back. Nothing is
//! cut silently: the whole value is kept elsewhere (the controller keeps it
//! in ConfigMaps the Run owns; see `coxswain-k8s`'s `offload`).
//!
//! Both work on the stored form of a status (`serde_json::to_value(&status)`),
//! in which each value is kept once. The content of a moved value is its
//! compact JSON (a text is a JSON string), named by its SHA-256, so the same
//! value always gives the same name and writing the same record again needs
//! nothing new. `serde_json` keeps object keys sorted, so a value has one
//! compact JSON.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::text::floor_boundary;

/// The most one piece of a moved value holds: a ConfigMap holds at most
/// 1 MiB of data, so a larger value is cut into pieces of this size.
pub const PIECE_BYTES: usize = 1_000_000;

/// The default threshold: a value whose JSON is larger leaves the status.
pub const DEFAULT_THRESHOLD: usize = 8 << 10;

/// The default budget of a stored record, far below etcd's object limit.
pub const DEFAULT_BUDGET: usize = 256 << 10;

/// The smallest threshold: a preview with its reference weighs a few
/// hundred bytes, so moving smaller values would not make a status smaller.
pub const MIN_THRESHOLD: usize = 1 << 10;

/// How every preview begins, so a reader (and a test) can tell it is one.
pub const PREVIEW_PREFIX: &str = "[moved out of the status: ";

/// How many characters of the value a preview shows.
const PREVIEW_CHARS: usize = 120;

/// The record's fields that hold free JSON (a step's output, a part's item,
/// reviewed work, what an attempt's lookups found): moved whole, never
/// looked into.
const VALUE_FIELDS: [&str; 4] = ["output", "item", "reviewed", "lookups"];

/// The stored record's field listing the moved values.
pub const VALUES_FIELD: &str = "values";

/// One value moved out of a stored record: where it was, what it was, and
/// where it is kept.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MovedValue {
    /// Where the value was, as a JSON pointer into the status, such as
    /// `/steps/draft/output`; the status holds a preview there.
    pub path: String,
    /// Size of the value's compact JSON, in bytes.
    pub bytes: i64,
    /// Hex SHA-256 of the value's compact JSON.
    pub sha256: String,
    /// The ConfigMaps holding the value's JSON, in order: each holds one
    /// piece under the key `value`; joined, they are the whole.
    pub config_maps: Vec<String>,
}

/// When values leave a status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    threshold: usize,
    budget: usize,
}

impl Limits {
    /// Values larger than `threshold` bytes (as compact JSON) always move;
    /// while the status is larger than `budget`, the largest others do too.
    pub fn new(threshold: usize, budget: usize) -> Result<Self, OffloadError> {
        if threshold < MIN_THRESHOLD {
            return Err(OffloadError::ThresholdTooSmall { threshold });
        }
        Ok(Limits { threshold, budget })
    }

    /// Values larger than this always move.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// The size a stored record should stay under.
    pub fn budget(&self) -> usize {
        self.budget
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            threshold: DEFAULT_THRESHOLD,
            budget: DEFAULT_BUDGET,
        }
    }
}

/// A record with its large values taken out.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// The stored record to write: previews in place, `values` listing them.
    pub status: Value,
    /// The content of every moved value, by its SHA-256 (compact JSON).
    pub contents: BTreeMap<String, String>,
    /// Size of `status` as compact JSON, in bytes.
    pub bytes: usize,
    /// The budget it was split for.
    pub budget: usize,
}

impl Split {
    /// Whether the status is still larger than its budget after every value
    /// that could move has moved (the rest is steps' bookkeeping).
    pub fn over_budget(&self) -> bool {
        self.bytes > self.budget
    }

    /// The values moved, as listed in the status.
    pub fn moved(&self) -> Result<Vec<MovedValue>, OffloadError> {
        moved(&self.status)
    }
}

/// Why a status could not be split or put back together.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// The threshold is below [`MIN_THRESHOLD`].
    #[error(
        "the offload threshold of {threshold} bytes is too small: a moved value leaves a \
         preview of a few hundred bytes, so the threshold must be at least {MIN_THRESHOLD}"
    )]
    ThresholdTooSmall {
        /// The threshold given.
        threshold: usize,
    },
    /// The record is not a JSON object.
    #[error("a run's stored record must be a JSON object, not {found}")]
    NotARecord {
        /// What was found instead.
        found: &'static str,
    },
    /// The record to split already lists moved values.
    #[error(
        "the record already has values moved out (status.values lists {count}); \
         put them back before moving values again"
    )]
    AlreadySplit {
        /// How many values it lists.
        count: usize,
    },
    /// `status.values` does not read as a list of moved values.
    #[error("status.values is not a list of moved values: {0}")]
    BadList(#[source] serde_json::Error),
    /// An entry names a place the status does not have.
    #[error("status.values names {path}, but the status holds nothing there")]
    NoSuchPlace {
        /// The entry's path.
        path: String,
    },
    /// The content of a moved value was not given.
    #[error("the value moved from {path} (sha256 {sha256}) was not found")]
    Missing {
        /// The entry's path.
        path: String,
        /// The entry's digest.
        sha256: String,
    },
    /// The content given does not match the entry's digest or size.
    #[error(
        "the value moved from {path} does not match its record: expected {bytes} bytes with \
         sha256 {sha256}, got {found_bytes} bytes with sha256 {found_sha256}"
    )]
    Mismatch {
        /// The entry's path.
        path: String,
        /// The size the entry says.
        bytes: i64,
        /// The digest the entry says.
        sha256: String,
        /// The size found.
        found_bytes: usize,
        /// The digest found.
        found_sha256: String,
    },
    /// The content is not JSON.
    #[error("the value moved from {path} is not JSON: {source}")]
    NotJson {
        /// The entry's path.
        path: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
}

/// Hex SHA-256 of `text`.
pub fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `text` cut into pieces of at most [`PIECE_BYTES`], on character
/// boundaries, so each fits one ConfigMap.
pub fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > PIECE_BYTES {
        let (head, tail) = rest.split_at(floor_boundary(rest, PIECE_BYTES));
        out.push(head);
        rest = tail;
    }
    out.push(rest);
    out
}

/// The values a stored record lists as moved (none when it lists none).
pub fn moved(stored: &Value) -> Result<Vec<MovedValue>, OffloadError> {
    match stored.get(VALUES_FIELD) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(list) => Vec::<MovedValue>::deserialize(list).map_err(OffloadError::BadList),
    }
}

/// Takes the large values out of `stored` (see the module's notes).
/// `name(sha256, index)` names the ConfigMap holding piece `index` of the
/// value with that digest.
pub fn split(
    mut stored: Value,
    limits: &Limits,
    name: &dyn Fn(&str, usize) -> String,
) -> Result<Split, OffloadError> {
    let record = as_record(&mut stored)?;
    if let Some(count) = record
        .get(VALUES_FIELD)
        .and_then(Value::as_array)
        .map(Vec::len)
        .filter(|n| *n > 0)
    {
        return Err(OffloadError::AlreadySplit { count });
    }
    record.remove(VALUES_FIELD);
    let mut places = Vec::new();
    for (key, value) in record.iter() {
        let path = format!("/{}", escape(key));
        places_in(key, value, path, &mut places);
    }
    let mut size = compact_len(&stored);
    let mut mover = Mover {
        name,
        contents: BTreeMap::new(),
        entries: Vec::new(),
    };
    // Every value over the threshold moves; then, largest first, others
    // while the status is over budget.
    places.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.path.cmp(&b.path)));
    for place in &places {
        let must = place.bytes > limits.threshold;
        let may = place.bytes > MIN_THRESHOLD && size > limits.budget;
        if must || may {
            size = size.saturating_sub(mover.take(&mut stored, place));
        }
    }
    mover.entries.sort_by(|a, b| a.path.cmp(&b.path));
    if !mover.entries.is_empty() {
        let list: Vec<Value> = mover.entries.iter().map(entry_json).collect();
        as_record(&mut stored)?.insert(VALUES_FIELD.into(), Value::Array(list));
    }
    Ok(Split {
        bytes: compact_len(&stored),
        status: stored,
        contents: mover.contents,
        budget: limits.budget,
    })
}

/// What a person is shown (an Approval's `show`: values by step key) with
/// every value larger than the threshold replaced by its preview.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    /// The object to show: previews in place of large values.
    pub show: Value,
    /// Where each moved value went (paths are `/KEY`).
    pub moved: Vec<MovedValue>,
    /// The content of every moved value, by its SHA-256 (compact JSON).
    pub contents: BTreeMap<String, String>,
}

/// Moves the large values of `show` (each value whole) out, as [`split`]
/// does for a status; `name(sha256, index)` names the ConfigMaps. An
/// Approval has no list of moved values: each preview says where its
/// value is kept.
pub fn split_shown(
    show: &BTreeMap<String, Value>,
    limits: &Limits,
    name: &dyn Fn(&str, usize) -> String,
) -> Shown {
    let mut object = Value::Object(show.clone().into_iter().collect());
    let mut mover = Mover {
        name,
        contents: BTreeMap::new(),
        entries: Vec::new(),
    };
    for (key, value) in show {
        let bytes = compact_len(value);
        if bytes > limits.threshold {
            let path = format!("/{}", escape(key));
            mover.take(&mut object, &Place { path, bytes });
        }
    }
    Shown {
        show: object,
        moved: mover.entries,
        contents: mover.contents,
    }
}

/// Puts the moved values back into `stored`, given their contents by
/// SHA-256: the inverse of [`split`]. Each content is checked against its
/// digest and size. A record with no `values` comes back as it was.
pub fn join(mut stored: Value, contents: &BTreeMap<String, String>) -> Result<Value, OffloadError> {
    let entries = moved(&stored)?;
    as_record(&mut stored)?.remove(VALUES_FIELD);
    for entry in entries {
        let content = contents
            .get(&entry.sha256)
            .ok_or_else(|| OffloadError::Missing {
                path: entry.path.clone(),
                sha256: entry.sha256.clone(),
            })?;
        let value = check(&entry, content)?;
        let place = stored
            .pointer_mut(&entry.path)
            .ok_or_else(|| OffloadError::NoSuchPlace {
                path: entry.path.clone(),
            })?;
        *place = value;
    }
    Ok(stored)
}

/// The value `content` holds, when it is the one `entry` describes.
pub fn check(entry: &MovedValue, content: &str) -> Result<Value, OffloadError> {
    let found = sha256(content);
    if found != entry.sha256 || i64::try_from(content.len()).ok() != Some(entry.bytes) {
        return Err(OffloadError::Mismatch {
            path: entry.path.clone(),
            bytes: entry.bytes,
            sha256: entry.sha256.clone(),
            found_bytes: content.len(),
            found_sha256: found,
        });
    }
    serde_json::from_str(content).map_err(|source| OffloadError::NotJson {
        path: entry.path.clone(),
        source,
    })
}

/// The text left in a moved value's place: it says it is a preview, how
/// large the value is, its digest, where it went, and how it begins.
pub fn preview(value: &Value, content: &str, sha256: &str, config_maps: &[String]) -> String {
    let shown = match value {
        Value::String(text) => text.as_str(),
        _ => content,
    };
    let head = crate::text::cut(shown, PREVIEW_CHARS).unwrap_or(shown);
    let first = config_maps.first().map_or("", String::as_str);
    let more = match config_maps.len() {
        0 | 1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    format!(
        "{PREVIEW_PREFIX}{} bytes, sha256 {}, in ConfigMap {first}{more}; \
         only its beginning is shown here] {head}…",
        content.len(),
        &sha256[..16.min(sha256.len())],
    )
}

/// A place in the status that may move: a text, or a free-JSON value.
struct Place {
    path: String,
    bytes: usize,
}

/// Every place in `value` (found under `key`, at `path`) that may move.
/// Places never nest: free JSON moves whole, and a text has no inside.
fn places_in(key: &str, value: &Value, path: String, out: &mut Vec<Place>) {
    let whole = VALUE_FIELDS.contains(&key) || value.is_string();
    if whole {
        out.push(Place {
            bytes: compact_len(value),
            path,
        });
        return;
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                places_in(k, v, format!("{path}/{}", escape(k)), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                places_in("", v, format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Moves values out of a status, keeping their contents and entries.
struct Mover<'n> {
    name: &'n dyn Fn(&str, usize) -> String,
    contents: BTreeMap<String, String>,
    entries: Vec<MovedValue>,
}

impl Mover<'_> {
    /// Moves the value at `place` out of `stored`; returns by how many
    /// bytes the status shrank (the entry's weight counted).
    fn take(&mut self, stored: &mut Value, place: &Place) -> usize {
        let Some(slot) = stored.pointer_mut(&place.path) else {
            return 0;
        };
        let content = slot.to_string();
        let sha = sha256(&content);
        let config_maps: Vec<String> = (0..pieces(&content).len())
            .map(|i| (self.name)(&sha, i))
            .collect();
        let shown = preview(slot, &content, &sha, &config_maps);
        let entry = MovedValue {
            path: place.path.clone(),
            bytes: i64::try_from(content.len()).unwrap_or(i64::MAX),
            sha256: sha.clone(),
            config_maps,
        };
        let added =
            compact_len(&Value::String(shown.clone())) + compact_len(&entry_json(&entry)) + 1;
        *slot = Value::String(shown);
        self.contents.insert(sha, content);
        self.entries.push(entry);
        place.bytes.saturating_sub(added)
    }
}

fn entry_json(entry: &MovedValue) -> Value {
    serde_json::to_value(entry).unwrap_or(Value::Null)
}

fn as_record(stored: &mut Value) -> Result<&mut Map<String, Value>, OffloadError> {
    match stored {
        Value::Object(map) => Ok(map),
        other => Err(OffloadError::NotARecord {
            found: kind_of(other),
        }),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A JSON pointer token for `key` (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Size of `value` as compact JSON, without building the text.
fn compact_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests;
