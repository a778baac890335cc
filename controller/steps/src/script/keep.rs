//! Files between steps. In a run with a workspace, what an attempt leaves in
//! `$OUTPUTS` is moved into the workspace, to the attempt's own folder
//! ([`coxswain_core::api::kept_outputs_path`]), and every file attribute of
//! the output that names one of those files is rewritten to where it is
//! kept, so a later step reads it from the path the status gives.

use std::io;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use coxswain_core::api::Field;
use coxswain_core::flow::FILE_TYPE;

use super::ScriptError;

/// Moves the folder `outputs` to `kept`, replacing whatever an earlier run
/// over the same folder (`coxswain run --workspace DIR`) left there.
pub fn keep_outputs(outputs: &Path, kept: &Path) -> Result<(), ScriptError> {
    let failed = |source| ScriptError::KeepOutputs {
        path: kept.to_path_buf(),
        source,
    };
    if kept.exists() {
        std::fs::remove_dir_all(kept).map_err(failed)?;
    }
    if let Some(parent) = kept.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    match std::fs::rename(outputs, kept) {
        Ok(()) => Ok(()),
        // Another file system (`--workspace` elsewhere than the scratch
        // space), or a mount point (`$OUTPUTS` in a step's pod is a volume
        // of its own): copy instead.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::CrossesDevices | io::ErrorKind::ResourceBusy
            ) =>
        {
            copy_tree(outputs, kept).map_err(failed)
        }
        Err(e) => Err(failed(e)),
    }
}

/// Copies the folders and regular files under `from` to `to` (links and
/// other special files are left out, as the `files` list leaves them out).
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Checks each declared `file` field of `output` and, in a run with a
/// workspace, rewrites it to where the file is kept.
///
/// `outputs` is `$OUTPUTS` as the script saw it; `files_at` is where its
/// files are now (`$OUTPUTS` itself without a workspace, the kept folder
/// with one); `rewrite` says whether values become paths under `files_at`.
/// A declared field must name a regular file the script left there,
/// relative to `$OUTPUTS` or as an absolute path under it. Any other text
/// at the top of an object output that is the absolute path of such a file
/// is rewritten too.
pub fn file_fields(
    output: &mut Value,
    declared: &[Field],
    outputs: &Path,
    files_at: &Path,
    rewrite: bool,
) -> Result<(), ScriptError> {
    let Value::Object(map) = output else {
        return Ok(());
    };
    for field in declared.iter().filter(|f| f.type_ == FILE_TYPE) {
        let Some(Value::String(named)) = map.get_mut(&field.name) else {
            // The declared check has made sure it is text already.
            continue;
        };
        let Some(relative) = inside(named, outputs) else {
            return Err(ScriptError::FileField {
                field: field.name.clone(),
                reason: format!(
                    "`{named}` is not in $OUTPUTS; print a path relative to $OUTPUTS, or under it"
                ),
            });
        };
        let path = files_at.join(&relative);
        if !path.is_file() {
            return Err(ScriptError::FileField {
                field: field.name.clone(),
                reason: format!(
                    "`{named}` is not a file the script left in $OUTPUTS (looked for {})",
                    relative.display()
                ),
            });
        }
        if rewrite {
            *named = path.display().to_string();
        }
    }
    if rewrite {
        for (name, value) in map.iter_mut() {
            let declared_file = declared
                .iter()
                .any(|f| f.name == *name && f.type_ == FILE_TYPE);
            if let Value::String(text) = value
                && !declared_file
                && Path::new(text.as_str()).is_absolute()
                && let Some(relative) = inside(text, outputs)
                && files_at.join(&relative).is_file()
            {
                *text = files_at.join(relative).display().to_string();
            }
        }
    }
    Ok(())
}

/// `named` as a path relative to `outputs`, when it stays inside it.
fn inside(named: &str, outputs: &Path) -> Option<PathBuf> {
    let path = Path::new(named);
    let relative = if path.is_absolute() {
        path.strip_prefix(outputs).ok()?
    } else {
        path
    };
    let clean: PathBuf = relative
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let stays = clean
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    (stays && !clean.as_os_str().is_empty()).then_some(clean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file_field(name: &str) -> Field {
        Field {
            name: name.into(),
            type_: FILE_TYPE.into(),
            description: None,
        }
    }

    #[test]
    fn kept_files_are_moved_and_named_by_their_new_path() {
        let scratch = tempfile::tempdir().unwrap();
        let outputs = scratch.path().join("outputs");
        std::fs::create_dir_all(outputs.join("sub")).unwrap();
        std::fs::write(outputs.join("report.txt"), "r").unwrap();
        std::fs::write(outputs.join("sub/b.txt"), "b").unwrap();
        let ws = tempfile::tempdir().unwrap();
        let kept = ws.path().join(".coxswain/outputs/make/1");
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::write(kept.join("stale"), "from an earlier run").unwrap();
        keep_outputs(&outputs, &kept).unwrap();
        assert!(!kept.join("stale").exists());
        assert_eq!(
            std::fs::read_to_string(kept.join("sub/b.txt")).unwrap(),
            "b"
        );

        let abs = outputs.join("sub/b.txt").display().to_string();
        let mut output = json!({"report": "report.txt", "other": abs, "note": "report.txt"});
        file_fields(&mut output, &[file_field("report")], &outputs, &kept, true).unwrap();
        assert_eq!(
            output["report"],
            json!(kept.join("report.txt").display().to_string())
        );
        assert_eq!(
            output["other"],
            json!(kept.join("sub/b.txt").display().to_string())
        );
        assert_eq!(
            output["note"], "report.txt",
            "only paths under $OUTPUTS move"
        );
    }

    #[test]
    fn a_file_field_must_name_a_file_of_outputs() {
        let outputs = tempfile::tempdir().unwrap();
        std::fs::write(outputs.path().join("a"), "a").unwrap();
        let fields = [file_field("f")];
        for (named, says) in [
            ("missing", "is not a file the script left in $OUTPUTS"),
            ("../etc/passwd", "is not in $OUTPUTS"),
            ("/etc/passwd", "is not in $OUTPUTS"),
        ] {
            let mut output = json!({ "f": named });
            let err = file_fields(&mut output, &fields, outputs.path(), outputs.path(), false)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("the output field `f` is a file, but"),
                "{err}"
            );
            assert!(err.contains(says), "{err}");
        }
        let mut output = json!({"f": "./a"});
        file_fields(&mut output, &fields, outputs.path(), outputs.path(), false).unwrap();
        assert_eq!(
            output["f"], "./a",
            "without a workspace the value stays as printed"
        );
    }
}
