//! Every rule of the validator ("when you save"), one test each, through the
//! same entry point the webhook and `coxswain lint` use.

use coxswain_core::api::{FlowSpec, StepProblem};
use coxswain_core::flow::validate;

/// Validates a flow spec written as YAML.
fn check(spec: &str) -> Vec<StepProblem> {
    let spec: FlowSpec = serde_yaml::from_str(spec).expect("test spec is well-formed YAML");
    validate(&spec)
}

/// Asserts exactly one problem whose step, field and message fragment match.
fn assert_one(problems: &[StepProblem], step: &str, field: &str, fragment: &str) -> Option<i32> {
    assert_eq!(problems.len(), 1, "expected one problem, got {problems:#?}");
    let p = &problems[0];
    assert_eq!((p.step.as_str(), p.field.as_str()), (step, field), "{p:#?}");
    assert!(
        p.message.contains(fragment),
        "message {:?} lacks {fragment:?}",
        p.message
    );
    p.character
}

const WRITE: &str = "agent: {prompt: Write it.}";
const SCORED: &str =
    "agent: {prompt: Score it., reply: {format: json, fields: [{name: score, type: number}]}}";

#[test]
fn a_valid_flow_has_no_problems() {
    let problems = check(
        r#"
steps:
  - key: draft
    agent:
      prompt: Write it.
      reply: {format: json, fields: [{name: id, type: integer}, {name: title, type: string}, {name: tags, type: array}]}
    input: {brief: $input.brief, price: "$$5"}
  - key: review
    approval: {decisions: [approve, changes], show: [draft]}
    sendBack: [{exit: changes, to: draft}]
  - key: publish
    after: [review.approve]
    http:
      method: POST
      url: "https://cms.example.com/posts/{{draft.json.id}}"
      headers: [{name: X-Title, value: "{{draft.text}}"}]
      body: {json: '{"title": "{{draft.json.title}}", "tags": {{draft.json.tags}}}'}
      keep: {url: json.url}
output: {url: $steps.publish.output.values.url}
"#,
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_read_into_a_declared_output_is_typed_when_the_flow_is_saved() {
    let flow = |read: &str| {
        check(&format!(
            r#"
steps:
  - key: write
    agent:
      prompt: Write it.
      reply: {{format: json, fields: [{{name: tagline, type: string}}]}}
  - key: notes
    script:
      source: x
      output: {{items: {{fields: [{{name: owner, type: string}}, {{name: due, type: integer}}]}}}}
  - key: plan
    agent:
      prompt: Plan it.
      reply:
        format: json
        objects:
          - {{name: summary, fields: [{{name: text, type: string}}]}}
          - {{name: risks, items: {{}}}}
  - key: say
    {WRITE}
  - key: use
    condition: {{when: '{read}'}}
"#
        ))
    };
    for fine in [
        "$steps.write.output.tagline == \"x\"",
        "$steps.notes.output.items[0].owner == \"ana\"",
        "$steps.plan.output.risks[2] == 1",
        "$steps.plan.output.summary.text == \"\"",
        "$steps.say.output == \"hi\"",
    ] {
        assert!(flow(fine).is_empty(), "{fine}: {:#?}", flow(fine));
    }
    let c = assert_one(
        &flow("$steps.write.output.taglin == \"x\""),
        "use",
        "condition.when",
        "`write` yields `tagline`, not `taglin`",
    );
    assert_eq!(c, Some(1));
    assert_one(
        &flow("$steps.notes.output.owner == \"ana\""),
        "use",
        "condition.when",
        "`notes` yields a list, kept under `items`: read `items[0]`, not `owner`",
    );
    assert_one(
        &flow("$steps.plan.output.summary.txt == \"\""),
        "use",
        "condition.when",
        "`summary` yields `text`, not `txt`",
    );
    assert_one(
        &flow("$steps.say.output.title == \"\""),
        "use",
        "condition.when",
        "`say` yields text, so its output has no `title`",
    );
}

#[test]
fn a_placeholder_into_a_declared_output_is_typed_too() {
    let problems = check(
        r#"
steps:
  - key: plan
    agent:
      prompt: Plan it.
      reply:
        format: json
        objects:
          - {name: summary, fields: [{name: text, type: string}]}
          - {name: risks, items: {fields: [{name: what, type: string}]}}
  - key: post
    message:
      text: "Top risk: {{plan.json.risks.0.what}}; {{plan.json.risk.0}}"
      webhook: {url: "https://hooks.example.com/x"}
"#,
    );
    let c = assert_one(
        &problems,
        "post",
        "message.text",
        "`plan` yields `risks`, not `risk`",
    );
    assert_eq!(c, Some(39));
}

#[test]
fn a_declared_output_takes_one_shape() {
    let problems = check(
        r#"
steps:
  - key: both
    script:
      source: x
      output:
        fields: [{name: a, type: string}]
        items: {fields: [{name: "b c", type: string}]}
  - key: objects
    agent:
      prompt: x
      reply:
        format: json
        objects: [{name: a}, {name: a, fields: [{name: x, type: string}], items: {}}]
"#,
    );
    let found: Vec<(&str, &str)> = problems
        .iter()
        .map(|p| (p.field.as_str(), p.message.as_str()))
        .collect();
    assert!(
        found.contains(&(
            "script.output.items",
            "give one of `fields` (one object), `items` (a list) and `objects` (several), not fields and items"
        )),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|(f, _)| *f == "script.output.items.fields[0].name"),
        "{found:#?}"
    );
    assert!(
        found.contains(&(
            "agent.reply.objects[1].name",
            "the object `a` is declared twice"
        )),
        "{found:#?}"
    );
    assert!(
        found.contains(&(
            "agent.reply.objects[1].items",
            "an object is either `fields` (one object) or `items` (a list)"
        )),
        "{found:#?}"
    );
}

#[test]
fn an_agent_decides_with_exits_that_arrows_and_send_backs_use() {
    let flow = |critic: &str| {
        check(&format!(
            r#"
steps:
  - key: write
    {WRITE}
  - key: critic
{critic}
    sendBack: [{{exit: changes, to: write}}]
  - key: publish
    after: [critic.approve]
    {WRITE}
"#
        ))
    };
    let good = "    agent:\n      prompt: Review.\n      reviews: write\n      decisions: [{name: approve}, {name: changes, description: it needs work}]";
    assert!(flow(good).is_empty(), "{:#?}", flow(good));
    let no_decisions = "    agent:\n      prompt: Review.\n      reviews: write";
    let problems = flow(no_decisions);
    assert!(
        problems
            .iter()
            .any(|p| p.field == "agent.reviews" && p.message.contains("give `decisions`")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.field == "sendBack[0].exit" && p.message.contains("only a step with exits")),
        "{problems:#?}"
    );
    let twice = "    agent:\n      prompt: Review.\n      reviews: writ\n      reply: {format: json}\n      decisions: [{name: approve}, {name: approve}, {name: changes}]";
    let problems = flow(twice);
    let found: Vec<(&str, &str)> = problems
        .iter()
        .map(|p| (p.field.as_str(), p.message.as_str()))
        .collect();
    assert!(
        found.contains(&(
            "agent.decisions[1].name",
            "the decision `approve` is listed twice"
        )),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|(f, m)| *f == "agent.reply" && m.contains("takes no `reply`")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|(f, m)| *f == "agent.reviews" && m.contains("no step has the key `writ`")),
        "{found:#?}"
    );
}

