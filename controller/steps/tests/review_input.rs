//! What a script redone after a send-back finds in `$INPUTS/review`, run as
//! a real process by the local executor (a Job's pod gets the same files,
//! from the same list).

mod common;

use std::sync::Arc;

use common::work;
use coxswain_core::api::ScriptStep;
use coxswain_core::engine::{ChangeRequest, Task, Work, codes};
use coxswain_steps::Executor;
use coxswain_steps::script::{LocalScript, REVIEW_FILE, work_input_files};
use coxswain_steps::secrets::MapSecrets;
use serde_json::{Value, json};

fn redone(source: &str, input: Value) -> Work {
    let step = ScriptStep {
        source: Some(source.into()),
        ..Default::default()
    };
    let mut work = work(Task::Script(step), input, &[]);
    work.attempt = 2;
    work.review = Some(ChangeRequest {
        reviewer: "dan".into(),
        decision: "changes".into(),
        reviewed: vec![("build".into(), json!({"image": "alpine"}))],
        instructions: "Pin the base image.".into(),
    });
    work
}

#[tokio::test]
async fn a_redone_script_reads_the_reviewers_answer() {
    let executor = LocalScript::new(Arc::new(MapSecrets::new()));
    let work = redone(r#"cat "$INPUTS/review""#, json!({"tag": "v1"}));
    let done = executor.run(&work).await.expect("ran");
    assert_eq!(
        done.output,
        json!({
            "decision": "changes",
            "feedback": "Pin the base image.",
            "by": "dan",
            "reviewed": {"build": {"image": "alpine"}},
        })
    );
    // Its own inputs are there as always.
    let names: Vec<String> = work_input_files(&work)
        .expect("files")
        .into_iter()
        .map(|f| f.file)
        .collect();
    assert_eq!(names, ["tag", REVIEW_FILE]);
    // A first attempt, not sent back, has no such file.
    let mut first = work.clone();
    first.review = None;
    let listed = executor
        .run(&Work {
            task: Task::Script(ScriptStep {
                source: Some(r#"ls "$INPUTS""#.into()),
                ..Default::default()
            }),
            ..first
        })
        .await
        .expect("ran");
    assert_eq!(listed.text.as_deref(), Some("tag\n"));
}

#[tokio::test]
async fn an_input_called_review_is_refused_rather_than_hidden() {
    let executor = LocalScript::new(Arc::new(MapSecrets::new()));
    let work = redone("true", json!({"review": "mine"}));
    let failed = executor.run(&work).await.expect_err("clash");
    assert_eq!(failed.error.code, codes::SCRIPT, "{:?}", failed.error);
    assert!(
        failed
            .error
            .message
            .contains("inputs `review` and `review (the reviewer's answer, given after a send-back)` would both be written to $INPUTS/review"),
        "{}",
        failed.error.message
    );
}
