use std::collections::HashSet;

use serde_json::json;

use super::*;
use crate::api::{FlowSpec, RunStatus};

fn steps(yaml: &str) -> Vec<Step> {
    let spec: FlowSpec = serde_yaml::from_str(yaml).expect("a flow");
    spec.steps
}

fn record(value: serde_json::Value) -> RunStatus {
    serde_json::from_value(value).expect("a record")
}

/// The box of the step `key`, which the test knows is drawn.
fn box_of<'p>(picture: &'p Picture, key: &str) -> &'p StepBox {
    picture.steps.iter().find(|s| s.key == key).expect(key)
}

const REVIEWED: &str = r#"
steps:
  - key: fetch
    script: {source: "echo"}
  - key: draft
    script: {source: "echo"}
    input: {title: $steps.fetch.output.title, all: $steps.fetch.output}
  - key: review
    approval: {decisions: [approve, changes]}
    sendBack: [{exit: changes, to: draft}]
  - key: publish
    after: [review.approve]
    script: {source: "echo"}
  - key: scrap
    after: [review.changes]
    script: {source: "echo"}
"#;

#[test]
fn a_flow_without_a_run_is_drawn_plain_and_every_step_pending() {
    let picture = picture(&steps(REVIEWED), None);
    assert!(picture.steps.iter().all(|s| s.status == "pending"));
    assert!(picture.arrows.iter().all(|a| a.state == ArrowState::Plain));
    let ids: Vec<&str> = picture.arrows.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "fetch->draft",
            "draft->review",
            "review.changes->draft",
            "review.approve->publish",
            "review.changes->scrap"
        ]
    );
}

#[test]
fn steps_stand_below_what_they_come_after_and_siblings_side_by_side() {
    let picture = picture(&steps(REVIEWED), None);
    let at = |key: &str| {
        let s = box_of(&picture, key);
        (s.x, s.y)
    };
    assert!(at("fetch").1 < at("draft").1);
    assert!(at("draft").1 < at("review").1);
    assert_eq!(at("publish").1, at("scrap").1, "two exits, one row");
    assert_ne!(at("publish").0, at("scrap").0);
    for s in &picture.steps {
        assert!(s.x + BOX_WIDTH <= picture.width && s.y + BOX_HEIGHT <= picture.height);
    }
}