#[test]
fn malformed_expression_points_at_the_character() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    when: \"$input.x == 'open\"\n"
    ));
    let c = assert_one(&problems, "a", "when", "quote");
    assert!(c.is_some());
}

#[test]
fn capitalised_keywords_are_refused_with_a_hint() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    when: $input.x == True\n"
    ));
    assert_eq!(assert_one(&problems, "a", "when", "true"), Some(13));
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    when: $input.x AND $input.y\n"
    ));
    assert_eq!(assert_one(&problems, "a", "when", "and"), Some(10));
}

#[test]
fn unknown_step_in_a_reference_names_the_key_and_suggests() {
    let problems = check(&format!(
        "steps:\n  - key: draft\n    {WRITE}\n  - key: b\n    {WRITE}\n    when: $steps.drat.output.ok == true\n"
    ));
    assert_eq!(
        assert_one(&problems, "b", "when", "(did you mean `draft`?)"),
        Some(8)
    );
}

#[test]
fn reading_a_step_that_runs_later_is_refused_outside_loops() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    when: $steps.b.output != null\n  - key: b\n    {WRITE}\n"
    ));
    assert_eq!(
        assert_one(&problems, "a", "when", "`b` runs later than this step"),
        Some(8)
    );
}

#[test]
fn reading_a_step_on_another_branch_is_refused() {
    let problems = check(&format!(
        r#"
steps:
  - key: check
    condition: {{when: $input.x == 1}}
  - key: yes
    after: [check.true]
    {WRITE}
  - key: no
    after: [check.false]
    {WRITE}
    input: {{other: $steps.yes.output}}
"#
    ));
    assert_one(&problems, "no", "input.other", "does not run before");
}

#[test]
fn inside_a_loop_a_step_reads_later_steps_and_itself() {
    let problems = check(&format!(
        r#"
steps:
  - key: revise
    loop:
      until: $steps.review.output.approved == true and $loop.iteration < 5
      maxIterations: 5
      steps:
        - key: draft
          {WRITE}
          input: {{feedback: $steps.review.output.feedback, before: $steps.draft.output}}
        - key: review
          agent:
            prompt: Review it.
            reply: {{format: json, fields: [{{name: approved, type: boolean}}, {{name: feedback, type: string}}]}}
  - key: after_loop
    {WRITE}
    input: {{final: $steps.draft.output}}
"#
    ));
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_step_reads_itself_only_inside_a_loop() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    input: {{me: $steps.a.output}}\n"
    ));
    assert_one(&problems, "a", "input.me", "only inside a loop");
}

