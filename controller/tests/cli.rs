//! The command-line contracts of `coxswain eval`, `render`, `lint` and
//! `graph`: exit codes, stdout and the first words of stderr, as documented.

use std::process::{Command, Output};

mod common;

use common::{coxswain, exits, says, stderr, stdout, temp_file};

const CONTEXT: &str = r#"{
  "input": {"brief": "Rust", "tags": ["a", "b"], "count": 3},
  "steps": {
    "review": {"status": "completed", "output": {"score": 0.9, "approved": true}, "text": "fine"},
    "fetch": {"status": "completed", "output": {"id": "a/b?c", "title": "He said \"hi\"\n"}, "text": "raw"}
  },
  "loop": {"iteration": 2}
}"#;

/// `coxswain eval --context CONTEXT EXPRESSION`.
fn eval_in(context: &str, expression: &str) -> Output {
    coxswain(&["eval", "--context", context, expression])
}

/// `coxswain render --where PLACE --context CONTEXT TEMPLATE`.
fn render_in(place: &str, context: &str, template: &str) -> Output {
    coxswain(&["render", "--where", place, "--context", context, template])
}

/// Checks that `coxswain` exited 0 having printed exactly `text`.
fn prints(o: &Output, text: &str) {
    assert_eq!((o.status.code(), stdout(o)), (Some(0), text.to_string()));
}

#[test]
fn eval_prints_the_value_as_json_on_one_line() {
    let ctx = temp_file("eval.json", CONTEXT);
    let ctx = ctx.to_str().unwrap();
    let o = eval_in(
        ctx,
        "$steps.review.output.score >= 0.8 and $loop.iteration < 3",
    );
    prints(&o, "true\n");
    let o = eval_in(ctx, "$input.tags");
    assert_eq!(stdout(&o), "[\"a\",\"b\"]\n");
    let o = eval_in(ctx, "$input.missing.deeper");
    prints(&o, "null\n");
}

