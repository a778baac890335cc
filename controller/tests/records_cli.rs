//! The local records path end to end, with the real binary: `coxswain run`
//! saving into and looking up from a SQLite file, `coxswain records list`
//! and `delete`, and `coxswain lint` on a lookup's `where`. Every command
//! names its records file (`--records` in a temporary folder) and runs with
//! `XDG_DATA_HOME` and `HOME` pointed into that folder too, so nothing here
//! can touch the user's own records.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

mod common;

use common::{Place, exits, says, stderr, stdout, succeeded};

/// The temporary folder of one test.
fn place() -> Place {
    Place::new("coxswain-records-cli-")
}

/// The temporary folder of one test, and the TICKETS flow written in it.
fn tickets_place() -> (Place, String) {
    let place = place();
    let flow = place.file("tickets.yaml", TICKETS);
    (place, flow)
}

impl Place {
    /// `coxswain records ARGS --records FILE`.
    fn records_cmd(&self, args: &[&str]) -> Output {
        self.with_records("records", args)
    }

    /// `coxswain run FLOW --records FILE --input INPUT --output json -q`.
    fn run(&self, flow: &str, input: &Value) -> Output {
        self.run_flow(flow, input, &["--output", "json", "--quiet"])
    }

    /// `run` of the TICKETS flow at `flow` on `ticket(id, component,
    /// priority)`: the record of the run, which must succeed.
    fn run_ticket(&self, flow: &str, id: &str, component: &str, priority: i64) -> Value {
        record(&self.run(flow, &ticket(id, component, priority)), 0)
    }
}

/// The record a `coxswain run --output json` printed, after checking its
/// exit code.
fn record(o: &Output, code: i32) -> Value {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    common::record(o)
}

/// A flow: `fetch` echoes its input `ticket` back as output, `remember`
/// saves it into `tickets` under its id, and `triage` looks up the
/// collection before the save and prints the file the lookup became.
const TICKETS: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: tickets}
spec:
  steps:
    - key: triage
      lookup:
        - name: similar
          collection: tickets
          where: '$record.value.component == $input.ticket.component and $record.value.priority >= 2'
          orderBy: $record.savedAt
          descending: true
          limit: 20
      script:
        source: |
          cat "$INPUTS/similar"
    - key: fetch
      script:
        source: |
          cat "$INPUTS/ticket"
      input: {ticket: $input.ticket}
    - key: remember
      save: {collection: tickets, key: $steps.fetch.output.id, value: $steps.fetch.output}
"#;

fn ticket(id: &str, component: &str, priority: i64) -> Value {
    json!({"ticket": {"id": id, "component": component, "priority": priority}})
}

/// The keys of the records a `records list -o json` printed, in order.
fn listed_keys(found: &Value) -> Vec<&str> {
    found
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect()
}

/// What the lookup's file held, as the `triage` script printed it: JSON,
/// so the record keeps it once, as the output (`{"data": v}` read as `v`).
fn similar_file(record: &Value) -> Value {
    let triage = &record["steps"]["triage"];
    assert_eq!(triage["textFromOutput"], true, "{triage}");
    json!({"data": triage["output"]})
}

#[test]
fn a_second_run_looks_up_what_the_first_saved_and_an_empty_collection_is_an_empty_array() {
    let (place, flow) = tickets_place();

    let first = place.run_ticket(&flow, "T-1", "db", 3);
    assert_eq!(
        similar_file(&first),
        json!({"data": []}),
        "nothing saved yet: the lookup's file holds an empty array"
    );
    assert_eq!(
        first["steps"]["triage"]["attempts"][0]["lookups"]["similar"],
        json!([]),
        "the attempt records the lookup: {first}"
    );

    // Started right after the first returned: read-your-writes.
    let second = place.run_ticket(&flow, "T-2", "db", 2);
    let seen = similar_file(&second);
    let seen = seen["data"].as_array().expect("an array under data");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["key"], "T-1");
    assert_eq!(
        seen[0]["value"],
        json!({"id": "T-1", "component": "db", "priority": 3})
    );
    assert_eq!(seen[0]["version"], 1);
    assert_eq!(seen[0]["step"], "remember");
    assert!(
        seen[0]["run"]
            .as_str()
            .is_some_and(|r| r.starts_with("local-")),
        "the record names the run that saved it: {}",
        seen[0]
    );

    // A third run of another component sees nothing; one of `db` sees both,
    // newest first, and not a record of priority 1.
    let other = place.run_ticket(&flow, "T-3", "web", 5);
    assert_eq!(similar_file(&other), json!({"data": []}));
    let _low = place.run_ticket(&flow, "T-4", "db", 1);
    let fourth = place.run_ticket(&flow, "T-5", "db", 9);
    let similar = &fourth["steps"]["triage"]["attempts"][0]["lookups"]["similar"];
    assert_eq!(listed_keys(similar), ["T-2", "T-1"]);
}

