//! `http` steps: one request, built from placeholders, with its answer kept
//! as the step's output.
//!
//! The output is `{"status", "ok", "body", "values"}`: `body` is the answer
//! as JSON when it parses, else as text; `values` holds one entry per `keep`
//! name. A keep path is `status`, `ok`, `text`, `json` or `json.` followed by
//! names and list positions (`json.items.0.url`); a path that leads nowhere
//! keeps `null`, so a later step can test for it. `text` is the raw body.
//!
//! Every request carries an `Idempotency-Key` (run uid, step, round and part, attempt),
//! so a receiver can recognise a request repeated after a crash. An answer
//! that is not 2xx fails the attempt with `http.failed`, its status and a
//! short preview of its body.
//!
//! Header values from Secrets are marked sensitive, and go only to the
//! origin they were bound to: a step that binds one follows redirects within
//! that origin and fails on a redirect to any other (so neither the header
//! nor a 307's body reaches it). No request carries a `Referer`. Whatever the
//! server answers, a bound secret's value is replaced by
//! `[redacted secret NAME/KEY]` in the output, the text and the error.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde_json::{Map, Value, json};

use super::net::{self, NetError, NetPolicy, ReadError, Redactor, Redirects};
use super::{Executor, Secrets};
use coxswain_core::api::{HttpStep, StepError};
use coxswain_core::engine::{Done, Task, Work, WorkResult, codes, step_error};
use coxswain_core::flow::parse_duration;
use coxswain_core::template::Place;

/// The name of the header carrying [`Work::idempotency_key`].
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Default limit of a request when the step sets no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on a response body, which the status keeps (as `text`, and
/// parsed in the output): the most it keeps of one value. Reading stops
/// there and the attempt fails.
pub const DEFAULT_RESPONSE_LIMIT: usize = coxswain_core::api::MAX_VALUE_BYTES;
/// How much of a failing answer's body its error message shows.
const PREVIEW_CHARS: usize = 300;

/// Runs `http` steps.
#[derive(Clone)]
pub struct HttpExecutor {
    /// For steps that bind no Secret: redirects to any allowed origin.
    client: reqwest::Client,
    /// For steps that bind a Secret: redirects within the origin only.
    bound: reqwest::Client,
    secrets: Arc<dyn Secrets>,
    policy: Arc<NetPolicy>,
    response_limit: usize,
}

impl std::fmt::Debug for HttpExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpExecutor")
            .field("policy", &self.policy)
            .field("response_limit", &self.response_limit)
            .finish_non_exhaustive()
    }
}

impl HttpExecutor {
    /// An executor with the local network policy (link-local and cloud
    /// metadata addresses denied) and the default response cap; header
    /// secrets come from `secrets`. The controller uses
    /// [`HttpExecutor::with_policy`] with [`NetPolicy::cluster`].
    pub fn new(secrets: Arc<dyn Secrets>) -> Result<Self, NetError> {
        Self::with_policy(secrets, NetPolicy::local())
    }

    /// An executor that follows `policy` instead of the local defaults.
    pub fn with_policy(secrets: Arc<dyn Secrets>, policy: NetPolicy) -> Result<Self, NetError> {
        let policy = Arc::new(policy);
        Ok(HttpExecutor {
            client: net::client(policy.clone(), Redirects::AnyOrigin)?,
            bound: net::client(policy.clone(), Redirects::SameOrigin)?,
            secrets,
            policy,
            response_limit: DEFAULT_RESPONSE_LIMIT,
        })
    }

    /// Sets the largest response body accepted, in bytes.
    pub fn with_response_limit(mut self, bytes: usize) -> Self {
        self.response_limit = bytes;
        self
    }

