//! What the viewer answers when something cannot be done: the status code
//! and message the API server gave (a webhook's refusal word for word), or
//! the viewer's own, as JSON `{"error": …, "code": …}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An answer that is not the page or data asked for.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No token came with the request (`--auth token`).
    #[error(
        "sign in: this viewer acts as you, with a bearer token (kubectl create token, or your OIDC id token)"
    )]
    SignIn,
    /// The API server refused or failed; its code and message.
    #[error("{message}")]
    Kube {
        /// The HTTP status the API server answered.
        code: u16,
        /// Its message (an admission webhook's refusal as it came).
        message: String,
    },
    /// Not there.
    #[error("{0}")]
    NotFound(String),
    /// The request itself is wrong.
    #[error("{0}")]
    BadRequest(String),
    /// The viewer refuses.
    #[error("{0}")]
    Forbidden(String),
    /// What the API server holds cannot be trusted or read.
    #[error("{0}")]
    Conflict(String),
    /// The viewer failed.
    #[error("{0}")]
    Internal(String),
}

impl From<kube::Error> for ApiError {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => ApiError::Kube {
                code: status.code,
                message: status.message,
            },
            other => ApiError::Kube {
                code: 502,
                message: format!("the Kubernetes API could not be reached: {other}"),
            },
        }
    }
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::SignIn => StatusCode::UNAUTHORIZED,
            ApiError::Kube { code, .. } => {
                StatusCode::from_u16(*code).unwrap_or(StatusCode::BAD_GATEWAY)
            }
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        (
            status,
            Json(json!({"error": self.to_string(), "code": status.as_u16()})),
        )
            .into_response()
    }
}
