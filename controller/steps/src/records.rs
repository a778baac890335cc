//! Saves and lookups: the two places a run meets the records database.
//!
//! A `save` step is work like any other ([`Task::Save`]), run where the
//! driver runs in-process work (the controller, or `coxswain run`); its
//! idempotency key is the attempt's ([`Work::idempotency_key`]), so an
//! attempt run again after a crash saves once. A step's lookups run before
//! its work starts: the driver calls [`Records::look_up`] for work that
//! says [`Work::lookups_due`] and hands the answer to the engine, which
//! records it in the attempt.

use serde_json::{Map, Value};

use coxswain_core::engine::{
    ApprovalRequest, DataView, Done, Failed, LookupWork, RunInfo, Task, Work, WorkResult, codes,
    step_error,
};
use coxswain_core::expr::{self, Expr};
use coxswain_records::{Lookup, LookupError, Saving, Store, StoreError};

use super::Executor;

/// The run's records database, or why there is none (a flow that saves or
/// looks up fails its step with that reason).
#[derive(Debug, Clone)]
pub struct Records {
    store: Result<Store, String>,
}

impl Default for Records {
    fn default() -> Self {
        Records::unavailable("no records database is open for this run")
    }
}

impl Records {
    /// Records in `store`.
    pub fn new(store: Store) -> Self {
        Records { store: Ok(store) }
    }

    /// No records database: every save and lookup fails saying `why` (which
    /// setting to give).
    pub fn unavailable(why: impl Into<String>) -> Self {
        Records {
            store: Err(why.into()),
        }
    }

    /// The database, when there is one.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref().ok()
    }

    fn get(&self) -> Result<&Store, coxswain_core::api::StepError> {
        self.store
            .as_ref()
            .map_err(|why| step_error(codes::RECORDS, why.clone()))
    }

    /// Runs every lookup of `work` still due, in the run's namespace, and
    /// answers what each found (a JSON array of records) by name; the first
    /// that fails fails them all, with a message naming the lookup.
    pub async fn look_up(&self, work: &Work) -> Result<Map<String, Value>, LookupFailed> {
        self.look_up_all(&work.lookups, &work.data, &work.run).await
    }

    /// [`Records::look_up`] for a person step: the lookups of `request`,
    /// whose found records are shown to the person.
    pub async fn look_up_for(
        &self,
        request: &ApprovalRequest,
        run: &RunInfo,
    ) -> Result<Map<String, Value>, LookupFailed> {
        self.look_up_all(&request.lookups, &request.data, run).await
    }

    async fn look_up_all(
        &self,
        lookups: &[LookupWork],
        data: &DataView,
        run: &RunInfo,
    ) -> Result<Map<String, Value>, LookupFailed> {
        let store = self.get().map_err(LookupFailed::Step)?;
        let mut found = Map::new();
        for lookup in lookups {
            let records = match &lookup.found {
                Some(done) => done.clone(),
                None => one_lookup(store, data, run, lookup).await?,
            };
            found.insert(lookup.name.clone(), records);
        }
        Ok(found)
    }

    async fn save(&self, work: &Work) -> WorkResult {
        let Task::Save(save) = &work.task else {
            return Err(Failed::from(step_error(
                codes::INTERNAL,
                "the records executor was handed work that is not a save",
            )));
        };
        let store = self.get()?;
        let saving = Saving {
            namespace: work.run.namespace.clone(),
            collection: save.collection.clone(),
            key: save.key_text()?,
            value: save.value.clone(),
            run: work.run.name.clone(),
            step: work.step.clone(),
            idempotency: work.idempotency_key(),
        };
        let saved = store.save(&saving).await.map_err(|e| {
            // A value too deep to keep is refused as an output is.
            let code = match e {
                StoreError::TooDeep { .. } => codes::OUTPUT,
                _ => codes::RECORDS,
            };
            step_error(
                code,
                format!("saving `{}` in `{}`: {e}", saving.key, saving.collection),
            )
        })?;
        let output = serde_json::to_value(&saved).unwrap_or(Value::Null);
        Ok(Done::output(output))
    }
}

impl Executor for Records {
    async fn run(&self, work: &Work) -> WorkResult {
        self.save(work).await
    }
}

/// Why lookups gave no answer.
#[derive(Debug, Clone, PartialEq)]
pub enum LookupFailed {
    /// The attempt fails with this error (its `where` fails on a record,
    /// too many candidates, no database configured).
    Step(coxswain_core::api::StepError),
    /// The database could not be reached or failed for now: the driver tries
    /// again later rather than fail the attempt. A record that cannot be
    /// read back is no such failure: it fails the attempt
    /// ([`LookupFailed::Step`]), naming the collection and key.
    Unavailable(String),
}

async fn one_lookup(
    store: &Store,
    data: &DataView,
    run: &RunInfo,
    lookup: &LookupWork,
) -> Result<Value, LookupFailed> {
    let fail = |code: &str, message: String| {
        step_error(code, format!("lookup `{}`: {message}", lookup.name))
    };
    let parse = |text: &str| -> Result<Expr, LookupFailed> {
        expr::parse(text).map_err(|e| LookupFailed::Step(fail(codes::EXPRESSION, e.to_string())))
    };
    let condition = lookup.where_.as_deref().map(parse).transpose()?;
    let order = lookup.order_by.as_deref().map(parse).transpose()?;
    let order_by = match &order {
        Some(e) => Some(e.as_reference().ok_or_else(|| {
            LookupFailed::Step(fail(
                codes::EXPRESSION,
                "orderBy must be one reference under `$record`".into(),
            ))
        })?),
        None => None,
    };
    let query = Lookup {
        namespace: &run.namespace,
        collection: &lookup.collection,
        condition: condition.as_ref(),
        scope: data,
        order_by,
        descending: lookup.descending,
        limit: lookup.limit as usize,
    };
    let records = store.lookup(&query).await.map_err(|e| match e {
        LookupError::Store(StoreError::Connect(_) | StoreError::Database { .. }) => {
            LookupFailed::Unavailable(format!("lookup `{}`: {e}", lookup.name))
        }
        e => LookupFailed::Step(fail(e.code(), e.to_string())),
    })?;
    Ok(Value::Array(records.iter().map(|r| r.to_json()).collect()))
}