    /// One request; every secret value it resolves is added to `redactor`.
    async fn send(
        &self,
        work: &Work,
        step: &HttpStep,
        redactor: &mut Redactor,
    ) -> Result<Done, StepError> {
        let method_name = step.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
        let method = match method_name.as_str() {
            "GET" => Method::GET,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "PATCH" => Method::PATCH,
            "DELETE" => Method::DELETE,
            "HEAD" => Method::HEAD,
            other => {
                return Err(http_error(format!(
                    "`{other}` is not a method an http step can use (GET, POST, PUT, PATCH, DELETE, HEAD)"
                )));
            }
        };
        let url_text = net::render(&step.url, Place::Url, &work.data)?;
        let url = Url::parse(&url_text)
            .map_err(|e| http_error(format!("`{url_text}` is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(http_error(format!(
                "only http and https URLs can be requested, not {}",
                url.scheme()
            )));
        }
        self.policy
            .check_url(&url)
            .await
            .map_err(|e| http_error(e.to_string()))?;
        let shown = format!("{method_name} {}", net::redact(&url));

        let mut query = Vec::with_capacity(step.query.len());
        for pair in &step.query {
            query.push((
                pair.name.clone(),
                net::render(&pair.value, Place::Query, &work.data)?,
            ));
        }
        let headers = self.headers(work, step, redactor).await?;

        let timeout = match &step.timeout {
            Some(text) => parse_duration(text).map_err(|e| http_error(format!("timeout: {e}")))?,
            None => DEFAULT_TIMEOUT,
        };
        let timeout = net::shortest(timeout, work.timeout);

        let binds_secret = step.headers.iter().any(|h| h.value_from.is_some());
        let client = if binds_secret {
            &self.bound
        } else {
            &self.client
        };
        let mut request = client.request(method, url).timeout(timeout);
        if !query.is_empty() {
            request = request.query(&query);
        }
        request = request.headers(headers);
        if let Some(body) = &step.body {
            match (&body.json, &body.text, &body.form) {
                (Some(src), None, None) => {
                    let text = net::render(src, Place::Json, &work.data)?;
                    request = request.header(CONTENT_TYPE, "application/json").body(text);
                }
                (None, Some(src), None) => {
                    let text = net::render(src, Place::Text, &work.data)?;
                    request = request
                        .header(CONTENT_TYPE, "text/plain; charset=utf-8")
                        .body(text);
                }
                (None, None, Some(fields)) => {
                    let mut pairs = Vec::with_capacity(fields.len());
                    for pair in fields {
                        pairs.push((
                            pair.name.clone(),
                            net::render(&pair.value, Place::Form, &work.data)?,
                        ));
                    }
                    request = request.form(&pairs);
                }
                (None, None, None) => {}
                _ => {
                    return Err(http_error(
                        "a body gives exactly one of `json`, `text` or `form`".to_string(),
                    ));
                }
            }
        }

        let response = request
            .send()
            .await
            .map_err(|e| request_error(&shown, timeout, &e))?;
        let status = response.status();
        let bytes = match net::read_capped(response, self.response_limit).await {
            Ok(bytes) => bytes,
            Err(e @ ReadError::TooLarge(_)) => {
                return Err(http_error(format!("{shown}: {e}")));
            }
            Err(ReadError::Failed(e)) => return Err(request_error(&shown, timeout, &e)),
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !status.is_success() {
            let preview = net::preview(text.trim(), PREVIEW_CHARS);
            let preview = if preview.is_empty() {
                "(empty body)".to_string()
            } else {
                preview
            };
            return Err(http_error(format!("{shown} answered {status}: {preview}")));
        }
        let parsed = serde_json::from_slice::<Value>(&bytes).ok();
        let mut values = Map::new();
        for (name, path) in &step.keep {
            values.insert(
                name.clone(),
                keep(path, status.as_u16(), &text, parsed.as_ref()),
            );
        }
        let output = json!({
            "status": status.as_u16(),
            "ok": true,
            "body": parsed.unwrap_or_else(|| Value::String(text.clone())),
            "values": values,
        });
        Ok(Done {
            output,
            text: Some(text),
            usage: None,
            log: None,
        })
    }