#[test]
fn loop_and_item_roots_are_only_known_where_they_exist() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    when: $loop.iteration > 1\n"
    ));
    assert_eq!(assert_one(&problems, "a", "when", "inside a loop"), Some(1));
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    input: {{x: $item}}\n"
    ));
    assert_one(&problems, "a", "input.x", "parallel");
    let problems = check(
        "steps:\n  - key: each\n    parallel:\n      items: $input.list\n      step: {input: {x: $item, i: $index}, agent: {prompt: Go.}}\n",
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn duplicate_keys_are_refused_on_the_second() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n  - key: a\n    {WRITE}\n"
    ));
    assert_one(
        &problems,
        "a",
        "key",
        "already used by the step at steps[0]",
    );
}

#[test]
fn malformed_and_reserved_keys_are_refused() {
    let problems = check(&format!("steps:\n  - key: my-step\n    {WRITE}\n"));
    assert_eq!(assert_one(&problems, "my-step", "key", "`-`"), Some(3));
    let problems = check(&format!("steps:\n  - key: 1st\n    {WRITE}\n"));
    assert_eq!(
        assert_one(&problems, "1st", "key", "lowercase letter"),
        Some(1)
    );
    let problems = check(&format!("steps:\n  - key: input\n    {WRITE}\n"));
    assert_one(&problems, "input", "key", "reserved");
}

#[test]
fn unknown_exits_and_steps_in_after_are_refused() {
    let problems = check(&format!(
        "steps:\n  - key: review\n    approval: {{decisions: [approve, reject]}}\n  - key: b\n    after: [review.aprove]\n    {WRITE}\n"
    ));
    assert_eq!(
        assert_one(&problems, "b", "after[0]", "`approve`, `reject`"),
        Some(8)
    );
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    after: [zz]\n    {WRITE}\n"
    ));
    assert_one(&problems, "b", "after[0]", "no step has the key `zz`");
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    after: [a.done]\n    {WRITE}\n"
    ));
    assert_one(&problems, "b", "after[0]", "no named exits");
}

/// An `after` that names no step it can leaves an arrow out of the graph;
/// what the steps from there on read is not judged against that graph, so
/// the one mistake is reported once, not again on every later step.
#[test]
fn a_bad_after_is_reported_once_without_follow_on_problems() {
    for bad in ["nope", "publish", "inner"] {
        let problems = check(&format!(
            r#"
steps:
  - key: draft
    {WRITE}
  - key: side
    loop:
      until: "true"
      maxIterations: 2
      steps:
        - key: inner
          {WRITE}
  - key: review
    after: [{bad}]
    input: {{text: $steps.draft.text}}
    approval: {{decisions: [approve, changes], show: [draft]}}
    sendBack: [{{exit: changes, to: draft}}]
  - key: publish
    after: [review.approve]
    input: {{text: $steps.draft.text, later: $steps.last.output}}
    {WRITE}
  - key: last
    {WRITE}
"#
        ));
        let found: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.step.as_str(), p.field.as_str()))
            .collect();
        // What no arrow could mend is still said: `last` runs later.
        assert_eq!(
            found,
            [("review", "after[0]"), ("publish", "input.later")],
            "{bad}: {problems:#?}"
        );
        assert!(
            problems[1].message.contains("`last` runs later"),
            "{problems:#?}"
        );
    }
}

/// Without a bad `after` on the way, reading a step off the path is still
/// refused: the leniency above reaches only the steps that need it.
#[test]
fn a_bad_after_elsewhere_leaves_other_branches_judged() {
    let problems = check(&format!(
        r#"
steps:
  - key: check
    condition: {{when: $input.x == 1}}
  - key: yes
    after: [check.true]
    {WRITE}
  - key: no
    after: [check.false]
    {WRITE}
    input: {{other: $steps.yes.output}}
  - key: stray
    after: [nope]
    {WRITE}
"#
    ));
    let found: Vec<(&str, &str)> = problems
        .iter()
        .map(|p| (p.step.as_str(), p.field.as_str()))
        .collect();
    assert_eq!(found, [("no", "input.other"), ("stray", "after[0]")]);
    assert!(problems[0].message.contains("does not run before"));
}

/// Each problem names the place of what it is about in the spec, nested
/// steps and the flow's own fields included.
#[test]
fn placed_problems_name_their_path_in_the_spec() {
    let spec: FlowSpec = serde_yaml::from_str(&format!(
        r#"
steps:
  - key: a
    {WRITE}
  - key: l
    loop:
      until: "true"
      maxIterations: 2
      steps:
        - key: b
          after: [zz]
          {WRITE}
        - key: c
  - key: d
    approval: {{decisions: [ok, Redo]}}
schedule: {{cron: "* *"}}
"#
    ))
    .expect("spec");
    let placed = coxswain_core::flow::validate_placed(&spec, &Default::default());
    let paths: Vec<&str> = placed.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "steps[1].loop.steps[0].after[0]",
            "steps[1].loop.steps[1].kind",
            "steps[2].approval.decisions[1]",
            "schedule.cron",
        ]
    );
    assert_eq!(
        placed.iter().map(|p| p.problem.clone()).collect::<Vec<_>>(),
        validate(&spec)
    );
}

