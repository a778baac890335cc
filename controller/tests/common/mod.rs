//! What the command-line tests share: running the real `coxswain` binary,
//! reading what it printed, and a temporary folder kept away from the
//! user's own data. Each test binary uses only part of it.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// `coxswain ARGS` as it is, in this process's environment.
pub fn coxswain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(args)
        .output()
        .expect("coxswain runs")
}

/// `coxswain ARGS` with `home` as its home, data folder and kubeconfig's
/// folder, and no records setting or in-cluster service from the
/// environment: nothing of the user's, and no cluster, is read.
pub fn isolated(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(args)
        .env_remove("COXSWAIN_RECORDS")
        .env_remove("COXSWAIN_RECORDS_DATABASE")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("KUBECONFIG", home.join("no-kubeconfig"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("HOME", home)
        .output()
        .expect("coxswain runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The one JSON object `coxswain` printed, whatever its exit code.
pub fn record(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON object ({e}): {}\n{}",
            stdout(o),
            stderr(o)
        )
    })
}

/// The record of a run that must have succeeded (exit 0).
pub fn succeeded(o: &Output) -> Value {
    exits(o, 0);
    record(o)
}

/// Checks that `coxswain` exited with `code`, showing its error output if
/// not.
pub fn exits(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
}

/// Checks that `text` (what `coxswain` printed) contains `part`, showing
/// all of it if not.
pub fn says(text: String, part: &str) {
    assert!(text.contains(part), "{text}");
}

/// A file in a temporary folder of its own, both removed when the value is
/// dropped (at the end of the test that made it).
pub struct TempFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

/// A temporary file `name` holding `content`, that lives as long as the
/// test needs it.
pub fn temp_file(name: &str, content: &str) -> TempFile {
    let dir = tempfile::Builder::new()
        .prefix("coxswain-cli-")
        .tempdir()
        .expect("temp dir");
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(content.as_bytes()))
        .expect("temp file");
    TempFile { _dir: dir, path }
}

/// A temporary folder holding the records file and the flow files, removed
/// at the end of the test; commands run in it [`isolated`].
pub struct Place {
    pub dir: tempfile::TempDir,
}

impl Place {
    /// A new folder, its name starting with `prefix`.
    pub fn new(prefix: &str) -> Place {
        Place {
            dir: tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .expect("temp dir"),
        }
    }

    /// The records file's path (not made until a command writes it).
    pub fn records(&self) -> String {
        self.dir.path().join("r.sqlite3").display().to_string()
    }

    /// Writes `text` to the file `name` in the folder; returns its path.
    pub fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write file");
        path.display().to_string()
    }

    /// `coxswain ARGS` with the environment kept away from the user's data.
    pub fn coxswain(&self, args: &[&str]) -> Output {
        isolated(self.dir.path(), args)
    }

    /// `coxswain run FLOW --records FILE --input INPUT OPTIONS`.
    pub fn run_flow(&self, flow: &str, input: &Value, options: &[&str]) -> Output {
        let input = input.to_string();
        let records = self.records();
        let mut all = vec!["run", flow, "--records", &records, "--input", &input];
        all.extend_from_slice(options);
        self.coxswain(&all)
    }

    /// `coxswain SUBCOMMAND ARGS --records FILE` (the option after the
    /// subcommand, as people write it).
    pub fn with_records(&self, subcommand: &str, args: &[&str]) -> Output {
        let records = self.records();
        let mut all = vec![subcommand];
        all.extend_from_slice(args);
        all.extend(["--records", records.as_str()]);
        self.coxswain(&all)
    }
}
