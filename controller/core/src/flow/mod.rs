//! Flows as data: their graph, and the validator that every entry point
//! shares — the admission webhook, the controller's `Valid` condition and
//! `coxswain lint` all call [`validate`], so a mistake is reported the same
//! way wherever it is caught.

mod answers;
mod checks;
mod command;
mod decider;
mod depth;
mod digest;
mod documents;
pub mod draw;
mod duration;
mod error;
mod graph;
mod input_schema;
mod lint;
mod message_target;
mod nesting;
mod placed;
mod record_size;
mod schedule;
mod secrets;
mod shape;
mod start;
mod suggest;
mod validate;
mod workspace;
mod yaml_1_1;
mod yaml_tree;

pub use answers::{
    AnswerError, Asked, Vote, check_answer, check_answer_in, check_answer_to, check_decision,
    check_entry, describe_tally, tally,
};
pub use command::check_command;
pub use decider::{Decider, DeciderError, DeciderRule, check_decider, describe_approvers};
pub use depth::{MAX_JSON_DEPTH, json_depth, text_depth};
pub use digest::flow_digest;
pub use documents::{FlowDocument, flows_in_yaml};
pub use duration::parse_duration;
pub use error::FlowError;
pub use graph::{Arrow, FlowGraph, Node, exits, split_after};
pub use input_schema::{InputProblem, check_input, check_schema, describe_type};
pub use lint::{LintProblem, LintedFlow, lint_yaml};
pub use message_target::{check_matrix, target_problem};
pub use nesting::{MAX_BRACKET_DEPTH, TooDeep, check_nesting};
pub use placed::PlacedProblem;
pub use record_size::{MAX_STEPS, RECORD_CEILING, STEP_RECORD_BYTES};
pub use schedule::check_schedule;
pub use secrets::{BoundSecret, bound_secrets};
pub use shape::{FIELD_TYPES, FILE_TYPE, Hop, ITEMS_KEY, Shape, kind_of};
pub use start::{StartProblem, check_start, input_fits, one_line};
pub use validate::{Limits, validate, validate_graph, validate_placed, validate_with};
pub use workspace::{
    MAX_REPOS, REPO_SCHEMES, RunsOn, WorkspaceProblem, check_workspace, workspace_warnings,
};
pub use yaml_1_1::{ReadsDifferently, boolean_looking_keys, reads_differently};
