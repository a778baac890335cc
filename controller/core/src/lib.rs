//! Coxswain's pure core: what a flow is and how a run moves.
//!
//! `api` (the resource types), `scope`, `expr`, `template`, `flow` (reading
//! and validating flows) and `engine` (the run state machine) do no I/O and
//! know nothing of a Kubernetes client, an HTTP client or an async runtime,
//! so the controller, the admission webhook and the local runner share one
//! exact implementation of the flow language, and this crate builds without
//! any of them.
//!
//! Whoever drives a run (the controller, `coxswain run`, a test) does what
//! the example below does: read the flow, refuse it with its problems if it
//! is not valid, then feed the engine one event at a time. After each, the
//! driver follows the [`engine::Plan`] built from the engine's status: the
//! workspace work, the attempts to launch and stop, the people to ask, the
//! volume to let go. The engine keeps the run's whole status
//! ([`api::RunStatus`]) and reads no clock, so the driver hands it the time
//! of each event and stores the status wherever runs are kept.
//!
//! ```
//! use coxswain_core::api::{FlowSpec, RunPhase};
//! use coxswain_core::engine::{Action, CompiledFlow, Done, Event, RunInfo, RunMachine};
//! use coxswain_core::flow::validate;
//! use serde_json::json;
//!
//! // What a Flow's `spec:` holds.
//! let spec: FlowSpec = serde_yaml::from_str(
//!     r#"
//! steps:
//!   - key: greet
//!     script: {source: 'echo "hello $NAME"'}
//!     input: {name: $input.name}
//! "#,
//! )
//! .expect("well-formed YAML");
//!
//! // The problems admission refuses a Flow with (and `coxswain lint`
//! // prints); none here. `CompiledFlow::new` refuses with the same list.
//! assert!(validate(&spec).is_empty());
//! let flow = CompiledFlow::new(spec).expect("a valid flow");
//!
//! let run = RunInfo {
//!     name: "greet-1".into(),
//!     namespace: "default".into(),
//!     uid: "0b5e".into(),
//!     since: None,
//! };
//! let mut machine = RunMachine::new(&flow, json!({"name": "Ada"}), run);
//! let now: jiff::Timestamp = "2026-01-01T09:00:00Z".parse().expect("a time");
//!
//! // Starting asks for the first attempt of `greet`, its input resolved.
//! let actions = machine.handle(Event::Start, now);
//! let [Action::Run(work)] = actions.as_slice() else {
//!     panic!("expected one attempt to run, got {actions:?}");
//! };
//! assert_eq!((work.step.as_str(), work.attempt), ("greet", 1));
//! assert_eq!(work.input, json!({"name": "Ada"}));
//!
//! // The driver runs it (a Job, a local process) and reports how it ended;
//! // with nothing left to run, the run has succeeded.
//! let finished = Event::Finished {
//!     step: work.step.clone(),
//!     part: None,
//!     attempt: work.attempt,
//!     result: Ok(Done {
//!         output: json!("hello Ada"),
//!         ..Done::default()
//!     }),
//! };
//! assert!(machine.handle(finished, now).is_empty());
//! assert_eq!(machine.status().phase, RunPhase::Succeeded);
//! ```

#![warn(missing_docs)]

pub mod api;
pub mod crds;
pub mod engine;
pub mod expr;
pub mod flow;
pub mod portable_yaml;
pub mod scope;
pub mod template;
pub mod text;
pub mod view;
