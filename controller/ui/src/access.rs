//! Whose credentials reach the API server, and who may reach the viewer.
//!
//! With `--auth kubeconfig` the viewer is the person at the machine: it
//! uses their kubeconfig and listens on loopback. Another web page open in
//! the same browser must not act through it, so every request must name a
//! loopback host (no DNS rebinding) and every write must carry a header no
//! cross-site form can send.
//!
//! With `--auth token` (in a cluster) the viewer holds no rights at all:
//! each person signs in with a bearer token (from `kubectl create token` or
//! their OIDC provider) and every API call is made with it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, Json};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::PostParams;
use kube::config::AuthInfo;
use kube::{Api, Client, Config};
use serde::Deserialize;
use serde_json::json;

use crate::Shared;
use crate::error::ApiError;

/// The cookie a signed-in person's token is kept in (HttpOnly, SameSite=Strict).
pub const TOKEN_COOKIE: &str = "coxswain_token";

/// The header every write must carry: a cross-site form cannot set it, and
/// a cross-site script cannot without a CORS preflight the viewer never
/// answers.
pub const WRITE_HEADER: &str = "x-coxswain";

/// Whose credentials reach the API server.
pub enum Access {
    /// The kubeconfig's user, for a person on their own machine.
    Kubeconfig(Client),
    /// Each request's bearer token, on the cluster `base` points at (its
    /// own credentials are never used).
    Token(Box<Config>),
    /// No cluster at all: local mode shows runs made on this machine.
    Local,
}

/// Why the viewer cannot start with the access asked for.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// No kubeconfig and not in a cluster.
    #[error("cannot find the cluster: {0}")]
    Config(String),
    /// The kubeconfig does not make a client.
    #[error("cannot use the kubeconfig: {0}")]
    Client(String),
}

impl Access {
    /// The kubeconfig's user (`KUBECONFIG`, `~/.kube/config`, or in-cluster).
    pub async fn kubeconfig() -> Result<(Self, String), AccessError> {
        let config = Config::infer()
            .await
            .map_err(|e| AccessError::Config(e.to_string()))?;
        let namespace = config.default_namespace.clone();
        let client = Client::try_from(config).map_err(|e| AccessError::Client(e.to_string()))?;
        Ok((Access::Kubeconfig(client), namespace))
    }

    /// The cluster of the kubeconfig (or in-cluster), reached only with the
    /// tokens people sign in with.
    pub async fn token() -> Result<(Self, String), AccessError> {
        let mut config = Config::infer()
            .await
            .map_err(|e| AccessError::Config(e.to_string()))?;
        config.auth_info = AuthInfo::default();
        let namespace = config.default_namespace.clone();
        Ok((Access::Token(Box::new(config)), namespace))
    }

    /// A client acting as whoever sent `headers`.
    pub fn client(&self, headers: &HeaderMap) -> Result<Client, ApiError> {
        match self {
            Access::Kubeconfig(client) => Ok(client.clone()),
            Access::Token(base) => {
                let token = bearer(headers).ok_or(ApiError::SignIn)?;
                let mut config = (**base).clone();
                config.auth_info = AuthInfo {
                    token: Some(secrecy::SecretString::from(token)),
                    ..AuthInfo::default()
                };
                Client::try_from(config).map_err(|e| ApiError::Internal(e.to_string()))
            }
            Access::Local => Err(ApiError::BadRequest(
                "this viewer shows local runs (coxswain ui --flow/--record) and reaches no cluster"
                    .into(),
            )),
        }
    }
}

/// The token in `Authorization: Bearer …`, else in the sign-in cookie.
fn bearer(headers: &HeaderMap) -> Option<String> {
    if let Some(token) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(token.trim().to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == TOKEN_COOKIE)
        .map(|(_, token)| token.to_string())
        .filter(|t| !t.is_empty())
}

/// Refuses what must not reach the API server: in kubeconfig mode a
/// request for another host than loopback; in both, a write without
/// [`WRITE_HEADER`] (the sign-in form excepted: it carries no credentials
/// but the one it sets).
pub async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if matches!(shared.access, Access::Kubeconfig(_) | Access::Local)
        && !loopback_host(request.headers())
    {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "coxswain ui acts with your kubeconfig (or shows your local runs) and answers only for localhost or 127.0.0.1",
        )
            .into_response();
    }
    let writes = !matches!(*request.method(), Method::GET | Method::HEAD);
    if writes && request.uri().path() != "/sign-in" && !request.headers().contains_key(WRITE_HEADER)
    {
        return ApiError::Forbidden(format!(
            "a write to the viewer must carry the `{WRITE_HEADER}` header (cross-site forms cannot)"
        ))
        .into_response();
    }
    next.run(request).await
}

fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    matches!(name, "localhost" | "127.0.0.1" | "::1")
}

/// The sign-in form's fields.
#[derive(Deserialize)]
pub struct SignIn {
    token: String,
    #[serde(default)]
    next: Option<String>,
}

