//! `coxswain run --from REC --step KEY` with real processes: the steps
//! before KEY are not run again (their marker file is written once), the
//! rerun succeeds, and a record of another flow or an unknown step is
//! refused before anything runs.

mod common;

use common::{coxswain, exits, record};

/// A flow whose first step appends a line to `first.marker` and whose last
/// step fails until the file `ok` exists in `dir`.
fn flow_text(dir: &std::path::Path, extra: &str) -> String {
    let dir = dir.display();
    format!(
        "apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: rerun}}
spec:
  steps:
    - key: first
      script: {{source: 'echo ran >> {dir}/first.marker; echo \"{{\\\"n\\\": 7}}\"'}}
    - key: middle
      script: {{source: 'echo middle >> {dir}/middle.marker; echo {extra}'}}
    - key: last
      script: {{source: 'test -f {dir}/ok || {{ echo no ok file >&2; exit 3; }}; echo done'}}
"
    )
}

/// Writes the flow into `dir` and runs it once; its last step fails
/// (exit 1). The flow's path, that run's output, and the path of its
/// record, saved as `rec.json`.
fn first_run(dir: &std::path::Path) -> (String, std::process::Output, String) {
    let flow = dir.join("flow.yaml");
    std::fs::write(&flow, flow_text(dir, "m")).expect("write flow");
    let flow = flow.display().to_string();
    let first = coxswain(&["run", &flow, "--output", "json", "--quiet"]);
    assert_eq!(first.status.code(), Some(1), "the last step fails");
    let rec = dir.join("rec.json");
    std::fs::write(&rec, &first.stdout).expect("write record");
    (flow, first, rec.display().to_string())
}

fn lines(path: std::path::PathBuf) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[test]
fn a_rerun_from_the_failed_step_runs_only_it_and_succeeds() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (flow, first, rec) = first_run(dir.path());
    let old = record(&first);
    assert_eq!(old["phase"], "Failed");
    assert_eq!(old["steps"]["last"]["status"], "failed");
    assert_eq!(lines(dir.path().join("first.marker")), 1);

    std::fs::write(dir.path().join("ok"), "").expect("write flag");
    let again = coxswain(&[
        "run", &flow, "--from", &rec, "--step", "last", "--output", "json",
    ]);
    exits(&again, 0);
    let new = record(&again);
    assert_eq!(new["phase"], "Succeeded");
    assert_eq!(lines(dir.path().join("first.marker")), 1, "first ran once");
    assert_eq!(
        lines(dir.path().join("middle.marker")),
        1,
        "middle ran once"
    );
    for key in ["first", "middle"] {
        assert_eq!(
            new["steps"][key]["copiedFrom"]["run"],
            rec.as_str(),
            "{key}"
        );
        assert_eq!(new["steps"][key]["attempts"], old["steps"][key]["attempts"]);
    }
    assert_eq!(new["steps"]["first"]["output"]["n"], 7);
    assert!(new["steps"]["last"].get("copiedFrom").is_none());
    assert_eq!(new["steps"]["last"]["status"], "completed");
    assert_eq!(new["rerunOf"]["step"], "last");
    assert_eq!(new["flowDigest"], old["flowDigest"]);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        said.contains("copied from the old run: first, middle"),
        "{said}"
    );

    // From `middle`: it runs again, `first` still does not.
    let from_middle = coxswain(&[
        "run", &flow, "--from", &rec, "--step", "middle", "--output", "json", "--quiet",
    ]);
    assert_eq!(from_middle.status.code(), Some(0));
    assert_eq!(lines(dir.path().join("first.marker")), 1);
    assert_eq!(lines(dir.path().join("middle.marker")), 2);
}

#[test]
fn another_flow_an_unknown_step_or_a_broken_record_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (flow, _, rec) = first_run(dir.path());

    let changed = dir.path().join("changed.yaml");
    std::fs::write(&changed, flow_text(dir.path(), "changed")).expect("write flow");
    let o = coxswain(&[
        "run",
        &changed.display().to_string(),
        "--from",
        &rec,
        "--step",
        "last",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains(&format!("cannot rerun {rec} from `last`")),
        "{said}"
    );
    assert!(said.contains("but the flow given is sha256:"), "{said}");

    let o = coxswain(&["run", &flow, "--from", &rec, "--step", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("`nope` is not a step of the flow"), "{said}");

    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{}").expect("write");
    let o = coxswain(&[
        "run",
        &flow,
        "--from",
        &junk.display().to_string(),
        "--step",
        "last",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has no `phase`"));

    let o = coxswain(&["run", &flow, "--from", &rec]);
    assert_eq!(o.status.code(), Some(2), "--from needs --step");
    assert_eq!(
        lines(dir.path().join("first.marker")),
        1,
        "nothing ran again"
    );
}