    async fn headers(
        &self,
        work: &Work,
        step: &HttpStep,
        redactor: &mut Redactor,
    ) -> Result<HeaderMap, StepError> {
        let mut headers = HeaderMap::new();
        let key = HeaderValue::from_str(&work.idempotency_key()).map_err(|_| {
            http_error("the idempotency key cannot be sent as a header".to_string())
        })?;
        headers.insert(HeaderName::from_static(IDEMPOTENCY_KEY), key);
        for header in &step.headers {
            let name = HeaderName::from_bytes(header.name.as_bytes())
                .map_err(|_| http_error(format!("`{}` is not a valid header name", header.name)))?;
            let value = match (&header.value, &header.value_from) {
                (Some(src), _) => {
                    let text = net::render(src, Place::Header, &work.data)?;
                    HeaderValue::from_str(&text).map_err(|_| {
                        http_error(format!(
                            "the value of header {} holds characters a header cannot carry",
                            header.name
                        ))
                    })?
                }
                (None, Some(from)) => {
                    let r = &from.secret_key_ref;
                    let secret = self.secrets.get(&r.name, &r.key).await.map_err(|e| {
                        step_error(codes::SECRET, format!("header {}: {e}", header.name))
                    })?;
                    redactor.add(&r.name, &r.key, &secret);
                    // Never echo the value: say only which secret was unusable.
                    let mut value = HeaderValue::from_str(&secret).map_err(|_| {
                        step_error(
                            codes::SECRET,
                            format!(
                                "header {}: secret `{}` key `{}` holds characters a header cannot carry",
                                header.name, r.name, r.key
                            ),
                        )
                    })?;
                    value.set_sensitive(true);
                    value
                }
                (None, None) => HeaderValue::from_static(""),
            };
            if name.as_str() == IDEMPOTENCY_KEY {
                headers.insert(name, value);
            } else {
                headers.append(name, value);
            }
        }
        Ok(headers)
    }
}

impl Executor for HttpExecutor {
    async fn run(&self, work: &Work) -> WorkResult {
        match &work.task {
            Task::Http(step) => {
                let mut redactor = Redactor::new();
                match self.send(work, step, &mut redactor).await {
                    Ok(done) => Ok(redactor.done(done)),
                    Err(error) => Err(redactor.error(error).into()),
                }
            }
            _ => Err(http_error("the http executor only runs http steps".to_string()).into()),
        }
    }
}

fn http_error(message: String) -> StepError {
    step_error(codes::HTTP, message)
}

/// A request that got no answer: a timeout is `workflow.timeout`, anything
/// else `http.failed` with the cause (which never includes header values).
fn request_error(shown: &str, timeout: Duration, err: &reqwest::Error) -> StepError {
    if err.is_timeout() {
        return step_error(
            codes::TIMEOUT,
            format!(
                "{shown} got no complete answer within {}s",
                timeout.as_secs_f64()
            ),
        );
    }
    let mut cause = net::chain(err);
    if let Some(url) = err.url() {
        // reqwest names the full URL; keep the query out of the message.
        cause = cause.replace(url.as_str(), &net::redact(url));
    }
    http_error(format!("{shown} failed: {cause}"))
}

/// The value a keep path names in an answer; `null` when it leads nowhere.
pub fn keep(path: &str, status: u16, text: &str, body: Option<&Value>) -> Value {
    let mut parts = path.split('.');
    match parts.next() {
        Some("status") if path == "status" => json!(status),
        Some("ok") if path == "ok" => json!((200..300).contains(&status)),
        Some("text") if path == "text" => Value::String(text.to_string()),
        Some("json") => {
            let Some(mut current) = body else {
                return Value::Null;
            };
            for part in parts {
                let next = match current {
                    Value::Object(map) => map.get(part),
                    Value::Array(list) => part.parse::<usize>().ok().and_then(|i| list.get(i)),
                    _ => None,
                };
                match next {
                    Some(v) => current = v,
                    None => return Value::Null,
                }
            }
            current.clone()
        }
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_paths() {
        let body = json!({"a": [{"b": 1}], "n": null});
        assert_eq!(keep("json.a.0.b", 200, "", Some(&body)), json!(1));
        assert_eq!(keep("json.a.1.b", 200, "", Some(&body)), Value::Null);
        assert_eq!(keep("json", 200, "", Some(&body)), body);
        assert_eq!(keep("status", 201, "", Some(&body)), json!(201));
        assert_eq!(keep("text", 200, "raw", None), json!("raw"));
        assert_eq!(keep("json.a", 200, "raw", None), Value::Null);
        assert_eq!(keep("headers.x", 200, "raw", None), Value::Null);
    }
}
