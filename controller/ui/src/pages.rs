//! The pages: one HTML document and its script and style, built into the
//! binary. Every address a person may share (`/namespaces/NS/runs/NAME`)
//! serves the same document; the script reads the address and asks the
//! JSON API under `/api/v1` for what to draw.

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use std::sync::Arc;

use crate::Shared;

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");

/// The page routes.
pub fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route(
            "/",
            get(
                |axum::extract::State(shared): axum::extract::State<Arc<Shared>>| async move {
                    Redirect::to(&format!("/namespaces/{}/runs", shared.namespace))
                },
            ),
        )
        .route("/sign-in", get(index))
        .route("/namespaces/{ns}/runs", get(index))
        .route("/namespaces/{ns}/runs/{name}", get(index))
        .route("/namespaces/{ns}/flows", get(index))
        .route("/namespaces/{ns}/flows/{name}", get(index))
        .route(
            "/assets/app.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    SCRIPT,
                )
            }),
        )
        .route(
            "/assets/app.css",
            get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE) }),
        )
}

async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
            ),
        ],
        INDEX,
    )
}