#[test]
fn a_taken_arrow_says_which_value_moved_and_a_skipped_one_why_not() {
    let run = record(json!({
        "phase": "Succeeded",
        "steps": {
            "fetch": {"status": "completed", "output": {"title": "Disk full", "id": 7}},
            "draft": {"status": "completed", "output": "text"},
            "review": {"status": "completed", "exit": "approve"},
            "publish": {"status": "completed"},
            "scrap": {"status": "skipped"}
        },
        "arrows": [
            {"from": "fetch", "to": "draft", "taken": true},
            {"from": "draft", "to": "review", "taken": true},
            {"from": "review.approve", "to": "publish", "taken": true},
            {"from": "review.changes", "to": "scrap", "taken": false,
             "detail": "`review` took exit `approve`"}
        ]
    }));
    let picture = picture(&steps(REVIEWED), Some(&run));
    let arrow = |id: &str| picture.arrows.iter().find(|a| a.id == id).expect(id);
    let fed = arrow("fetch->draft");
    assert_eq!(fed.state, ArrowState::Taken);
    let moved: Vec<(&str, &str, &str)> = fed
        .moved
        .iter()
        .map(|m| (m.reference.as_str(), m.into.as_str(), m.json.as_str()))
        .collect();
    assert_eq!(
        moved,
        [
            (
                "$steps.fetch.output",
                "input.all",
                r#"{"id":7,"title":"Disk full"}"#
            ),
            ("$steps.fetch.output.title", "input.title", r#""Disk full""#),
        ]
    );
    assert_eq!(fed.moved[1].bytes, 11);
    let default_input = arrow("draft->review");
    assert_eq!(default_input.moved[0].reference, "previous output");
    assert_eq!(default_input.moved[0].json, r#""text""#);
    let not = arrow("review.changes->scrap");
    assert_eq!(not.state, ArrowState::NotTaken);
    assert_eq!(not.why.as_deref(), Some("`review` took exit `approve`"));
    assert!(not.moved.is_empty());
    let back = arrow("review.changes->draft");
    assert_eq!(back.kind, ArrowKind::SendBack);
    assert_eq!(back.state, ArrowState::NotTaken);
    assert!(
        back.why
            .as_deref()
            .unwrap_or("")
            .contains("never chose `changes`")
    );
}

#[test]
fn a_send_back_taken_twice_is_bold_with_its_count_and_bends_apart() {
    let run = record(json!({
        "phase": "Running",
        "steps": {"fetch": {"status": "completed"}, "draft": {"status": "running"}},
        "sendBacks": {"review->draft": 2}
    }));
    let picture = picture(&steps(REVIEWED), Some(&run));
    let back = picture
        .arrows
        .iter()
        .find(|a| a.kind == ArrowKind::SendBack)
        .expect("a send-back");
    assert_eq!((back.state, back.count), (ArrowState::Taken, Some(2)));
    let review = box_of(&picture, "review");
    assert_eq!(
        back.points[0],
        [review.x + BOX_WIDTH, review.y + BOX_HEIGHT / 2]
    );
    assert!(back.points[1][1] < back.points[0][1], "it goes back up");
}

#[test]
fn a_large_fan_out_is_one_box_with_its_parts_counted() {
    let flow = steps(
        r#"
steps:
  - key: each
    parallel:
      items: $input.ids
      step: {key: one, script: {source: "echo"}}
"#,
    );
    let parts: Vec<serde_json::Value> = (0..1000)
        .map(|i| {
            let status = match i % 10 {
                0 => "failed",
                1 => "running",
                _ => "completed",
            };
            json!({"key": format!("{i}"), "label": format!("{i}"), "status": status})
        })
        .collect();
    let run = record(json!({"steps": {"each": {"status": "running", "parts": parts}}}));
    let picture = picture(&flow, Some(&run));
    let each = box_of(&picture, "each");
    assert_eq!(
        each.parts,
        Some(PartCount {
            total: 1000,
            completed: 800,
            failed: 100,
            running: 100
        })
    );
    assert!(each.label.contains("1000 parts: 800 completed, 100 failed"));
}

#[test]
fn a_loop_body_sits_under_its_loop_and_what_follows_under_the_body() {
    let flow = steps(
        r#"
steps:
  - key: start
    script: {source: "echo"}
  - key: again
    loop:
      until: $steps.check.output == true
      maxIterations: 3
      steps:
        - key: work
          script: {source: "echo"}
        - key: check
          script: {source: "echo"}
  - key: done
    script: {source: "echo"}
"#,
    );
    let picture = picture(&flow, None);
    let at = |key: &str| box_of(&picture, key);
    assert_eq!(at("work").parent.as_deref(), Some("again"));
    assert!(at("again").y < at("work").y && at("work").y < at("check").y);
    assert!(at("check").y < at("done").y, "after the whole body");
    let pass = picture
        .arrows
        .iter()
        .find(|a| a.kind == ArrowKind::EachPass)
        .expect("each pass");
    assert_eq!(pass.id, "again->work");
}

#[test]
fn a_thousand_steps_get_a_thousand_boxes_that_never_overlap() {
    let mut yaml = String::from("steps:\n");
    for i in 0..1000 {
        yaml.push_str(&format!("  - key: s{i}\n    script: {{source: echo}}\n"));
        if i % 7 == 3 {
            yaml.push_str(&format!("    after: [s{}]\n", i / 2));
        }
    }
    let picture = picture(&steps(&yaml), None);
    assert_eq!(picture.steps.len(), 1000);
    let corners: HashSet<(u32, u32)> = picture.steps.iter().map(|s| (s.x, s.y)).collect();
    assert_eq!(corners.len(), 1000, "two boxes in one place");
    for s in &picture.steps {
        assert!(s.x + BOX_WIDTH <= picture.width && s.y + BOX_HEIGHT <= picture.height);
    }
}

#[test]
fn an_arrow_in_full_carries_the_whole_value() {
    let long = "x".repeat(5000);
    let run = record(json!({
        "steps": {"fetch": {"status": "completed", "output": {"title": long}}, "draft": {"status": "running"}},
        "arrows": [{"from": "fetch", "to": "draft", "taken": true}]
    }));
    let picture = picture(&steps(REVIEWED), Some(&run));
    let preview = &picture.arrows[0].moved[0];
    assert!(preview.cut && preview.json.chars().count() == 201);
    let full = arrow_in_full(&steps(REVIEWED), &run, "fetch->draft").expect("the arrow");
    assert!(!full.moved[0].cut);
    assert_eq!(full.moved[0].json.len(), full.moved[0].bytes);
    assert!(arrow_in_full(&steps(REVIEWED), &run, "fetch->nowhere").is_none());
}
