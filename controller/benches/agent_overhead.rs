//! Our overhead around REAL agent calls (target ≤ 5 ms at p50): a one-step
//! agent flow run by the local engine against llama-cpp-python serving
//! SmolLM2 (`e2e/model/up`), minus the time the server itself took.
//!
//! A timing proxy in this process stands between us and the server and
//! measures each upstream exchange (request sent to response body read).
//! For every call: overhead = wall time of the whole run − upstream time.
//! The baseline, interleaved call for call with the same request body, is
//! a bare `reqwest` POST through the same proxy: what any client pays for
//! the HTTP hop. Coxswain's own cost is the difference of the two.
//!
//! `cargo bench -p coxswain --bench agent_overhead` (server URL from
//! `COXSWAIN_MODEL_URL`, else `e2e/model/up` is run; calls from
//! `COXSWAIN_BENCH_CALLS`, default 20).

use std::sync::Arc;
use std::time::{Duration, Instant};

use coxswain::local::{CommandLineApprover, run_quietly};
use coxswain_core::api::{FlowSpec, RunPhase};
use coxswain_core::engine::CompiledFlow;
use coxswain_steps::agent::{AgentConfig, AgentExecutor, Mode};
use serde_json::{Value, json};

const FLOW: &str = r#"
steps:
  - key: review
    agent:
      prompt: Review the text. Give it a title, say whether it is approved, and add tags.
      reply:
        format: json
        fields:
          - {name: title, type: string}
          - {name: approved, type: boolean}
          - {name: tags, type: array}
    input: {text: $input.text}
"#;

use coxswain_test_support::recording_proxy::{self, Exchanges};

/// The server's URL: `COXSWAIN_MODEL_URL`, or what `e2e/model/up` prints.
fn model_url() -> Result<String, String> {
    if let Ok(url) = std::env::var("COXSWAIN_MODEL_URL") {
        return Ok(url);
    }
    let up = concat!(env!("CARGO_MANIFEST_DIR"), "/../e2e/model/up");
    eprintln!("starting the model server ({up}) …");
    let out = std::process::Command::new(up)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {up}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("COXSWAIN_AGENT_BASE_URL="))
    {
        Some(url) if out.status.success() => Ok(url.to_string()),
        _ => Err(format!("{up} failed ({})", out.status)),
    }
}

/// Takes the upstream time of every exchange recorded since `from`.
fn upstream_since(seen: &Exchanges, from: usize) -> (Duration, usize, Option<Value>) {
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let new = seen.get(from..).unwrap_or(&[]);
    let total = new.iter().map(|x| x.upstream).sum();
    (total, new.len(), new.first().map(|x| x.request.clone()))
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(name: &str, mut overheads: Vec<f64>, upstream: &[f64]) -> f64 {
    overheads.sort_by(f64::total_cmp);
    let mut up = upstream.to_vec();
    up.sort_by(f64::total_cmp);
    let p50 = percentile(&overheads, 0.5);
    println!(
        "{name:<28} overhead p50 {:>8.0} µs  p90 {:>8.0} µs  max {:>8.0} µs   (server p50 {:>7.0} ms)",
        p50,
        percentile(&overheads, 0.9),
        percentile(&overheads, 1.0),
        percentile(&up, 0.5) / 1000.0,
    );
    p50
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("agent_overhead: bench");
        return;
    }
    coxswain_steps::net::install_crypto_provider();
    let calls: usize = std::env::var("COXSWAIN_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let upstream = match model_url() {
        Ok(url) => url,
        Err(why) => {
            eprintln!("agent_overhead needs a real model server: {why}");
            std::process::exit(2);
        }
    };
    let (url, seen) = match recording_proxy::start(upstream, false).await {
        Ok(p) => p,
        Err(why) => {
            eprintln!("cannot start the timing proxy: {why}");
            std::process::exit(2);
        }
    };
    let spec: FlowSpec = match serde_yaml::from_str(FLOW) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bench flow: {e}");
            std::process::exit(2);
        }
    };
    let executor = match AgentExecutor::new(AgentConfig {
        base_url: url.clone(),
        default_model: "smollm2".into(),
        mode: Mode::Tools,
        timeout: Duration::from_secs(600),
        ..Default::default()
    }) {
        Ok(e) => Arc::new(e),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let raw = reqwest::Client::new();
    let input = json!({"text": "The quick brown fox jumps over the lazy dog."});

    let mut ours = Vec::new();
    let mut ours_up = Vec::new();
    let mut bare = Vec::new();
    let mut bare_up = Vec::new();
    let mut repairs = 0;
    let mut body: Option<Value> = None;
    println!("{calls} calls each, interleaved; first (warm-up) pair not counted");
    for i in 0..=calls {
        // Coxswain: validate + compile the flow, run it, read the reply.
        let from = seen.lock().map(|s| s.len()).unwrap_or(0);
        let start = Instant::now();
        let flow = match CompiledFlow::new(spec.clone()) {
            Ok(f) => f,
            Err(p) => {
                eprintln!("bench flow refused: {p:?}");
                std::process::exit(2);
            }
        };
        let mut approver = CommandLineApprover::new(&[]).unwrap_or_else(|e| panic!("{e}"));
        let status = run_quietly(&flow, input.clone(), executor.clone(), &mut approver).await;
        let wall = start.elapsed();
        let (up, exchanges, first) = upstream_since(&seen, from);
        if body.is_none() {
            body = first;
        }
        if exchanges > 1 {
            repairs += 1;
        }
        if i > 0 {
            ours.push(micros(wall.saturating_sub(up)));
            ours_up.push(micros(up));
        }
        if status.phase != RunPhase::Succeeded {
            eprintln!(
                "call {i}: run ended {:?} ({:?})",
                status.phase, status.error
            );
        }

        // Baseline: the same request body, a bare POST, the JSON read back.
        let Some(b) = body.clone() else { continue };
        let from = seen.lock().map(|s| s.len()).unwrap_or(0);
        let start = Instant::now();
        let reply = raw
            .post(format!("{url}/chat/completions"))
            .json(&b)
            .send()
            .await;
        if let Ok(r) = reply {
            let _ = r.json::<Value>().await;
        }
        let wall = start.elapsed();
        let (up, _, _) = upstream_since(&seen, from);
        if i > 0 {
            bare.push(micros(wall.saturating_sub(up)));
            bare_up.push(micros(up));
        }
    }
    let base = report("baseline: bare reqwest POST", bare, &bare_up);
    let cox = report("coxswain: one-step agent run", ours, &ours_up);
    println!(
        "coxswain's own work at p50: {:.0} µs ({:.2}× the baseline's hop); runs with a repair turn: {repairs}",
        cox - base,
        cox / base
    );
}
