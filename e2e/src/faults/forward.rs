//! The proxy's HTTP side: each request is counted, given its fate by the
//! dice, and either answered with a Kubernetes `Status` error or forwarded
//! to the API server (a watch's response stream possibly cut short).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{Client, connect::HttpConnector};

use super::plan::{Decision, Dice, Fault, Loss, Request as Asked};
use super::tally::{Seen, Tally, classify};

/// Any error a body can end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The response body the proxy sends.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// Everything a request needs: where to forward, the dice, the tally.
pub struct Forwarder {
    /// A client that trusts the API server's CA.
    pub client: Client<HttpsConnector<HttpConnector>, ProxyBody>,
    /// `https://127.0.0.1:PORT` of the API server.
    pub upstream: Uri,
    /// Fault decisions.
    pub dice: Dice,
    /// What was asked.
    pub tally: Tally,
}

impl Forwarder {
    /// Serves one request. It fails (and hyper closes the connection
    /// without an answer) only for a write whose answer is lost by cutting
    /// the connection; an unreachable API server is a 502.
    pub async fn serve(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<ProxyBody>, BoxError> {
        let method = req.method().as_str().to_string();
        let path = req.uri().path().to_string();
        let kind = classify(&method, &path, req.uri().query());
        // A create names its object in the body, not the path: two creates
        // are the same request when their bodies are the same.
        let (req, target) = if kind.verb == "create" {
            let (parts, body) = req.into_parts();
            let bytes = match body.collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    return Ok(plain(
                        StatusCode::BAD_REQUEST,
                        format!("fault proxy: reading the request: {e}"),
                    ));
                }
            };
            let target = format!("{method} {path} #{:016x}", digest(&bytes));
            (Request::from_parts(parts, full_bytes(bytes)), target)
        } else {
            // Lists of one path with other selectors (the pods of two Jobs)
            // are other requests; a retry repeats its selectors.
            let target = format!("{method} {path}{}", selectors(req.uri().query()));
            (req.map(|b| b.map_err(BoxError::from).boxed()), target)
        };
        let decision = self.dice.decide(Asked::of(&kind));
        let fault = match decision {
            Decision::Forward => None,
            Decision::Answer(f) => Some(f),
            Decision::Delay(_) => Some(Fault::Delay),
            Decision::CutAfter(_) => Some(Fault::CutWatch),
            Decision::Lose(_) => Some(Fault::LostResponse),
        };
        self.tally.record(Seen {
            at: Instant::now(),
            kind,
            target,
            fault,
        });
        Ok(match decision {
            Decision::Answer(fault) => status_error(fault, &path),
            Decision::Delay(pause) => {
                tokio::time::sleep(pause).await;
                self.forward(req, None).await
            }
            Decision::CutAfter(after) => self.forward(req, Some(after)).await,
            Decision::Forward => self.forward(req, None).await,
            Decision::Lose(loss) => return self.lose(req, loss, &path).await,
        })
    }

    /// Forwards a write, waits for the whole of the API server's answer
    /// (the write is applied by then), and gives the client `loss` instead.
    async fn lose(
        &self,
        req: Request<ProxyBody>,
        loss: Loss,
        path: &str,
    ) -> Result<Response<ProxyBody>, BoxError> {
        let answer = self.forward(req, None).await;
        let code = answer.status();
        let _ = answer.into_body().collect().await;
        let lost = format!("the fault proxy lost the API server's {code} answer to {path}");
        match loss {
            Loss::Internal => Ok(status(500, "InternalError", lost)),
            Loss::Unavailable => Ok(status(503, "ServiceUnavailable", lost)),
            Loss::Cut => Err(lost.into()),
        }
    }

    async fn forward(&self, req: Request<ProxyBody>, cut: Option<Duration>) -> Response<ProxyBody> {
        let (mut parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let uri = format!(
            "{}{}",
            self.upstream.to_string().trim_end_matches('/'),
            path
        );
        parts.uri = match uri.parse() {
            Ok(u) => u,
            Err(e) => return plain(StatusCode::BAD_REQUEST, format!("bad path {path}: {e}")),
        };
        parts.headers.remove(hyper::header::HOST);
        match self.client.request(Request::from_parts(parts, body)).await {
            Ok(response) => {
                let (mut parts, body) = response.into_parts();
                for hop in ["connection", "keep-alive", "transfer-encoding"] {
                    parts.headers.remove(hop);
                }
                let body = match cut {
                    Some(after) => Cut::new(body, after).boxed(),
                    None => body.map_err(BoxError::from).boxed(),
                };
                Response::from_parts(parts, body)
            }
            Err(e) => plain(
                StatusCode::BAD_GATEWAY,
                format!("fault proxy: the API server did not answer: {e}"),
            ),
        }
    }
}

/// A Kubernetes `Status` error as the API server writes it, so clients
/// parse it as they would a real one.
fn status_error(fault: Fault, path: &str) -> Response<ProxyBody> {
    let (code, reason) = match fault {
        Fault::Conflict => (409, "Conflict"),
        Fault::TooManyRequests => (429, "TooManyRequests"),
        Fault::Internal => (500, "InternalError"),
        _ => (503, "ServiceUnavailable"),
    };
    status(
        code,
        reason,
        format!("the fault proxy injected {reason} for {path}"),
    )
}

/// A `Status` error with this code, reason and message.
fn status(code: u16, reason: &str, message: String) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": if code == 429 { serde_json::json!({"retryAfterSeconds": 1}) } else { serde_json::json!({}) },
        "code": code,
    });
    let mut response = Response::new(full(body.to_string()));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if code == 429 {
        headers.insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("1"),
        );
    }
    response
}

fn plain(status: StatusCode, text: String) -> Response<ProxyBody> {
    let mut response = Response::new(full(text));
    *response.status_mut() = status;
    response
}

fn full(text: String) -> ProxyBody {
    full_bytes(Bytes::from(text))
}

fn full_bytes(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// FNV-1a: enough to tell request bodies apart in a report.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A response body that ends with an error after a while: hyper then
/// closes the connection mid-stream, as a dropped connection or a
/// restarted load balancer would, without the final chunk.
struct Cut {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Cut {
    fn new(inner: Incoming, after: Duration) -> Self {
        Self {
            inner,
            deadline: Box::pin(tokio::time::sleep(after)),
        }
    }
}

impl Body for Cut {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err("the fault proxy cut this watch".into())));
        }
        Pin::new(&mut this.inner)
            .poll_frame(cx)
            .map_err(BoxError::from)
    }
}

/// The label and field selectors of a query (`?labelSelector=…`), as they
/// were sent, or nothing.
fn selectors(query: Option<&str>) -> String {
    let kept: Vec<&str> = query
        .unwrap_or_default()
        .split('&')
        .filter(|p| p.starts_with("labelSelector=") || p.starts_with("fieldSelector="))
        .collect();
    if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    }
}

#[cfg(test)]
mod selector_tests {
    use super::selectors;

    #[test]
    fn only_selectors_tell_two_lists_of_one_path_apart() {
        assert_eq!(
            selectors(Some(
                "labelSelector=job-name%3Da&limit=500&resourceVersion=7"
            )),
            "?labelSelector=job-name%3Da"
        );
        assert_eq!(selectors(Some("watch=true&resourceVersion=9")), "");
        assert_eq!(selectors(None), "");
    }
}