#[test]
fn arrows_point_forward() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    after: [b]\n    {WRITE}\n  - key: b\n    {WRITE}\n"
    ));
    assert_one(&problems, "a", "after[0]", "sendBack");
}

#[test]
fn send_back_must_target_an_earlier_step_on_the_path() {
    let problems = check(&format!(
        "steps:\n  - key: review\n    approval: {{decisions: [ok, redo]}}\n    sendBack: [{{exit: redo, to: later}}]\n  - key: later\n    {WRITE}\n"
    ));
    assert_one(&problems, "review", "sendBack[0].to", "earlier on the path");
}

#[test]
fn send_back_needs_an_exit_of_the_step() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    {WRITE}\n    sendBack: [{{exit: changes, to: a}}]\n"
    ));
    assert_one(&problems, "b", "sendBack[0].exit", "only a step with exits");
}

#[test]
fn overlapping_send_backs_are_refused() {
    let problems = check(&format!(
        r#"
steps:
  - key: a
    {WRITE}
  - key: b
    {WRITE}
  - key: r1
    approval: {{decisions: [ok, redo]}}
    sendBack: [{{exit: redo, to: b}}]
  - key: r2
    approval: {{decisions: [ok, redo]}}
    sendBack: [{{exit: redo, to: a}}]
"#
    ));
    assert_one(
        &problems,
        "r2",
        "sendBack",
        "overlaps the one from `r1` to `b`",
    );
}

#[test]
fn send_backs_on_separate_stretches_are_fine() {
    let problems = check(&format!(
        r#"
steps:
  - key: a
    {WRITE}
  - key: r1
    approval: {{decisions: [ok, redo]}}
    sendBack: [{{exit: redo, to: a}}]
  - key: b
    {WRITE}
  - key: r2
    approval: {{decisions: [ok, redo]}}
    sendBack: [{{exit: redo, to: b}}]
"#
    ));
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn placeholders_with_bad_paths_or_no_source_are_refused() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    http: {{url: 'https://x.example/{{{{a.json.user-name}}}}'}}\n"
    ));
    let c = assert_one(&problems, "b", "http.url", "");
    assert!(c.is_some());
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    message: {{text: 'Done: {{{{zz.text}}}}', webhook: {{url: 'https://hooks.example/x'}}}}\n"
    ));
    assert_eq!(assert_one(&problems, "b", "message.text", "`zz`"), Some(7));
}

#[test]
fn json_bodies_that_cannot_be_json_are_refused() {
    let problems = check(
        "steps:\n  - key: a\n    agent: {prompt: x, reply: {format: json}}\n  - key: b\n    http:\n      url: https://x.example\n      body: {json: '{\"a\": {{a.json.x}} \"b\": 1}'}\n",
    );
    assert_one(&problems, "b", "http.body.json", "");
}

#[test]
fn reply_fields_with_unknown_types_are_refused() {
    let problems = check(
        "steps:\n  - key: a\n    agent: {prompt: Go., reply: {format: json, fields: [{name: ok, type: bool}]}}\n",
    );
    assert_one(
        &problems,
        "a",
        "agent.reply.fields[0].type",
        "`bool` is not a field type",
    );
}

#[test]
fn expression_limits_are_enforced_at_save() {
    let long = format!("$input.x == '{}'", "a".repeat(2100));
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    when: \"{long}\"\n"
    ));
    assert_one(&problems, "a", "when", "2000");
    let deep = format!("{}$input.x{}", "(".repeat(40), ")".repeat(40));
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    when: \"{deep}\"\n"
    ));
    assert_one(&problems, "a", "when", "32");
}

#[test]
fn values_refuse_a_dollar_string_that_is_not_one_reference() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    input: {{price: $5 per seat}}\n"
    ));
    let c = assert_one(&problems, "a", "input.price", "");
    assert!(c.is_some());
}

#[test]
fn a_step_has_exactly_one_kind() {
    let problems = check("steps:\n  - key: a\n    when: $input.x\n");
    assert_one(&problems, "a", "kind", "no kind");
    let problems = check("steps:\n  - key: a\n    agent: {prompt: x}\n    join: {}\n");
    assert_one(&problems, "a", "kind", "agent, join");
}

#[test]
fn every_problem_is_reported_at_once() {
    let problems = check(
        r#"
steps:
  - key: Bad
    agent: {prompt: ""}
    attempts: 0
    timeout: 10 minutes
  - key: c
    condition: {}
"#,
    );
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        ["key", "attempts", "timeout", "agent.prompt", "condition"],
        "{problems:#?}"
    );
}

