//! What the fault and restart tests run: a flow whose script step (a Job)
//! echoes a number, whose http step (in the controller) has a local server
//! double it, and whose condition asks whether the double is over 6 — and
//! how to tell that a run of it ended right.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::get;
use coxswain_e2e::{Kubectl, TestNamespace};
use serde_json::{Value, json};

/// Where these tests start: a [`Doubler`] serving, kubectl with the CRDs
/// installed, and a namespace of the test's own.
pub async fn start() -> (SocketAddr, Doubler, Kubectl, TestNamespace) {
    let (addr, doubler) = Doubler::serve().await;
    let (kubectl, ns) = coxswain_e2e::kubectl_and_namespace().await;
    (addr, doubler, kubectl, ns)
}

/// The http step's server: `GET /double?num=N` answers `{"n": 2N}` and
/// remembers each call's `Idempotency-Key` by `N`.
#[derive(Clone, Default)]
pub struct Doubler {
    calls: Arc<Mutex<BTreeMap<u64, Vec<String>>>>,
}

impl Doubler {
    /// Starts it on a free loopback port.
    pub async fn serve() -> (SocketAddr, Doubler) {
        let doubler = Doubler::default();
        let app = axum::Router::new()
            .route("/double", get(double))
            .with_state(doubler.clone());
        let addr = coxswain_e2e::serve_on_loopback(app).await;
        (addr, doubler)
    }

    /// The `Idempotency-Key` of each call for `num`, in order.
    pub fn calls(&self, num: u64) -> Vec<String> {
        self.calls
            .lock()
            .expect("lock")
            .get(&num)
            .cloned()
            .unwrap_or_default()
    }
}

async fn double(
    State(d): State<Doubler>,
    Query(q): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> axum::Json<Value> {
    let n: u64 = q.get("num").and_then(|n| n.parse().ok()).unwrap_or(0);
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    d.calls
        .lock()
        .expect("lock")
        .entry(n)
        .or_default()
        .push(key);
    axum::Json(json!({"n": 2 * n}))
}

/// The Flow `doubling`: its script sleeps `pause` seconds first (to keep
/// runs in flight), then echoes `$input.num`.
pub fn flow(addr: SocketAddr, pause: u32) -> String {
    format!(
        r#"
apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: doubling}}
spec:
  steps:
    - key: make
      input: {{num: $input.num}}
      script:
        source: |
          sleep {pause}
          echo "{{\"num\": $(sed 's/[^0-9]//g' "$INPUTS/num")}}"
        output:
          fields: [{{name: num, type: integer}}]
    - key: double
      http:
        url: "http://{addr}/double"
        query: [{{name: num, value: "{{{{make.json.num}}}}"}}]
    - key: big
      condition: {{when: $steps.double.output.body.n > 6}}
"#
    )
}

/// Whether a finished run of `doubling` with input `num` ended right:
/// succeeded, each step's output as computed, one attempt per step.
pub fn ended_right(run: &Value, num: u64) -> bool {
    let status = &run["status"];
    let steps = &status["steps"];
    status["phase"] == "Succeeded"
        && steps["make"]["output"]["num"] == json!(num)
        && steps["double"]["output"]["body"]["n"] == json!(2 * num)
        && steps["big"]["exit"] == json!(if 2 * num > 6 { "true" } else { "false" })
        && steps.as_object().is_some_and(|s| {
            s.values()
                .all(|step| step["attempts"].as_array().is_none_or(|a| a.len() == 1))
        })
}