/// Keeps the token in an HttpOnly cookie, after checking the API server
/// takes it (a SelfSubjectReview), and goes back where the person was.
pub async fn sign_in(
    State(shared): State<Arc<Shared>>,
    request_headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    if let Some(refusal) = cross_site(&request_headers) {
        return ApiError::Forbidden(refusal).into_response();
    }
    let token = form.token.trim().to_string();
    let mut headers = HeaderMap::new();
    let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}")) else {
        return ApiError::BadRequest("the token holds characters a token never has".into())
            .into_response();
    };
    headers.insert(header::AUTHORIZATION, value);
    let checked = match shared.access.client(&headers) {
        Ok(client) => review(client).await.map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = checked {
        return e.into_response();
    }
    let next = form
        .next
        .as_deref()
        .and_then(same_origin_path)
        .unwrap_or_else(|| "/".into());
    // Behind an HTTPS ingress the browser never sends the token in clear.
    let secure = request_headers
        .get("x-forwarded-proto")
        .is_some_and(|p| p.as_bytes().eq_ignore_ascii_case(b"https"));
    let cookie = format!(
        "{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    );
    let mut response = Redirect::to(&next).into_response();
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// Why a sign-in comes from another site, if it does: the browser says so
/// in `Sec-Fetch-Site`, or its `Origin` names another host than the one
/// asked. A page elsewhere could otherwise sign a person into its own
/// session (login CSRF). A request with neither header (not a browser's)
/// carries no cookie of the person's, so it is let through.
fn cross_site(headers: &HeaderMap) -> Option<String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site")
        && !matches!(site, "same-origin" | "none")
    {
        return Some(format!(
            "a sign-in must come from the viewer's own page (Sec-Fetch-Site: {site})"
        ));
    }
    let origin = text(header::ORIGIN.as_str())?;
    let host = text(header::HOST.as_str()).unwrap_or_default();
    let authority = url::Url::parse(origin).ok().and_then(|u| {
        let name = u.host_str()?.to_string();
        Some(match u.port() {
            Some(port) => format!("{name}:{port}"),
            None => name,
        })
    });
    match authority {
        Some(a) if a.eq_ignore_ascii_case(host) => None,
        _ => Some(format!(
            "a sign-in must come from the viewer's own page (Origin {origin} is not {host})"
        )),
    }
}

/// `next` as a path on this viewer, or `None` when it would lead anywhere
/// else. Parsed as a URL reference against a placeholder origin (not
/// pattern-matched): what keeps that origin is a path here. A backslash or
/// a control character is refused outright, since browsers read `/\host`
/// as `//host`.
fn same_origin_path(next: &str) -> Option<String> {
    if !next.starts_with('/') || next.chars().any(|c| c == '\\' || c.is_control()) {
        return None;
    }
    let base = url::Url::parse("http://viewer.invalid/").ok()?;
    let joined = base.join(next).ok()?;
    if joined.origin() != base.origin() {
        return None;
    }
    Some(joined[url::Position::BeforePath..].to_string())
}

/// Who the API server says the caller is.
async fn review(client: Client) -> Result<serde_json::Value, ApiError> {
    let api: Api<SelfSubjectReview> = Api::all(client);
    let reviewed = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(ApiError::from)?;
    let user = reviewed
        .status
        .and_then(|s| s.user_info)
        .unwrap_or_default();
    Ok(json!({
        "username": user.username,
        "groups": user.groups.unwrap_or_default(),
    }))
}

/// `GET /api/v1/whoami`: the caller as the API server knows them, and the
/// namespace pages open on.
pub async fn whoami(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    if matches!(shared.access, Access::Local) {
        let name = std::env::var("USER").unwrap_or_else(|_| "you".into());
        return Ok(Json(json!({
            "username": format!("{name} (local runs)"),
            "groups": [],
            "namespace": crate::local::NAMESPACE,
            "auth": "local",
        })));
    }
    let client = shared.access.client(&headers)?;
    let mut user = review(client).await?;
    user["namespace"] = json!(shared.namespace);
    user["auth"] = json!(match shared.access {
        Access::Kubeconfig(_) => "kubeconfig",
        Access::Token(_) => "token",
        Access::Local => "local",
    });
    Ok(Json(user))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_only_ever_a_path_on_this_viewer() {
        assert_eq!(
            same_origin_path("/runs/ns/a?x=1#s").as_deref(),
            Some("/runs/ns/a?x=1#s")
        );
        assert_eq!(same_origin_path("/").as_deref(), Some("/"));
        for off_site in [
            "//attacker.example/",
            "/\\attacker.example/",
            "/\\/attacker.example",
            "\\\\attacker.example",
            "https://attacker.example/",
            "/\tattacker",
            "/\n/attacker.example",
            "attacker.example",
            "",
            "///attacker.example",
        ] {
            assert_eq!(same_origin_path(off_site), None, "{off_site:?}");
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, HeaderValue::from_str(value).expect("a header value"));
        }
        h
    }

    #[test]
    fn a_sign_in_from_another_site_is_refused() {
        let own = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ];
        assert_eq!(cross_site(&headers(&own)), None);
        let ingress = [
            ("host", "coxswain.example"),
            ("origin", "https://coxswain.example"),
            ("sec-fetch-site", "same-origin"),
        ];
        assert_eq!(cross_site(&headers(&ingress)), None);
        assert_eq!(
            cross_site(&headers(&[("host", "127.0.0.1:8080")])),
            None,
            "not a browser"
        );
        for refused in [
            vec![
                ("host", "127.0.0.1:8080"),
                ("origin", "https://attacker.example"),
            ],
            vec![("host", "127.0.0.1:8080"), ("origin", "null")],
            vec![
                ("host", "127.0.0.1:8080"),
                ("origin", "http://127.0.0.1:9090"),
            ],
            vec![("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")],
            vec![("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")],
        ] {
            let why = cross_site(&headers(&refused));
            assert!(
                why.as_deref()
                    .is_some_and(|w| w.contains("viewer's own page")),
                "{refused:?}"
            );
        }
    }
}