#[test]
fn kinds_check_their_own_fields() {
    let cases = [
        ("script: {}", "script", "needs `source`"),
        ("script: {source: x, command: [y]}", "script", "not both"),
        (
            "http: {url: 'https://x', method: FETCH}",
            "http.method",
            "`FETCH`",
        ),
        (
            "http: {url: 'https://x', keep: {id: body.id}}",
            "http.keep.id",
            "response path",
        ),
        (
            "message: {text: hi}",
            "message",
            "`webhook`, `slack` or `matrix`",
        ),
        (
            "condition: {when: 'true', paths: [{name: a, when: 'true'}]}",
            "condition",
            "not both",
        ),
        (
            "approval: {decisions: []}",
            "approval.decisions",
            "needs decisions",
        ),
        ("approval: {mode: entry}", "approval.fields", "fields"),
        (
            "approval: {decisions: [ok, ok]}",
            "approval.decisions[1]",
            "twice",
        ),
        ("join: {}", "after", "branches"),
        (
            "parallel: {step: {agent: {prompt: x}}}",
            "parallel",
            "`items` or `parts`",
        ),
        (
            "parallel: {items: [1, 2], step: {agent: {prompt: x}}}",
            "parallel.items",
            "one reference",
        ),
        (
            "loop: {until: 'true', maxIterations: 0, steps: [{key: x, agent: {prompt: y}}]}",
            "loop.maxIterations",
            "between 1",
        ),
    ];
    for (kind, field, fragment) in cases {
        let problems = check(&format!("steps:\n  - key: s\n    {kind}\n"));
        assert_one(&problems, "s", field, fragment);
    }
}

#[test]
fn an_empty_flow_is_refused() {
    let problems = check("steps: []\n");
    assert_one(&problems, "", "steps", "at least one step");
}

#[test]
fn flow_output_may_read_every_step() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\noutput: {{a: $steps.a.output, nope: $steps.zz.output}}\n"
    ));
    assert_one(&problems, "", "output.nope", "`zz`");
}

#[test]
fn a_200_step_flow_validates() {
    let mut spec = String::from("steps:\n");
    for i in 0..200 {
        spec.push_str(&format!(
            "  - key: s{i}\n    {SCORED}\n    when: $steps.s0.output.score >= 0.8 and $loop.iteration < 3 or {}\n",
            if i == 0 { "true" } else { "$previous.status == 'completed'" }
        ));
    }
    let problems = check(&spec);
    // Every step but none reads $loop outside a loop: one problem each, none missed.
    assert_eq!(problems.len(), 200 + 1, "{:#?}", &problems[..3]);
}

#[test]
fn a_parallel_part_is_an_agent_script_http_message_or_save_step() {
    let refused = [
        ("condition: {when: 'true'}", "condition"),
        ("approval: {decisions: [ok]}", "approval"),
        ("join: {}", "join"),
        (
            "loop: {until: 'true', maxIterations: 2, steps: [{key: i, script: {source: x}}]}",
            "loop",
        ),
        (
            "parallel: {parts: [{key: x}], step: {script: {source: x}}}",
            "parallel",
        ),
    ];
    for (part, kind) in refused {
        let problems = check(&format!(
            "steps:\n  - key: fan\n    parallel:\n      parts: [{{key: a}}, {{key: b}}]\n      step: {{{part}}}\n"
        ));
        assert_one(
            &problems,
            "fan",
            &format!("parallel.step.{kind}"),
            &format!(
                "a parallel part runs an agent, script, http, message or save step, not a {kind} step"
            ),
        );
    }
    for part in [
        "script: {source: x}",
        "agent: {prompt: x}",
        "http: {url: 'https://x.example'}",
        "message: {text: hi, webhook: {url: 'https://x.example'}}",
        "save: {collection: seen, key: $item}",
    ] {
        let problems = check(&format!(
            "steps:\n  - key: fan\n    parallel:\n      parts: [{{key: a}}]\n      step: {{{part}}}\n"
        ));
        assert!(problems.is_empty(), "{part}: {problems:#?}");
    }
}

#[test]
fn a_schedule_is_read_by_a_cron_parser_in_a_known_time_zone() {
    let flow = |cron: &str, zone: &str| {
        check(&format!(
            "schedule: {{cron: '{cron}', timeZone: '{zone}'}}\nsteps:\n  - key: a\n    {WRITE}\n"
        ))
    };
    assert!(flow("0 9 * * 1-5", "Europe/Paris").is_empty());
    assert_one(
        &flow("61 * * * *", "UTC"),
        "",
        "schedule.cron",
        "the minute field `61` is not valid; it takes 0-59",
    );
    assert_one(
        &flow("0 25 * * *", "UTC"),
        "",
        "schedule.cron",
        "the hour field `25`",
    );
    assert_one(
        &flow("0 9 * * *", "Europe/Pariss"),
        "",
        "schedule.timeZone",
        "`Europe/Pariss` is not a time zone",
    );
}