#[test]
fn saving_the_same_key_again_adds_a_version() {
    let (place, flow) = tickets_place();
    let first = place.run_ticket(&flow, "T-1", "db", 3);
    assert_eq!(
        first["steps"]["remember"]["output"],
        json!({"collection": "tickets", "key": "T-1", "version": 1, "created": true})
    );
    let second = place.run_ticket(&flow, "T-1", "db", 4);
    assert_eq!(
        second["steps"]["remember"]["output"],
        json!({"collection": "tickets", "key": "T-1", "version": 2, "created": false})
    );
    // One record, the second value.
    let o = place.records_cmd(&["list", "tickets", "-o", "json"]);
    let all = succeeded(&o);
    assert_eq!(all.as_array().map(Vec::len), Some(1), "{all}");
    assert_eq!(all[0]["version"], 2);
    assert_eq!(all[0]["value"]["priority"], 4);
}

#[test]
fn a_where_that_fails_on_a_record_fails_the_step_naming_the_record() {
    let place = place();
    // The notes flows below, saving the value as given and looking up only
    // notes with tags.
    let save = place.file(
        "save.yaml",
        &SAVE_NOTE.replace(
            "value: {w: [[[[[[[[[[$input.value]]]]]]]]]]}",
            "value: $input.value",
        ),
    );
    let read = place.file(
        "read.yaml",
        &READ_NOTES.replace(
            "collection: notes}",
            "collection: notes, where: 'len($record.value.tags) > 0'}",
        ),
    );
    record(
        &place.run(&save, &json!({"key": "good", "value": {"tags": ["a"]}})),
        0,
    );
    record(
        &place.run(
            &save,
            &json!({"key": "untagged", "value": {"title": "no tags"}}),
        ),
        0,
    );
    let failed = record(&place.run(&read, &json!({})), 1);
    assert_eq!(failed["phase"], "Failed", "{failed}");
    let look = &failed["steps"]["look"];
    assert_eq!(look["status"], "failed", "{look}");
    let error = look["error"].to_string();
    assert!(error.contains("`untagged`"), "names the record: {error}");
    assert!(error.contains("`notes`"), "names the collection: {error}");
    assert!(
        !error.contains("`good`"),
        "names only the failing one: {error}"
    );
}