#[test]
fn eval_runtime_error_exits_1_with_the_code_first() {
    let o = coxswain(&["eval", "$steps.score.output.value > 0.8"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("workflow.expression_error: "),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("$steps.score.output.value > 0.8"),
        "names the expression: {}",
        stderr(&o)
    );
    let o = coxswain(&["eval", "len($input.nothing)"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn eval_refused_expression_exits_2_naming_the_character() {
    let o = coxswain(&["eval", "$input.x == True"]);
    assert_eq!(o.status.code(), Some(2));
    says(stderr(&o), "character 13");
    let o = coxswain(&["eval", "1 < $input.x < 5"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn eval_takes_an_expression_that_starts_with_a_minus() {
    let o = coxswain(&["eval", "-1 < 0"]);
    assert_eq!(
        (o.status.code(), stdout(&o), stderr(&o)),
        (Some(0), "true\n".to_string(), String::new())
    );
    let ctx = temp_file("minus.json", CONTEXT);
    let ctx = ctx.to_str().unwrap();
    let o = coxswain(&["eval", "-3 == 0 - $input.count", "--context", ctx]);
    exits(&o, 2);
    let o = coxswain(&["eval", "-3 < $input.count", "--context", ctx]);
    prints(&o, "true\n");
}

#[test]
fn render_takes_a_template_that_starts_with_a_minus() {
    let ctx = temp_file("minus-render.json", CONTEXT);
    let ctx = ctx.to_str().unwrap();
    let o = coxswain(&[
        "render",
        "--where",
        "text",
        "-{{input.json.count}}",
        "--context",
        ctx,
    ]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (Some(0), "-3".to_string()),
        "{}",
        stderr(&o)
    );
}

#[test]
fn render_encodes_for_each_place() {
    let ctx = temp_file("render.json", CONTEXT);
    let ctx = ctx.to_str().unwrap();
    let o = render_in("url", ctx, "https://x.example/items/{{fetch.json.id}}");
    prints(&o, "https://x.example/items/a%2Fb%3Fc");
    let o = render_in(
        "json",
        ctx,
        r#"{"t": "{{fetch.json.title}}", "tags": {{input.json.tags}}}"#,
    );
    assert_eq!(
        stdout(&o),
        r#"{"t": "He said \"hi\"\n", "tags": ["a","b"]}"#
    );
    let o = render_in("text", ctx, "{{review.text}} / {{input.json.count}}");
    assert_eq!(stdout(&o), "fine / 3");
}

#[test]
fn render_missing_value_exits_1_with_the_exact_message() {
    let o = coxswain(&["render", "--where", "text", "Hello {{a.b}}"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "`b` is not a path: {}",
        stderr(&o)
    );
    let o = coxswain(&["render", "--where", "message", "Hello {{draft.json.title}}"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim_end(),
        "No value for {{draft.json.title}}: that step did not run or did not produce it."
    );
}

#[test]
fn render_refuses_a_line_break_in_a_header() {
    let ctx = temp_file("header.json", CONTEXT);
    let o = coxswain(&[
        "render",
        "--where",
        "header",
        "--context",
        ctx.to_str().unwrap(),
        "{{fetch.json.title}}",
    ]);
    assert_eq!(o.status.code(), Some(1));
    says(stderr(&o), "line break");
}

#[test]
fn render_malformed_template_exits_2() {
    let o = coxswain(&["render", "--where", "url", "https://x/{{fetch.json.id"]);
    assert_eq!(o.status.code(), Some(2));
    let o = coxswain(&[
        "render",
        "--where",
        "json",
        r#"{"a": {{fetch.json.id}} "b": 1}"#,
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn lint_passes_the_examples() {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let o = coxswain(&["lint", examples]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "");
}

/// `coxswain lint FILE`, checked to have found problems (exit code 1),
/// and the lines it printed.
fn lint_problems(file: &str) -> (Output, Vec<String>) {
    let o = coxswain(&["lint", file]);
    assert_eq!(o.status.code(), Some(1));
    let lines = stdout(&o).lines().map(String::from).collect();
    (o, lines)
}

/// `coxswain lint --output json FILE` and what it printed.
fn lint_json(file: &str) -> (Output, serde_json::Value) {
    let o = coxswain(&["lint", "--output", "json", file]);
    let json = serde_json::from_slice(&o.stdout).expect("JSON output");
    (o, json)
}

#[test]
fn lint_prints_one_line_per_problem_and_exits_1() {
    let flow = temp_file(
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n---\napiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: broken}\nspec:\n  steps:\n  - key: a\n    agent: {prompt: hi}\n    when: $input.x == True\n  - key: b\n    agent: {prompt: hi}\n    when: $steps.zz.output\n",
    );
    let file = flow.to_str().unwrap();
    let (_, lines) = lint_problems(file);
    assert_eq!(
        lines,
        [
            format!(
                "{file}: flow broken: line 12, column 23: step a: when: write `true` in lowercase, not `True`"
            ),
            format!(
                "{file}: flow broken: line 15, column 18: step b: when: no step has the key `zz`"
            ),
        ]
    );
    let (o, json) = lint_json(file);
    assert_eq!(json[1]["step"], "b");
    assert_eq!(json[1]["character"], 8);
    assert_eq!(
        (&json[1]["line"], &json[1]["column"]),
        (&15.into(), &18.into())
    );
    assert_eq!(o.status.code(), Some(1));
}

/// A flow full of YAML 1.1 traps: every scalar kubectl and Argo CD read
/// otherwise, or refuse, is named with its line, column and the quoted fix.
const TRAPS: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: traps}
spec:
  description: Every bare word kubectl reads otherwise
  steps:
    - key: ask
      when: True
      script:
        source: echo "$LOUD"
        env:
          - {name: LOUD, value: on}
          - {name: QUIET, value: false}
      input: {n: 1, Yes: 2, OFF: 3, mode: 0755, budget: 1_000, plain: 10, t: true}
    - key: check
      condition: {when: true}
    - key: done
      after: [check.true]
      description: 2024
      script: {command: [echo, y], args: [NO]}
"#;

#[test]
fn lint_names_every_yaml_1_1_trap_with_its_place_and_fix() {
    let flow = temp_file("traps.yaml", TRAPS);
    let file = flow.to_str().unwrap();
    let (o, lines) = lint_problems(file);
    let traps = [
        "line 8, column 13: the value `True` is the boolean true to kubectl and Argo CD, and the API server refuses it: `when` takes text (an expression); quote it: \"true\"",
        "line 12, column 33: the value `on` is text here, but kubectl and Argo CD (YAML 1.1) read it as true; quote it: \"on\"",
        "line 13, column 34: the value `false` is the boolean false to kubectl and Argo CD, and the API server refuses it: `value` takes text; quote it: \"false\"",
        "line 14, column 15: the key `n` is text here, but kubectl and Argo CD (YAML 1.1) read it as false; quote it: \"n\"",
        "line 14, column 21: the key `Yes` is text here, but kubectl and Argo CD (YAML 1.1) read it as true; quote it: \"Yes\"",
        "line 14, column 29: the key `OFF` is text here, but kubectl and Argo CD (YAML 1.1) read it as false; quote it: \"OFF\"",
        "line 14, column 43: the value `0755` is text here, but kubectl and Argo CD (YAML 1.1) read it as the octal number 493; quote it: \"0755\"",
        "line 14, column 57: the value `1_000` is text here, but kubectl and Argo CD (YAML 1.1) read it as the number 1000; quote it: \"1_000\"",
        "line 16, column 25: the value `true` is the boolean true to kubectl and Argo CD, and the API server refuses it: `when` takes text (an expression); quote it: \"true\"",
        "line 19, column 20: the value `2024` is the number 2024 to kubectl and Argo CD, and the API server refuses it: `description` takes text; quote it: \"2024\"",
        "line 20, column 32: the value `y` is text here, but kubectl and Argo CD (YAML 1.1) read it as true; quote it: \"y\"",
        "line 20, column 43: the value `NO` is text here, but kubectl and Argo CD (YAML 1.1) read it as false; quote it: \"NO\"",
    ];
    let mut expected = vec![format!(
        "{file}: flow traps: line 8, column 13: step ask: when: write `true` in lowercase and quoted (`\"true\"`), not `True`: in YAML a bare true is a boolean, and kubectl refuses it where an expression (text) is expected"
    )];
    expected.extend(traps.iter().map(|t| format!("{file}: flow traps: {t}")));
    assert_eq!(lines, expected);
    assert_eq!(stderr(&o), "checked 1 flow in 1 file: 13 problems\n");

    // Quoted as lint says, the file has nothing left to report.
    let mended = TRAPS
        .replace("when: True", "when: \"true\"")
        .replace("value: on", "value: \"on\"")
        .replace("value: false", "value: \"false\"")
        .replace(
            "{n: 1, Yes: 2, OFF: 3, mode: 0755, budget: 1_000,",
            "{\"n\": 1, \"Yes\": 2, \"OFF\": 3, mode: \"0755\", budget: \"1_000\",",
        )
        .replace("{when: true}", "{when: \"true\"}")
        .replace("description: 2024", "description: \"2024\"")
        .replace("[echo, y], args: [NO]", "[echo, \"y\"], args: [\"NO\"]");
    let flow = temp_file("mended.yaml", &mended);
    let o = coxswain(&["lint", flow.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stdout(&o), "");
}

#[test]
fn lint_reports_yaml_that_does_not_fit_the_schema() {
    let flow = temp_file(
        "typo.yaml",
        "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: typo}\nspec:\n  steps:\n  - key: a\n    agent: {prompt: hi}\n    atempts: 2\n",
    );
    let o = coxswain(&["lint", flow.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    says(stdout(&o), "flow typo: ");
    says(stdout(&o), "atempts");
}

/// A file full of problems, in two Flows beside another kind: a typo in one
/// step, real problems in the others, a bad `after`, a step read before it
/// runs, a value of the wrong type and problems inside list entries.
const MANY: &str = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: other}
data: {nope: "1"}
---
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: release}
spec:
  steps:
    - key: draft
      atempts: 2
      input: {brief: $input.brief, notes: [$input.notes, "$nots.x"]}
      agent:
        prompt: Write the release notes.
        reply: {format: json, fields: [{name: title, type: string}, {name: tags, type: list}]}
    - key: review
      after: [drfat]
      input: {text: $steps.draft.text, final: $steps.publish.output}
      approval:
        decisons: [approve, changes]
        show: [draft]
      sendBack: [{exit: changes, to: draft}]
    - key: publish
      after: [review.approve]
      timeout: [5m]
      when: |
        $steps.draft.output.title != null
          and True
      http:
        url: "https://cms.example.com/posts/{{draft.json.id}}"
        headers:
          - {name: X-Title, value: "{{draft.text}}"}
          - {name: "Content Length", value: "1"}
---
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: second}
spce: {}
"#;

/// Lint keeps going past an unknown key and a value of the wrong type: every
/// problem of every step is reported, once, on its line and column; the bad
/// `after` brings no false problems with it (`review` still reads `draft`,
/// sends back to it and gives `publish` its `approve` exit), and the step
/// read before it runs is said to run later.
#[test]
fn lint_reports_every_problem_of_every_step_with_its_place() {
    let flow = temp_file("many.yaml", MANY);
    let file = flow.to_str().unwrap();
    let (o, lines) = lint_problems(file);
    let expected = [
        "release: line 12, column 7: step draft: atempts: `atempts` is not a field of a step (did you mean `attempts`?)",
        "release: line 13, column 60: step draft: input.notes[1]: unknown reference `$nots`; a reference starts with $input, $steps, $previous, $loop, $item, $index or $run (and $record in a lookup)",
        "release: line 16, column 88: step draft: agent.reply.fields[1].type: `list` is not a field type; use one of string, number, integer, boolean, array, object",
        "release: line 18, column 15: step review: after[0]: no step has the key `drfat` (did you mean `draft`?)",
        "release: line 19, column 54: step review: input.final: `publish` runs later than this step, so its data cannot be read here; a step reads a later one only when both are inside the same loop",
        "release: line 21, column 9: step review: approval.decisons: `decisons` is not a field of `approval` (did you mean `decisions`?)",
        "release: line 26, column 7: step publish: timeout: invalid type: a list, expected a string",
        "release: line 29, column 15: step publish: when: write `true` in lowercase, not `True`",
        "release: line 31, column 45: step publish: http.url: `draft` yields `title`, `tags`; it has no `id`",
        "release: line 34, column 20: step publish: http.headers[1].name: `Content Length` is not a header name",
        "second: line 39, column 1: spce: `spce` is not a field of a Flow (did you mean `spec`?)",
        "second: line 39, column 1: spec: missing field `steps`",
    ];
    let expected: Vec<String> = expected
        .iter()
        .map(|line| format!("{file}: flow {line}"))
        .collect();
    assert_eq!(lines, expected);
    assert_eq!(stderr(&o), "checked 2 flows in 1 file: 12 problems\n");

    // Machines get the same places, beside the character of the field.
    let (_, json) = lint_json(file);
    let notes = &json[1];
    assert_eq!(
        (
            &notes["field"],
            &notes["character"],
            &notes["line"],
            &notes["column"]
        ),
        (&"input.notes[1]".into(), &2.into(), &13.into(), &60.into())
    );
    assert_eq!(json[0]["flow"], "release");
    assert_eq!(json[10]["flow"], "second");
}

#[test]
fn lint_of_a_missing_path_fails() {
    let o = coxswain(&["lint", "/nonexistent/flows"]);
    assert_eq!(o.status.code(), Some(1));
    says(stdout(&o), "cannot read");
}

/// The path of the hello example.
fn hello_example() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/hello.yaml").to_string()
}

/// `coxswain run HELLO` for Ada, quietly, with JSON output; checked to
/// succeed.
fn run_hello(hello: &str) -> Output {
    let run = coxswain(&[
        "run",
        hello,
        "--input",
        r#"{"names": ["Ada"], "loud": false}"#,
        "--output",
        "json",
        "--quiet",
    ]);
    exits(&run, 0);
    run
}

/// `coxswain graph FLOW --record RECORD --format FORMAT`, checked to
/// succeed.
fn graph(flow: &str, record: &str, format: &str) -> Output {
    let o = coxswain(&["graph", flow, "--record", record, "--format", format]);
    exits(&o, 0);
    o
}

#[test]
fn graph_draws_a_run_from_its_record() {
    let hello = hello_example();
    let run = run_hello(&hello);
    let record = temp_file("hello-record.json", &stdout(&run));
    let record = record.display().to_string();

    let m = coxswain(&["graph", &hello, "--record", &record]);
    exits(&m, 0);
    let m = stdout(&m);
    assert!(m.starts_with("flowchart TD\n"), "{m}");
    assert!(m.contains("n3[\"whisper<br/>script · completed\"]"), "{m}");
    assert!(m.contains("n2[\"shout<br/>script · skipped\"]"), "{m}");
    assert!(m.contains("n1 ==>|\"false: "), "the taken exit: {m}");
    assert!(
        m.contains("n1 -.->|\"true: #96;check#96; took exit #96;false#96;\"| n2"),
        "{m}"
    );
    assert!(m.contains("class n2 skipped"), "{m}");

    // A whole Run object works too, and DOT is the other language.
    let as_run = format!(
        r#"{{"apiVersion": "coxswain.dev/v1alpha1", "kind": "Run", "metadata": {{"name": "r"}}, "spec": {{"flowRef": {{"name": "hello"}}}}, "status": {}}}"#,
        stdout(&run)
    );
    let run_file = temp_file("hello-run.json", &as_run);
    let d = stdout(&graph(&hello, &run_file.display().to_string(), "dot"));
    assert!(d.starts_with("digraph flow {"), "{d}");
    assert!(
        d.contains("n3 [label=\"whisper\\nscript · completed\", fillcolor=\"#d3f9d8\"];"),
        "{d}"
    );
    assert!(d.contains("style=dashed"), "{d}");
}

#[test]
fn graph_reads_a_run_whose_large_values_moved_out() {
    let hello = hello_example();
    let run = run_hello(&hello);
    let mut record: serde_json::Value = serde_json::from_str(&stdout(&run)).expect("record");
    assert_eq!(record.get("values"), None, "nothing moves locally");
    // As the controller stores it: a large text moved into ConfigMaps.
    record["steps"]["whisper"]["text"] = serde_json::json!("w".repeat(20_000));
    let name = |sha: &str, i: usize| format!("r-value-{}-{i}", &sha[..16]);
    let split = coxswain_core::api::offload::split(
        record,
        &coxswain_core::api::offload::Limits::default(),
        &name,
    )
    .expect("split");
    let moved = split.moved().expect("values");
    assert_eq!(moved.len(), 1, "{moved:?}");
    let as_run = serde_json::json!({
        "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run", "metadata": {"name": "r"},
        "spec": {"flowRef": {"name": "hello"}}, "status": split.status
    });
    let file = temp_file("moved-run.json", &as_run.to_string());
    for (format, comment) in [("mermaid", "%%"), ("dot", "//")] {
        let o = graph(&hello, &file.display().to_string(), format);
        let out = stdout(&o);
        let note = format!(
            "{comment} moved out of the status: /steps/whisper/text (20002 bytes, sha256 {}) is in ConfigMap {}\n",
            moved[0].sha256, moved[0].config_maps[0]
        );
        assert!(out.ends_with(&note), "{out}");
        assert!(out.contains("whisper"), "{out}");
        assert!(stderr(&o).starts_with("note: 1 value(s)"), "{}", stderr(&o));
    }
}

#[test]
fn graph_says_what_is_wrong_with_its_input() {
    let hello = hello_example();
    let bad = temp_file("not-a-record.json", r#"{"phase": 7}"#);
    let o = coxswain(&["graph", &hello, "--record", &bad.display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
    says(stderr(&o), "is not a run's record");
    let o = coxswain(&["graph", &hello, "--flow", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    says(stderr(&o), "no Flow named nope");
}

/// Runs coxswain, killing it if it has not finished after a minute: a walk
/// or a read that never ends fails the test instead of hanging it.
fn coxswain_or_kill(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_coxswain"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("coxswain starts");
    for _ in 0..600 {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().expect("kill");
    let o = child.wait_with_output().expect("output");
    panic!("coxswain {args:?} never finished: {}", stderr(&o));
}

const SMALL_FLOW: &str = "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: small}\nspec:\n  steps:\n  - key: a\n    script: {source: 'true'}\n";

#[test]
fn lint_does_not_follow_links_to_directories() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("flow.yaml"), SMALL_FLOW).expect("flow");
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).expect("sub");
    std::os::unix::fs::symlink("..", sub.join("up1")).expect("link");
    std::os::unix::fs::symlink("..", sub.join("up2")).expect("link");
    // A link to a file is read like the file.
    std::os::unix::fs::symlink("../flow.yaml", sub.join("again.yaml")).expect("link");
    let o = coxswain_or_kill(&["lint", dir.path().to_str().unwrap()]);
    assert_eq!(
        (o.status.code(), stdout(&o), stderr(&o)),
        (
            Some(0),
            String::new(),
            "checked 2 flows in 2 files: 0 problems\n".to_string()
        )
    );
}

#[test]
fn lint_reports_a_fifo_without_opening_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("flow.yaml");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    for path in [dir.path(), fifo.as_path()] {
        let o = coxswain_or_kill(&["lint", path.to_str().unwrap()]);
        exits(&o, 1);
        assert_eq!(
            stdout(&o),
            format!(
                "{}: flow ?: flow {} is not a regular file (it is a FIFO)\n",
                fifo.display(),
                fifo.display()
            )
        );
    }
}

#[test]
fn lint_reads_a_character_device_named_on_the_command_line_no_further_than_saying_what_it_is() {
    let o = coxswain_or_kill(&["lint", "/dev/zero"]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (
            Some(1),
            "/dev/zero: flow ?: flow /dev/zero is not a regular file (it is a device)\n"
                .to_string()
        )
    );
}

#[test]
fn graph_record_and_eval_context_stop_reading_at_16_mib() {
    let hello = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/hello.yaml");
    let o = coxswain_or_kill(&["graph", hello, "--record", "/dev/zero"]);
    assert_eq!(
        (o.status.code(), stderr(&o)),
        (
            Some(2),
            "record /dev/zero is larger than 16 MiB: reading stopped there\n".to_string()
        )
    );
    let o = coxswain_or_kill(&["eval", "1", "--context", "/dev/zero"]);
    assert_eq!(
        (o.status.code(), stderr(&o)),
        (
            Some(2),
            "coxswain eval: context /dev/zero is larger than 16 MiB: reading stopped there\n"
                .to_string()
        )
    );
    let o = coxswain_or_kill(&["render", "--where", "text", "x", "--context", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(2));
    says(stderr(&o), "larger than 16 MiB");
}

#[test]
fn graph_refuses_a_record_that_is_not_of_this_flow() {
    let hello = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/hello.yaml");
    let empty = temp_file("empty-record.json", "{}");
    let o = coxswain(&["graph", hello, "--record", empty.to_str().unwrap()]);
    assert_eq!(
        (o.status.code(), stdout(&o), stderr(&o)),
        (
            Some(2),
            String::new(),
            format!(
                "record {} is not a run's record: it has no `phase`\n",
                empty.display()
            )
        )
    );
    let other = temp_file(
        "other-record.json",
        r#"{"phase": "Succeeded", "steps": {"draft": {"status": "completed"}}}"#,
    );
    let o = coxswain(&["graph", hello, "--record", other.to_str().unwrap()]);
    assert_eq!(
        (o.status.code(), stderr(&o)),
        (
            Some(2),
            format!(
                "record {} is not a run of flow hello: it names steps the flow does not have: `draft`\n",
                other.display()
            )
        )
    );
    let nothing_ran = temp_file("nothing-ran.json", r#"{"phase": "Succeeded"}"#);
    let o = coxswain(&["graph", hello, "--record", nothing_ran.to_str().unwrap()]);
    exits(&o, 2);
    assert!(
        stderr(&o).ends_with("none of the flow's steps ran\n"),
        "{}",
        stderr(&o)
    );
    // A fresh record, before any step ran, is drawn: every step pending.
    let fresh = temp_file("fresh.json", r#"{"phase": "Pending"}"#);
    let o = coxswain(&["graph", hello, "--record", fresh.to_str().unwrap()]);
    exits(&o, 0);
    says(stdout(&o), "check<br/>condition · pending");
}