#[test]
fn an_input_schema_keyword_that_would_not_be_checked_is_refused() {
    let flow = |schema: &str| {
        check(&format!(
            "input: {schema}\nsteps:\n  - key: a\n    {WRITE}\n"
        ))
    };
    assert!(
        flow(
            "{type: object, required: [brief], properties: {brief: {type: string, minLength: 3}}}"
        )
        .is_empty()
    );
    assert_one(
        &flow("{type: object, properties: {email: {type: string, format: email}}}"),
        "",
        "input.properties.email.format",
        "`format` is not supported in an input schema, so it would not be checked",
    );
    assert_one(
        &flow("{type: object, oneOf: [{required: [a]}, {required: [b]}]}"),
        "",
        "input.oneOf",
        "`oneOf` is not supported",
    );
}

#[test]
fn webhook_url_placeholders_are_checked_like_an_http_url() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    message: {{text: hi, webhook: {{url: 'https://hooks.example/{{{{zz.text}}}}'}}}}\n"
    ));
    assert_one(&problems, "b", "message.webhook.url", "`zz`");
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    message: {{text: hi, webhook: {{url: 'https://hooks.example/{{{{a.text}}}}'}}}}\n"
    ));
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn thread_placeholders_are_checked_for_slack_and_matrix() {
    let slack =
        "slack: {channel: '#ops', tokenSecretRef: {name: s, key: k}, thread: '{{zz.text}}'}";
    let matrix = "matrix: {homeserver: 'https://m.example.org', room: '!r:example.org', \
                  tokenSecretRef: {name: s, key: k}, thread: '{{zz.text}}'}";
    for (target, field) in [
        (slack, "message.slack.thread"),
        (matrix, "message.matrix.thread"),
    ] {
        let problems = check(&format!(
            "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    message: {{text: hi, {target}}}\n"
        ));
        assert_one(&problems, "b", field, "`zz`");
        let fine = target.replace("{{zz.text}}", "{{input.json.thread}}");
        let problems = check(&format!(
            "steps:\n  - key: a\n    {WRITE}\n  - key: b\n    message: {{text: hi, {fine}}}\n"
        ));
        assert!(problems.is_empty(), "{problems:#?}");
    }
}

#[test]
fn a_message_step_gives_exactly_one_target() {
    let problems = check("steps:\n  - key: b\n    message: {text: hi}\n");
    assert_one(
        &problems,
        "b",
        "message",
        "give one of `webhook`, `slack` or `matrix`",
    );
    let problems = check(
        "steps:\n  - key: b\n    message: {text: hi, webhook: {url: 'https://h.example/'}, matrix: {homeserver: 'https://m.example.org', room: '!a:m.example.org', tokenSecretRef: {name: m, key: t}}}\n",
    );
    assert_one(
        &problems,
        "b",
        "message",
        "this step gives `webhook` and `matrix`",
    );
}

#[test]
fn a_matrix_target_is_checked_field_by_field() {
    let step = |homeserver: &str, room: &str| {
        format!(
            "steps:\n  - key: b\n    message: {{text: hi, matrix: {{homeserver: '{homeserver}', room: '{room}', tokenSecretRef: {{name: m, key: t}}}}}}\n"
        )
    };
    assert!(check(&step("https://m.example.org", "#ops:m.example.org")).is_empty());
    assert_one(
        &check(&step("https://m.example.org", "ops")),
        "b",
        "message.matrix.room",
        "`ops` is not a room id",
    );
    assert_one(
        &check(&step("matrix.example.org", "!a:m.example.org")),
        "b",
        "message.matrix.homeserver",
        "is not a URL",
    );
}

#[test]
fn framing_and_hop_by_hop_headers_are_refused() {
    for (name, fragment) in [
        ("Host", "the host is the URL's"),
        ("content-length", "length and framing"),
        ("Transfer-Encoding", "length and framing"),
        ("Connection", "connection"),
        ("Keep-Alive", "connection"),
        ("Proxy-Authorization", "connection"),
        ("TE", "connection"),
        ("Trailer", "length and framing"),
        ("Upgrade", "connection"),
    ] {
        let problems = check(&format!(
            r#"
steps:
  - key: call
    http:
      url: "https://api.example.com/x"
      headers:
        - {{name: X-Fine, value: ok}}
        - {{name: {name}, value: "12"}}
"#
        ));
        assert_one(&problems, "call", "http.headers[1].name", fragment);
        assert!(
            problems[0].message.contains(&format!("`{name}`")),
            "{problems:#?}"
        );
    }
}

#[test]
fn backoff_and_timeout_have_an_upper_bound() {
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    attempts: 2\n    backoff: 999999999d\n"
    ));
    assert_one(&problems, "a", "backoff", "at most 7 days");
    let problems = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    timeout: 31d\n"
    ));
    assert_one(&problems, "a", "timeout", "at most 30 days");
    let fine = check(&format!(
        "steps:\n  - key: a\n    {WRITE}\n    attempts: 20\n    backoff: 7d\n    timeout: 30d\n"
    ));
    assert!(fine.is_empty(), "{fine:#?}");
}