#[test]
fn records_list_prints_a_table_or_json_filtered_and_limited() {
    let (place, flow) = tickets_place();
    for (id, component, priority) in [("T-1", "db", 3), ("T-2", "web", 1), ("T-3", "db", 5)] {
        place.run_ticket(&flow, id, component, priority);
    }

    let o = place.records_cmd(&["list", "tickets"]);
    exits(&o, 0);
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "a header and three records: {text}");
    for column in ["KEY", "VERSION", "SAVED", "RUN/STEP", "VALUE"] {
        assert!(lines[0].contains(column), "{text}");
    }
    // Newest first by default.
    let keys: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(keys, ["T-3", "T-2", "T-1"], "{text}");
    assert!(lines[1].contains("/remember"), "{text}");
    assert!(lines[1].contains(r#""priority":5"#), "{text}");

    let o = place.records_cmd(&[
        "list",
        "tickets",
        "--where",
        r#"$record.value.component == "db""#,
        "-o",
        "json",
    ]);
    let found = succeeded(&o);
    assert_eq!(listed_keys(&found), ["T-3", "T-1"], "{found}");
    for field in ["key", "value", "version", "savedAt", "run", "step"] {
        assert!(
            found[0].get(field).is_some(),
            "a record has {field}: {found}"
        );
    }

    let o = place.records_cmd(&[
        "list",
        "tickets",
        "--order-by",
        "$record.value.priority",
        "--limit",
        "2",
        "-o",
        "json",
    ]);
    let found = succeeded(&o);
    assert_eq!(
        listed_keys(&found),
        ["T-2", "T-1"],
        "lowest priority first, two: {found}"
    );

    // An empty collection: only the header, and a note on stderr.
    let o = place.records_cmd(&["list", "nothing"]);
    exits(&o, 0);
    assert_eq!(stdout(&o).lines().count(), 1, "{}", stdout(&o));
    says(stderr(&o), "no records in `nothing`");
    let o = place.records_cmd(&["list", "nothing", "-o", "json"]);
    assert_eq!(stdout(&o).trim(), "[]");
}

#[test]
fn records_list_refuses_a_bad_where_with_its_character_and_exit_2() {
    let place = place();
    let bad = "$record.value.priority >= 2 AND true";
    let o = place.records_cmd(&["list", "tickets", "--where", bad]);
    exits(&o, 2);
    assert!(
        stderr(&o).contains("--where: character 29"),
        "names where `AND` starts: {}",
        stderr(&o)
    );
    says(stderr(&o), "`and`");
    assert_eq!(stdout(&o), "");

    let o = place.records_cmd(&["list", "tickets", "--where", "$steps.fetch.output == 1"]);
    exits(&o, 2);
    says(stderr(&o), "only `$record`");

    let o = place.records_cmd(&["list", "tickets", "--limit", "0"]);
    exits(&o, 2);
}

#[test]
fn records_delete_exits_0_for_a_record_and_1_for_none() {
    let (place, flow) = tickets_place();
    place.run_ticket(&flow, "T-1", "db", 3);
    place.run_ticket(&flow, "T-2", "db", 3);

    // `--records` before the subcommand works as well as after it.
    let records = place.records();
    let o = place.coxswain(&["records", "--records", &records, "delete", "tickets", "T-1"]);
    exits(&o, 0);
    says(stderr(&o), "deleted `T-1`");

    let o = place.records_cmd(&["list", "tickets", "-o", "json"]);
    let left: Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(left.as_array().map(Vec::len), Some(1), "{left}");
    assert_eq!(left[0]["key"], "T-2");

    let o = place.records_cmd(&["delete", "tickets", "T-1"]);
    exits(&o, 1);
    says(stderr(&o), "no record `T-1`");

    // Another namespace's record of the same key is not this one.
    let o = place.records_cmd(&["delete", "-n", "team-a", "tickets", "T-2"]);
    exits(&o, 1);

    // Saved again after a delete, a key starts over.
    let again = place.run_ticket(&flow, "T-1", "db", 3);
    assert_eq!(
        again["steps"]["remember"]["output"],
        json!({"collection": "tickets", "key": "T-1", "version": 1, "created": true})
    );
}

#[test]
fn records_reads_the_file_named_by_the_environment() {
    let (place, flow) = tickets_place();
    place.run_ticket(&flow, "T-1", "db", 3);
    let o = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(["records", "list", "tickets", "-o", "json"])
        .env("COXSWAIN_RECORDS", place.records())
        .env("XDG_DATA_HOME", place.dir.path().join("data"))
        .env("HOME", place.dir.path())
        .output()
        .expect("coxswain runs");
    let found = succeeded(&o);
    assert_eq!(found[0]["key"], "T-1", "{found}");

    // Without a setting, the file lives under XDG_DATA_HOME.
    let o = place.coxswain(&[
        "run",
        &flow,
        "--input",
        &ticket("T-9", "db", 3).to_string(),
        "-q",
    ]);
    exits(&o, 0);
    let default: PathBuf = place.dir.path().join("data/coxswain/records.sqlite3");
    assert!(default.exists(), "{} was made", default.display());
}

#[test]
fn lint_names_the_line_and_column_of_a_bad_where() {
    let place = place();
    for (bad, message) in [
        (
            "$record.value.component == \"db\" AND $record.value.priority >= 2",
            "write `and` in lowercase, not `AND`",
        ),
        ("$record.valu.priority >= 2", "`valu` isn't a field here"),
    ] {
        let flow = place.file(
            "bad.yaml",
            &format!(
                r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: bad}}
spec:
  steps:
    - key: look
      lookup:
        - name: similar
          collection: tickets
          where: '{bad}'
      script:
        source: cat "$INPUTS/similar"
"#
            ),
        );
        let o = place.coxswain(&["lint", &flow]);
        assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
        let all = format!("{}{}", stdout(&o), stderr(&o));
        // `where: '` ends 18 characters into line 10; the column is the
        // problem's character in the file.
        let at = bad.find("AND").unwrap_or_else(|| bad.find("valu").unwrap());
        let column = 18 + at + 1;
        assert!(
            all.contains(&format!("line 10, column {column}")),
            "{bad}: line and column: {all}"
        );
        assert!(all.contains("lookup[0].where"), "{all}");
        assert!(all.contains(message), "{all}");
    }
}

