use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::api::{Attempt, PartStatus, ReviewNote, RunPhase, RunStatus, StepPhase, StepStatus};

/// ConfigMap names as the controller makes them, for a run called `r`.
fn name(sha: &str, index: usize) -> String {
    format!("r-value-{}-{index}", &sha[..16])
}

fn stored(status: &RunStatus) -> Value {
    serde_json::to_value(status).expect("a record is JSON")
}

/// A finished step with `output` on it and one completed attempt.
fn step(output: Value) -> StepStatus {
    StepStatus {
        status: StepPhase::Completed,
        output: Some(output),
        attempts: vec![Attempt {
            number: 1,
            status: StepPhase::Completed,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn record_with(steps: Vec<(&str, StepStatus)>) -> RunStatus {
    RunStatus {
        phase: RunPhase::Succeeded,
        steps: steps.into_iter().map(|(k, r)| (k.to_string(), r)).collect(),
        ..Default::default()
    }
}

/// Every text left where a value was moved, by path.
fn previews(split: &Split) -> Vec<(String, String)> {
    split
        .moved()
        .expect("values list")
        .into_iter()
        .map(|m| {
            let at = split.status.pointer(&m.path).expect("place kept");
            (
                m.path,
                at.as_str().expect("a preview is a text").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_mebibyte_text_moves_in_two_pieces_and_comes_back() {
    let big = "a".repeat(1 << 20);
    let mut draft = step(Value::String(big.clone()));
    draft.text = Some(big);
    let record = record_with(vec![("draft", draft)]);
    let original = stored(&record);
    let split = split(original.clone(), &Limits::default(), &name).expect("split");
    assert!(split.bytes < 4096, "{} bytes left", split.bytes);
    let moved = split.moved().expect("values list");
    assert_eq!(moved.len(), 1, "{moved:?}");
    // Stored as `text` (the output is the text), as the JSON string.
    assert_eq!(moved[0].path, "/steps/draft/text");
    assert_eq!(moved[0].bytes, (1 << 20) + 2);
    assert_eq!(moved[0].config_maps.len(), 2, "over 1 MiB: two pieces");
    let content = &split.contents[&moved[0].sha256];
    assert_eq!(pieces(content).concat(), *content);
    let (_, shown) = &previews(&split)[0];
    assert!(shown.starts_with(PREVIEW_PREFIX), "{shown}");
    assert!(shown.contains("1048578 bytes"), "{shown}");
    assert!(shown.contains(&moved[0].config_maps[0]), "{shown}");
    assert!(shown.contains("and 1 more"), "{shown}");
    assert_eq!(join(split.status, &split.contents).expect("join"), original);
}

#[test]
fn small_values_stay_and_a_record_without_values_is_unchanged() {
    let record = record_with(vec![("a", step(json!({"n": 1, "s": "short"})))]);
    let original = stored(&record);
    let split = split(original.clone(), &Limits::default(), &name).expect("split");
    assert_eq!(split.status, original);
    assert!(split.contents.is_empty());
    assert_eq!(
        join(original.clone(), &BTreeMap::new()).expect("join"),
        original
    );
}

#[test]
fn over_budget_the_largest_values_under_the_threshold_move_too() {
    // Forty outputs of 7 KiB each (under the 8 KiB threshold): 280 KiB.
    let steps: Vec<(String, StepStatus)> = (0..40)
        .map(|i| {
            (
                format!("s{i:02}"),
                step(json!({"body": "b".repeat(7000 + i)})),
            )
        })
        .collect();
    let record = RunStatus {
        steps: steps.into_iter().collect(),
        ..Default::default()
    };
    let original = stored(&record);
    let limits = Limits::new(DEFAULT_THRESHOLD, 100 << 10).expect("limits");
    let split = split(original.clone(), &limits, &name).expect("split");
    assert!(!split.over_budget(), "{} bytes", split.bytes);
    assert_eq!(split.bytes, split.status.to_string().len());
    let moved = split.moved().expect("values");
    assert!(
        moved.len() < 40,
        "only as many as needed move: {}",
        moved.len()
    );
    // The largest moved first: every one left is no larger than any moved.
    let smallest_moved = moved.iter().map(|m| m.bytes).min().expect("some moved");
    let left = split.status["steps"].as_object().expect("steps");
    for (key, rec) in left {
        if let Some(out) = rec["output"].as_object() {
            let size = Value::Object(out.clone()).to_string().len() as i64;
            assert!(size <= smallest_moved, "{key} ({size}) stayed");
        }
    }
    assert_eq!(join(split.status, &split.contents).expect("join"), original);
}

#[test]
fn the_same_value_in_two_places_is_kept_once() {
    let big = json!({"doc": "d".repeat(20_000)});
    let mut record = record_with(vec![("a", step(big.clone())), ("b", step(big.clone()))]);
    record.output = Some(big);
    let split = split(stored(&record), &Limits::default(), &name).expect("split");
    assert_eq!(split.moved().expect("values").len(), 3);
    assert_eq!(
        split.contents.len(),
        1,
        "one content, one set of ConfigMaps"
    );
}

#[test]
fn put_back_refuses_missing_or_altered_content() {
    let record = record_with(vec![("draft", step(json!("x".repeat(10_000))))]);
    let split = split(stored(&record), &Limits::default(), &name).expect("split");
    let err = join(split.status.clone(), &BTreeMap::new()).expect_err("no content");
    assert!(err.to_string().contains("/steps/draft/output"), "{err}");
    let mut altered = split.contents.clone();
    for content in altered.values_mut() {
        content.replace_range(1..2, "y");
    }
    let err = join(split.status.clone(), &altered).expect_err("altered");
    assert!(matches!(err, OffloadError::Mismatch { .. }), "{err}");
    let mut misplaced = split.status.clone();
    misplaced["values"][0]["path"] = json!("/steps/nope/output");
    let err = join(misplaced, &split.contents).expect_err("no place");
    assert!(err.to_string().contains("/steps/nope/output"), "{err}");
}

#[test]
fn a_split_record_is_not_split_again_and_limits_are_checked() {
    let record = record_with(vec![("draft", step(json!("x".repeat(10_000))))]);
    let split = split(stored(&record), &Limits::default(), &name).expect("split");
    let again = super::split(split.status, &Limits::default(), &name);
    assert!(matches!(
        again,
        Err(OffloadError::AlreadySplit { count: 1 })
    ));
    assert!(matches!(
        Limits::new(100, DEFAULT_BUDGET),
        Err(OffloadError::ThresholdTooSmall { threshold: 100 })
    ));
    assert!(matches!(
        super::split(json!([1]), &Limits::default(), &name),
        Err(OffloadError::NotARecord { found: "a list" })
    ));
}

#[test]
fn a_person_is_shown_previews_of_large_values_only() {
    let show = BTreeMap::from([
        ("draft".to_string(), json!({"body": "b".repeat(50_000)})),
        ("notes".to_string(), json!("short")),
    ]);
    let shown = split_shown(&show, &Limits::default(), &name);
    assert_eq!(shown.show["notes"], "short");
    let preview = shown.show["draft"].as_str().expect("a preview");
    assert!(preview.starts_with(PREVIEW_PREFIX), "{preview}");
    assert_eq!(shown.moved.len(), 1);
    assert_eq!(shown.moved[0].path, "/draft");
    assert!(
        preview.contains(&shown.moved[0].config_maps[0]),
        "{preview}"
    );
    let content = &shown.contents[&shown.moved[0].sha256];
    assert_eq!(
        check(&shown.moved[0], content).expect("content"),
        show["draft"]
    );
}

#[test]
fn pieces_cut_on_characters() {
    let text = format!("{}é{}", "a".repeat(PIECE_BYTES - 1), "b".repeat(10));
    let cut = pieces(&text);
    assert_eq!(cut.len(), 2);
    assert_eq!(cut[0].len(), PIECE_BYTES - 1, "the two-byte é is not split");
    assert_eq!(cut.concat(), text);
    assert_eq!(pieces(""), vec![""]);
}

/// A text of `len` bytes made of `c`.
fn text(c: char, len: usize) -> String {
    std::iter::repeat_n(c, len).collect()
}

/// Sizes from tiny to past a ConfigMap, skewed small.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..2_000, 3 => 2_000usize..40_000, 1 => 40_000usize..1_100_000]
}

fn value() -> impl Strategy<Value = Value> {
    (size(), any::<char>(), 0..3u8).prop_map(|(len, c, shape)| match shape {
        0 => Value::String(text(c, len)),
        1 => json!({"body": text(c, len), "n": len, "tags": ["a", "b"]}),
        _ => json!([text(c, len / 2), null, true]),
    })
}

fn attempt() -> impl Strategy<Value = Attempt> {
    (
        prop::option::of(value()),
        prop::option::of(size()),
        any::<bool>(),
    )
        .prop_map(|(output, text_len, failed)| Attempt {
            number: 1,
            status: if failed {
                StepPhase::Failed
            } else {
                StepPhase::Completed
            },
            output: if failed { None } else { output },
            text: text_len.map(|n| text('t', n)),
            error: failed.then(|| crate::api::StepError {
                code: "workflow.script".into(),
                message: text('e', 3_000),
            }),
            ..Default::default()
        })
}

fn step_record() -> impl Strategy<Value = StepStatus> {
    (
        prop::option::of(value()),
        prop::option::of(size()),
        prop::collection::vec(attempt(), 0..4),
        prop::collection::vec((prop::option::of(value()), prop::option::of(value())), 0..3),
        prop::option::of(value()),
    )
        .prop_map(|(output, text_len, mut attempts, parts, reviewed)| {
            for (i, a) in attempts.iter_mut().enumerate() {
                a.number = i as i32 + 1;
            }
            StepStatus {
                status: StepPhase::Completed,
                output,
                text: text_len.map(|n| text('s', n)),
                attempts,
                parts: parts
                    .into_iter()
                    .enumerate()
                    .map(|(i, (item, output))| PartStatus {
                        key: format!("p{i}"),
                        label: format!("part {i}"),
                        item,
                        status: StepPhase::Completed,
                        output,
                        ..Default::default()
                    })
                    .collect(),
                review: reviewed.map(|r| ReviewNote {
                    from: "review".into(),
                    to: "draft".into(),
                    reviewer: "ana".into(),
                    decision: "changes".into(),
                    instructions: Some(text('i', 2_000)),
                    reviewed: Some(r),
                }),
                ..Default::default()
            }
        })
}

fn run_status() -> impl Strategy<Value = RunStatus> {
    (
        prop::collection::btree_map("[a-z][a-z0-9_]{0,6}", step_record(), 1..5),
        prop::option::of(value()),
    )
        .prop_map(|(steps, output)| RunStatus {
            phase: RunPhase::Succeeded,
            steps,
            output,
            ..Default::default()
        })
}

/// Every text or free-JSON place larger than `max` bytes, by path.
fn large_places(stored: &Value, max: usize) -> Vec<String> {
    let mut places = Vec::new();
    if let Value::Object(map) = stored {
        for (k, v) in map {
            if k != VALUES_FIELD {
                places_in(k, v, format!("/{k}"), &mut places);
            }
        }
    }
    places
        .into_iter()
        .filter(|p| p.bytes > max)
        .map(|p| p.path)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Split then put back gives the same record, also when the split
    /// record was read as a `RunStatus` and written again (as the
    /// controller reads a Run); the split record is under its budget, holds
    /// nothing over the threshold, and every moved place says it is a preview.
    #[test]
    fn split_then_join_is_the_same_status(
        record in run_status(),
        threshold in 1usize << 10..64 << 10,
    ) {
        let original = stored(&record);
        let limits = Limits::new(threshold, DEFAULT_BUDGET).expect("limits");
        let split = split(original.clone(), &limits, &name).expect("split");
        prop_assert!(!split.over_budget(), "{} bytes", split.bytes);
        prop_assert_eq!(split.bytes, split.status.to_string().len());
        let left = large_places(&split.status, threshold);
        prop_assert!(left.is_empty(), "over the threshold: {:?}", left);
        for (path, shown) in previews(&split) {
            prop_assert!(shown.starts_with(PREVIEW_PREFIX), "{}: {}", path, shown);
        }
        let joined = join(split.status.clone(), &split.contents).expect("join");
        prop_assert_eq!(&joined, &original);
        let typed: RunStatus = serde_json::from_value(split.status.clone()).expect("typed");
        // Read as a `RunStatus` and written again, the split record is the same.
        prop_assert_eq!(&stored(&typed), &split.status);
        let again = join(stored(&typed), &split.contents).expect("join typed");
        prop_assert_eq!(&again, &original);
        let back: RunStatus = serde_json::from_value(again).expect("typed back");
        prop_assert_eq!(&stored(&back), &original);
    }
}

#[test]
fn what_a_lookup_found_moves_whole_and_the_record_still_reads() {
    let records: Vec<Value> = (0..200)
        .map(|i| json!({"key": format!("t{i}"), "value": {"n": i, "title": "x".repeat(40)}, "version": 1}))
        .collect();
    let mut triage = step(json!("ok"));
    triage.attempts[0].lookups = Some(json!({"similar": records}));
    let record = record_with(vec![("triage", triage)]);
    let original = stored(&record);
    let split = split(original.clone(), &Limits::default(), &name).expect("split");
    let moved = split.moved().expect("values list");
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0].path, "/steps/triage/attempts/0/lookups");
    // The stored record, with its preview, still reads as a status.
    let preview: RunStatus = serde_json::from_value(split.status.clone()).expect("reads");
    let shown = preview.steps["triage"].attempts[0].lookups.clone();
    assert!(
        shown
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(|s| s.starts_with(PREVIEW_PREFIX)),
        "{shown:?}"
    );
    assert_eq!(join(split.status, &split.contents).expect("join"), original);
}