/// An http step that binds the Secret `cms` to a header, with `url`.
fn secret_bound_to(url: &str) -> String {
    format!(
        r#"
steps:
  - key: send
    http:
      url: "{url}"
      headers: [{{name: Authorization, valueFrom: {{secretKeyRef: {{name: cms, key: token}}}}}}]
"#
    )
}

#[test]
fn a_secret_goes_only_to_a_written_origin() {
    let cases = [
        ("https://{{input.json.host}}/api", 9),
        ("{{input.json.base}}/api", 1),
        ("https://cms.example.com:{{input.json.port}}/api", 25),
        ("https://cms.example.com{{input.json.suffix}}/api", 24),
        ("https://{{input.json.user}}@cms.example.com/api", 9),
    ];
    for (url, character) in cases {
        let problems = check(&secret_bound_to(url));
        let at = assert_one(&problems, "send", "http.url", "the Secret `cms`");
        assert_eq!(at, Some(character), "{url}");
        assert!(
            problems[0].message.contains("choose where the secret goes"),
            "{:?}",
            problems[0].message
        );
    }
}

#[test]
fn a_secret_step_may_have_placeholders_in_path_and_query() {
    for url in [
        "https://cms.example.com/posts/{{input.json.id}}",
        "https://cms.example.com:8443/posts?id={{input.json.id}}",
        "http://10.0.0.1#{{input.json.id}}",
        "https://cms.example.com/fixed",
    ] {
        let problems = check(&secret_bound_to(url));
        assert!(problems.is_empty(), "{url}: {problems:#?}");
    }
}

#[test]
fn without_a_secret_the_origin_may_come_from_input() {
    let problems = check(
        r#"
steps:
  - key: send
    http:
      url: "https://{{input.json.host}}/api"
      headers: [{name: X-Trace, value: "1"}]
"#,
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_secret_rule_holds_inside_a_parallel_part() {
    let problems = check(
        r#"
steps:
  - key: fan
    parallel:
      items: $input.hosts
      step:
        http:
          url: "https://{{input.json.host}}/api"
          headers: [{name: Authorization, valueFrom: {secretKeyRef: {name: cms, key: token}}}]
"#,
    );
    assert_one(
        &problems,
        "fan",
        "parallel.step.http.url",
        "the Secret `cms`",
    );
}

/// `n` script steps in a row, keys `s0`, `s1`, ….
fn steps_in_a_row(n: usize) -> String {
    let mut yaml = String::from("steps:\n");
    for i in 0..n {
        yaml.push_str(&format!("  - {{key: s{i}, script: {{source: x}}}}\n"));
    }
    yaml
}

#[test]
fn a_flow_whose_record_could_not_be_stored_is_refused_with_the_limit_and_why() {
    assert_eq!(check(&steps_in_a_row(1_000)), vec![], "1,000 steps fit");
    assert_eq!(
        check(&steps_in_a_row(coxswain_core::flow::MAX_STEPS)),
        vec![],
        "the largest flow allowed"
    );
    for n in [coxswain_core::flow::MAX_STEPS + 1, 5_000, 10_000] {
        assert_one(
            &check(&steps_in_a_row(n)),
            "",
            "steps",
            &format!(
                "the flow has {n} steps (nested steps and named parallel parts included); at most 1404 are allowed: each step keeps about 560 bytes of bookkeeping in its Run's record, which must stay under 768 KiB for the API server to store it"
            ),
        );
    }
    // Named parts each keep their own entry in the record.
    let mut fanned = steps_in_a_row(1_000);
    fanned
        .push_str("  - key: fan\n    parallel:\n      step: {script: {source: x}}\n      parts:\n");
    for i in 0..500 {
        fanned.push_str(&format!("        - {{key: p{i}}}\n"));
    }
    assert_one(&check(&fanned), "", "steps", "the flow has 1501 steps");
}

#[test]
fn mode_both_needs_decisions_and_fields() {
    let ok = check(
        "steps:\n  - key: triage\n    approval: {mode: both, decisions: [accept, changes], fields: [{name: owner, type: string}]}\n",
    );
    assert!(ok.is_empty(), "{ok:#?}");
    let problems = check(
        "steps:\n  - key: triage\n    approval: {mode: both, fields: [{name: owner, type: string}]}\n",
    );
    assert_one(
        &problems,
        "triage",
        "approval.decisions",
        "mode both needs decisions",
    );
    let problems =
        check("steps:\n  - key: triage\n    approval: {mode: both, decisions: [accept]}\n");
    assert_one(
        &problems,
        "triage",
        "approval.fields",
        "mode both needs the fields",
    );
}

#[test]
fn approvals_must_be_reachable() {
    let review = |extra: &str| {
        check(&format!(
            "steps:\n  - key: review\n    approval: {{decisions: [approve, changes]{extra}}}\n"
        ))
    };
    assert!(review(", approvals: 2").is_empty());
    assert!(
        review(", approvals: 2, approvers: {users: [ana, bob]}").is_empty(),
        "two users can agree"
    );
    assert!(
        review(", approvals: 3, approvers: {users: [ana], groups: [editors]}").is_empty(),
        "a group may hold any number"
    );
    assert_one(
        &review(", approvals: 0"),
        "review",
        "approval.approvals",
        "1 or more, not 0",
    );
    assert_one(
        &review(", approvals: 3, approvers: {users: [ana, bob, ana]}"),
        "review",
        "approval.approvals",
        "approvals: 3 can never be reached: approvers names only 2 different users and no group",
    );
    let entry = check(
        "steps:\n  - key: form\n    approval: {mode: entry, fields: [{name: owner, type: string}], approvals: 2}\n",
    );
    assert_one(
        &entry,
        "form",
        "approval.approvals",
        "approvals: 2 needs mode review; in mode entry one person fills in the fields",
    );
}

// ---- stored records: save and lookup ----------------------------------------

const FETCH: &str = "  - key: fetch\n    script: {source: x}\n";

#[test]
fn a_valid_save_and_lookup_have_no_problems() {
    let problems = check(&format!(
        r#"
steps:
{FETCH}  - key: remember
    save: {{collection: tickets, key: $steps.fetch.output.id}}
  - key: triage
    lookup:
      - name: similar
        collection: tickets
        where: '$record.value.component == $steps.fetch.output.component and $record.value.priority >= 2'
        orderBy: $record.savedAt
        descending: true
        limit: 20
    agent: {{prompt: Triage it., give: [fetch]}}
  - key: post
    lookup: [{{name: recent, collection: tickets}}]
    http: {{url: "https://example.com/{{{{recent.json.0.key}}}}"}}
"#
    ));
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_save_names_its_collection_like_a_key_and_needs_a_key() {
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: remember\n    save: {{collection: Tickets, key: $steps.fetch.output.id}}\n"
    ));
    assert_eq!(
        assert_one(&problems, "remember", "save.collection", "lowercase"),
        Some(1)
    );
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: remember\n    save: {{collection: t, key: '', value: $steps.nope.output}}\n"
    ));
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].message.contains("needs a key"), "{problems:#?}");
    assert!(
        problems[1].message.contains("no step has the key `nope`"),
        "{problems:#?}"
    );
}