#[test]
fn a_flow_that_saves_without_a_records_file_exits_2_saying_why() {
    let (place, flow) = tickets_place();
    let input = ticket("T-1", "db", 3).to_string();
    let o = place.coxswain(&[
        "run",
        &flow,
        "--records",
        "/proc/nope/x.sqlite3",
        "--input",
        &input,
    ]);
    exits(&o, 2);
    says(
        stderr(&o),
        "opening the records database /proc/nope/x.sqlite3",
    );
    assert_eq!(stdout(&o), "", "nothing ran");

    // A flow that neither saves nor looks up runs all the same, with a
    // warning that it is not archived.
    let plain = place.file(
        "plain.yaml",
        r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: plain}
spec:
  steps:
    - key: hi
      script: {source: echo hi}
"#,
    );
    let o = place.coxswain(&["run", &plain, "--records", "/proc/nope/x.sqlite3"]);
    exits(&o, 0);
    says(stderr(&o), "warning: the run will not be archived");
}

/// JSON text of `depth` nested lists around a number.
fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

const SAVE_NOTE: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: save}
spec:
  steps:
    - key: remember
      save: {collection: notes, key: $input.key, value: {w: [[[[[[[[[[$input.value]]]]]]]]]]}}
"#;

const READ_NOTES: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: read}
spec:
  steps:
    - key: look
      lookup:
        - {name: found, collection: notes}
      script:
        source: cat "$INPUTS/found"
"#;

#[test]
fn a_save_nested_deeper_than_an_output_is_refused_naming_the_limit() {
    let place = place();
    let save = place.file("save.yaml", SAVE_NOTE);
    // 60 levels of input, 11 more from the flow's `value`.
    let deep: Value = serde_json::from_str(&nested(60)).expect("JSON");
    let failed = record(&place.run(&save, &json!({"key": "k", "value": deep})), 1);
    let error = &failed["steps"]["remember"]["error"];
    assert_eq!(error["code"], "workflow.output_error", "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("record `k` of collection `notes` cannot be saved")
            && message.contains("71 levels deep; at most 64"),
        "{message}"
    );
    let listed = place.records_cmd(&["list", "notes", "-o", "json"]);
    assert_eq!(
        stdout(&listed).trim(),
        "[]",
        "nothing saved: {}",
        stderr(&listed)
    );
    // Within the bound it is saved.
    let fine: Value = serde_json::from_str(&nested(50)).expect("JSON");
    record(&place.run(&save, &json!({"key": "k", "value": fine})), 0);
}

#[test]
fn a_row_that_cannot_be_read_fails_the_lookup_and_the_list_naming_it() {
    let place = place();
    let save = place.file("save.yaml", SAVE_NOTE);
    let read = place.file("read.yaml", READ_NOTES);
    record(&place.run(&save, &json!({"key": "fine", "value": 1})), 0);
    // A row past serde_json's 128 levels, written behind the store's back.
    let c = rusqlite::Connection::open(place.records()).expect("the records file");
    c.execute(
        "INSERT INTO records VALUES ('local', 'notes', 'eve', ?1, 1, \
         '2026-05-01T09:30:00.000000Z', 'r', 's')",
        [nested(142)],
    )
    .expect("planted");
    drop(c);
    let failed = record(&place.run(&read, &json!({})), 1);
    let error = &failed["steps"]["look"]["error"];
    assert_eq!(error["code"], "records.lookup_failed", "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message
            .starts_with("lookup `found`: record `eve` of collection `notes` cannot be read back")
            && !message.contains("failed looking records up"),
        "{message}"
    );
    let listed = place.records_cmd(&["list", "notes"]);
    assert_eq!(listed.status.code(), Some(1), "{}", stdout(&listed));
    assert!(
        stderr(&listed).contains("record `eve` of collection `notes` cannot be read back")
            && stderr(&listed).contains("coxswain records delete notes eve"),
        "{}",
        stderr(&listed)
    );
    let deleted = place.records_cmd(&["delete", "notes", "eve"]);
    exits(&deleted, 0);
    let found = record(&place.run(&read, &json!({})), 0);
    assert_eq!(found["steps"]["look"]["status"], "completed", "{found}");
}
