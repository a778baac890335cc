//! Live pages: Server-Sent Events fed by watches of the API server, made
//! with the caller's credentials. Nothing is polled and nothing is kept:
//! each change is sent as the page would fetch it.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use coxswain_core::api::{Approval, Run};
use futures::{Stream, StreamExt, stream};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as Watched};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::run_page::{RunRow, get_run, page};

/// Each change to a namespace's runs: `run` with the run's row, `deleted`
/// with its name; `failure` when the watch cannot go on (not `error`,
/// which browsers also fire for a dropped connection).
pub fn runs(api: Api<Run>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .map(|event| {
            Ok(match event {
                Ok(Watched::Apply(run) | Watched::InitApply(run)) => {
                    json_event("run", &json!(RunRow::of(&run)))
                }
                Ok(Watched::Delete(run)) => json_event("deleted", &json!({"name": run.name_any()})),
                Ok(Watched::Init) => Event::default().event("init").data("{}"),
                Ok(Watched::InitDone) => Event::default().event("ready").data("{}"),
                Err(e) => json_event("failure", &json!({"error": e.to_string()})),
            })
        });
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// The run's page, sent again each time the Run or one of its Approvals
/// changes.
pub fn run(
    client: Client,
    ns: String,
    name: String,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let runs: Api<Run> = Api::namespaced(client.clone(), &ns);
    let approvals: Api<Approval> = Api::namespaced(client.clone(), &ns);
    let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let by_label = watcher::Config::default()
        .labels(&format!("{}={name}", coxswain_kube::names::RUN_NAME_LABEL));
    let changes = stream::select(
        watcher::watcher(runs, by_name)
            .default_backoff()
            .map(|e| e.map(|_| ()).map_err(|e| e.to_string())),
        watcher::watcher(approvals, by_label)
            .default_backoff()
            .map(|e| e.map(|_| ()))
            // Someone who may not list Approvals still follows the run.
            .filter_map(|e| async move { e.ok().map(Ok) }),
    );
    let events = changes.then(move |change| {
        let (client, ns, name) = (client.clone(), ns.clone(), name.clone());
        async move {
            Ok(match change {
                Err(e) => json_event("failure", &json!({"error": e})),
                Ok(()) => match get_run(&client, &ns, &name).await {
                    Ok(run) => match page(&client, &run).await {
                        Ok(page) => json_event("run", &json!(page)),
                        Err(e) => json_event("failure", &json!({"error": e.to_string()})),
                    },
                    Err(e) => json_event("failure", &json!({"error": e.to_string()})),
                },
            })
        }
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// `events`, then nothing but keep-alives: a local viewer's stream, whose
/// files are read once at start and not watched.
pub fn once(events: Vec<Event>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let events = stream::iter(events.into_iter().map(Ok)).chain(stream::pending());
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// An event named `name` carrying `data`.
pub fn json_event(name: &str, data: &serde_json::Value) -> Event {
    Event::default().event(name).data(data.to_string())
}
