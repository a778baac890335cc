//! The conformance suite: each file in `tests/conformance/` is a flow, an
//! input, decisions, stand-in replies per step, and fragments of the record
//! the run must end with. The engine runs it through the local runner.

use std::path::Path;
use std::sync::Arc;

use coxswain::local::{CommandLineApprover, run_quietly};
use coxswain_core::api::RunStatus;
use coxswain_core::engine::CompiledFlow;
use serde_json::Value;

use coxswain_test_support::conformance_driver::{
    Scripted, case_files, check_restarts, fragment_matches, read_case, report,
};

async fn run_case(path: &Path) -> Result<(), String> {
    let case = read_case(path)?;
    let flow = CompiledFlow::new(case.flow.clone()).map_err(|p| format!("flow refused: {p:?}"))?;
    let executor = Arc::new(Scripted::new(&case));
    let mut approver = CommandLineApprover::new(&case.decide).map_err(|e| e.to_string())?;
    let state = run_quietly(&flow, case.input, executor.clone(), &mut approver).await;
    let mut actual = serde_json::to_value(&state).map_err(|e| e.to_string())?;
    let received = executor.received.lock().unwrap().clone();
    let feedback = executor.feedback.lock().unwrap().clone();
    actual["received"] = serde_json::to_value(&received).unwrap_or_default();
    actual["feedback"] = serde_json::to_value(&feedback).unwrap_or_default();
    let mut errors = Vec::new();
    fragment_matches(&case.expect, &actual, "", &mut errors);
    for (step, inputs) in &case.received {
        let got = received.get(step).cloned().unwrap_or_default();
        fragment_matches(
            &Value::from(inputs.clone()),
            &Value::from(got),
            &format!("received.{step}"),
            &mut errors,
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        let record = serde_json::to_string_pretty(&actual).unwrap_or_default();
        Err(format!("{}\n--- record ---\n{record}", errors.join("\n")))
    }
}

#[tokio::test]
async fn conformance_suite() {
    let files = case_files();
    let mut failures = Vec::new();
    for file in &files {
        if let Err(e) = run_case(file).await {
            failures.push(format!("== {}\n{e}", file.display()));
        }
    }
    report(files.len(), &failures);
}

/// A controller may be killed after any event: picked up from its record
/// alone (here after a trip through JSON), the run goes on to the very same
/// end, and no attempt in flight is lost or started twice.
#[tokio::test]
async fn every_case_survives_a_restart_after_every_event() {
    let files = case_files();
    let mut failures = Vec::new();
    for file in &files {
        let through_json = |state: RunStatus| async move {
            let saved = serde_json::to_string(&state).map_err(|e| e.to_string())?;
            serde_json::from_str::<RunStatus>(&saved).map_err(|e| e.to_string())
        };
        let outcome = match read_case(file) {
            Ok(case) => check_restarts(&case, through_json).await,
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            failures.push(format!("== {}\n{e}", file.display()));
        }
    }
    report(files.len(), &failures);
}
