//! Our own work around one agent call (target ≤ 5 ms at p50): building the
//! prompt and the request body, then reading, parsing and validating a
//! typical reply. The server's time is not in it: no HTTP here.

use std::hint::black_box;

use coxswain_core::api::{AgentStep, Field, Reply, ReplyFormat};
use coxswain_core::engine::{AgentTask, ChangeRequest, Given};
use coxswain_steps::agent::client::read_response;
use coxswain_steps::agent::contract::{Contract, interpret};
use coxswain_steps::agent::{Mode, prompt, request_body};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

fn task() -> AgentTask {
    let fields = vec![
        ("verdict", "string"),
        ("score", "integer"),
        ("confidence", "number"),
        ("approved", "boolean"),
        ("issues", "array"),
        ("meta", "object"),
    ]
    .into_iter()
    .map(|(name, t)| Field {
        description: Some(format!("The {name} of the review.")),
        ..Field::new(name, t)
    })
    .collect();
    let paragraph = "A paragraph of an earlier step's draft, with <tags> & \"quotes\". ".repeat(20);
    AgentTask {
        spec: AgentStep {
            prompt: "Review the draft against the brief and the style guide.".into(),
            give: vec!["draft".into(), "style".into()],
            reply: Some(Reply {
                format: ReplyFormat::Json,
                fields,
                ..Default::default()
            }),
            ..Default::default()
        },
        given: vec![
            Given {
                name: "draft".into(),
                state: "completed".into(),
                role: "affected",
                value: Some(
                    json!({"title": "A title", "body": paragraph, "tags": ["a", "b", "c"]}),
                ),
            },
            Given {
                name: "style".into(),
                state: "skipped".into(),
                role: "instrument",
                value: None,
            },
        ],
        change_request: Some(ChangeRequest {
            reviewer: "alice".into(),
            decision: "changes".into(),
            reviewed: vec![("draft".into(), json!({"title": "Old"}))],
            instructions: "Shorter intro.".into(),
        }),
        flow_description: Some("Research, write, review, publish.".into()),
    }
}

fn reply() -> Vec<u8> {
    let args = "{ \"verdict\" : \"changes\", \"score\": 6, \"confidence\": 0.75, \"approved\": false, \"issues\": [\"intro too long\", \"no sources\"], \"meta\": {\"lang\": \"en\"} }";
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "submit_output", "arguments": args}}]}}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 60, "total_tokens": 960}
    })
    .to_string()
    .into_bytes()
}

fn bench(c: &mut Criterion) {
    let task = task();
    let input = json!({"brief": "Write about cats.", "audience": "children"});
    let contract = Contract::of(task.spec.reply.as_ref());
    let wire = reply();
    c.bench_function("agent_call_overhead", |b| {
        b.iter(|| {
            let p = prompt::build(black_box(&task), black_box(&input), &contract, Mode::Tools);
            let body = request_body("model", &p.messages, &contract, Mode::Tools);
            let sent = serde_json::to_vec(&body).unwrap_or_default();
            let completion = read_response(black_box(&wire)).expect("reply reads");
            let output: Value = interpret(&contract, &completion.parts).expect("reply fits");
            black_box((sent, output, completion.parts.text()))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