#[test]
fn a_where_is_checked_like_every_condition_with_its_positions() {
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: t\n    lookup: [{{name: s, collection: c, where: '$record.value.a == 1 AND $steps.fetch.output.b'}}]\n    script: {{source: x}}\n"
    ));
    let c = assert_one(&problems, "t", "lookup[0].where", "lowercase");
    assert_eq!(c, Some(22));
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: t\n    lookup: [{{name: s, collection: c, where: '$record.valu == 1'}}]\n    script: {{source: x}}\n"
    ));
    assert_eq!(
        assert_one(
            &problems,
            "t",
            "lookup[0].where",
            "`valu` isn't a field here"
        ),
        Some(9)
    );
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: t\n    lookup: [{{name: s, collection: c, where: '$record.key == $steps.later.output'}}]\n    script: {{source: x}}\n  - key: later\n    script: {{source: x}}\n"
    ));
    assert_one(&problems, "t", "lookup[0].where", "runs later");
}

#[test]
fn record_is_known_only_in_a_lookup() {
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: t\n    when: '$record.key == \"a\"'\n    script: {{source: x}}\n"
    ));
    assert_eq!(
        assert_one(&problems, "t", "when", "only known in a lookup"),
        Some(1)
    );
}

#[test]
fn lookup_names_are_their_own() {
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: t\n    input: {{s: $input.x}}\n    lookup: [{{name: s, collection: c}}, {{name: fetch, collection: c}}, {{name: u, collection: c}}, {{name: u, collection: c}}]\n    script: {{source: x}}\n"
    ));
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].message.contains("input already has `s`"));
    assert!(problems[1].message.contains("`fetch` is a step key"));
    assert!(problems[2].message.contains("two lookups are named `u`"));
}

#[test]
fn order_by_limit_and_the_step_kind_are_checked() {
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: t\n    lookup: [{{name: s, collection: c, orderBy: $input.x, limit: 1001}}]\n    script: {{source: x}}\n"
    ));
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].message.contains("under `$record`"),
        "{problems:#?}"
    );
    assert!(
        problems[1].message.contains("between 1 and 1000"),
        "{problems:#?}"
    );
    let problems = check(&format!(
        "steps:\n{FETCH}  - key: t\n    lookup: [{{name: s, collection: c}}]\n    condition: {{when: 'true'}}\n"
    ));
    assert_one(&problems, "t", "lookup", "not on a condition step");
}
