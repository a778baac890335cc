//! A real headless Chromium for tests that look at a page as a person
//! would: open it, wait for what they expect, click, type, choose, read
//! back, and keep a screenshot.
//!
//! It drives Debian's `chromium` through `chromedriver` (package
//! `chromium-driver`) over WebDriver, which is JSON over HTTP: a thin
//! client over reqwest, since the WebDriver client crates bring twenty-odd
//! crates more (an older `http`, `thiserror` and ICU among them) for the
//! dozen calls used here. **Both packages must be installed**
//! (installed when missing through `e2e/packages @browser`);
//! without them [`Browser::start`] fails, naming what is missing. Tests are
//! never skipped for want of a browser.
//!
//! Each [`Browser`] starts its own `chromedriver` on a free port, in a
//! process group of its own, with a temp dir for the browser's profile,
//! scratch files and the driver's log. Dropping it (also while a test
//! panics) kills the whole group, Chromium's processes with it, and removes
//! the dir; if the test process itself is killed, a watcher
//! ([`crate::when_gone`]) does the same.
//!
//! Every element is named by a CSS selector; a selector that matches
//! nothing is an error naming it and the page's address.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use crate::when_gone::WhenGone;

/// The window every page is drawn in, so screenshots have one size.
pub const WINDOW_SIZE: (u32, u32) = (1400, 1000);

/// How long `chromedriver` may take to answer its first status request.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one WebDriver command may take (a page load among them).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How often [`Browser::wait_for`] looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How much of the page's text a timeout error quotes.
const QUOTED_TEXT_LIMIT: usize = 2000;
/// The key WebDriver names an element reference by (W3C spec, fixed).
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// What went wrong driving the browser, in words for the test's author.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// A program the harness runs is not installed.
    #[error(
        "{program} was not found ({looked}); install Debian's `chromium` and `chromium-driver` packages"
    )]
    Missing {
        /// `chromium` or `chromedriver`.
        program: &'static str,
        /// Where it was looked for.
        looked: String,
    },
    /// `chromedriver` did not start or did not become ready.
    #[error("chromedriver did not start: {reason}")]
    DriverStart {
        /// What happened, with the tail of its log.
        reason: String,
    },
    /// A command's HTTP request failed (the driver died, or timed out).
    #[error("WebDriver {command}: {source}")]
    Http {
        /// The command, as `METHOD path`.
        command: String,
        /// What reqwest said.
        source: reqwest::Error,
    },
    /// The driver answered a command with an error.
    #[error("WebDriver {command}{on}: {error}: {message}", on = on_selector(selector))]
    Command {
        /// The command, as `METHOD path`.
        command: String,
        /// The selector it was about, if any.
        selector: Option<String>,
        /// WebDriver's error code (`no such element`, `javascript error`, …).
        error: String,
        /// WebDriver's message, first line.
        message: String,
    },
    /// No element matched a selector.
    #[error("no element matches `{selector}` on {url}")]
    NoElement {
        /// The selector.
        selector: String,
        /// The page's address at the time.
        url: String,
    },
    /// [`Browser::wait_for`] or [`Browser::wait_for_text`] gave up.
    #[error(
        "waited {waited:?} for {what} on {url}; the page's text is:\n{text}",
        waited = timeout
    )]
    Timeout {
        /// What was waited for, naming the selector.
        what: String,
        /// How long it waited.
        timeout: Duration,
        /// The page's address at the time.
        url: String,
        /// The page's visible text (its start, when long).
        text: String,
    },
    /// A `<select>` has no option with the value asked for.
    #[error("`{selector}` has no option with value {value:?}; its options: {options:?}")]
    NoOption {
        /// The select's selector.
        selector: String,
        /// The value asked for.
        value: String,
        /// The values it has.
        options: Vec<String>,
    },
    /// The driver's answer was not what WebDriver specifies.
    #[error("WebDriver {command}: unexpected answer {answer}")]
    Answer {
        /// The command, as `METHOD path`.
        command: String,
        /// The answer's `value`.
        answer: String,
    },
    /// Writing a screenshot or making the temp dir failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS's error.
        source: io::Error,
    },
}

fn on_selector(selector: &Option<String>) -> String {
    selector
        .as_ref()
        .map(|s| format!(" on `{s}`"))
        .unwrap_or_default()
}

/// How often an element the page replaced between finding and using it is
/// found again: a live page redraws whenever its data changes.
const STALE_TRIES: usize = 5;

impl BrowserError {
    /// Whether the element was replaced by the page after it was found.
    fn is_stale(&self) -> bool {
        matches!(self, BrowserError::Command { error, .. } if error == "stale element reference")
    }
}

/// A headless Chromium with one WebDriver session, and its driver process.
pub struct Browser {
    client: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    /// Whether [`Browser::close`] ended the session already.
    closed: bool,
    driver: Driver,
}

impl Browser {
    /// Starts `chromedriver` and a headless Chromium
    /// ([`WINDOW_SIZE`], a fresh profile) with a blank page.
    pub async fn start() -> Result<Browser, BrowserError> {
        let chromium = find_chromium()?;
        let driver = Driver::start().await?;
        let client = http_client();
        let capabilities = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": chromium,
                        "args": chromium_args(&driver.dir.path().join("profile")),
                    },
                },
            },
        });
        let url = format!("{}/session", driver.url);
        let answer = send(
            &client,
            reqwest::Method::POST,
            &url,
            Some(capabilities),
            None,
        )
        .await?;
        let id = answer
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| BrowserError::Answer {
                command: "POST /session".into(),
                answer: answer.to_string(),
            })?;
        let session = format!("{}/session/{id}", driver.url);
        let browser = Browser {
            client,
            session,
            closed: false,
            driver,
        };
        browser.size_viewport().await?;
        Ok(browser)
    }

    /// Makes the page's viewport exactly [`WINDOW_SIZE`] (the window's
    /// own frame would take some of it), for every page the session opens
    /// and every screenshot: Chromium's device metrics, through
    /// chromedriver's DevTools command.
    async fn size_viewport(&self) -> Result<(), BrowserError> {
        let (width, height) = WINDOW_SIZE;
        let command = json!({
            "cmd": "Emulation.setDeviceMetricsOverride",
            "params": {
                "width": width,
                "height": height,
                "deviceScaleFactor": 1,
                "mobile": false,
            },
        });
        self.post("/goog/cdp/execute", command, None).await?;
        Ok(())
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn goto(&self, url: &str) -> Result<(), BrowserError> {
        self.post("/url", json!({ "url": url }), None).await?;
        Ok(())
    }

    /// The page's current address.
    pub async fn url(&self) -> Result<String, BrowserError> {
        let value = self.get("/url", None).await?;
        as_string("GET /url", value)
    }

    /// Waits until an element matches `css`, or fails after `timeout`
    /// with the selector, the address and the page's text.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Result<(), BrowserError> {
        let what = format!("an element matching `{css}`");
        self.wait(what, timeout, || async {
            Ok(self.find_optional(css).await?.is_some())
        })
        .await
    }

    /// Waits until the first element matching `css` exists and its text
    /// contains `needle`: for a page that updates itself (a watch, a
    /// submitted form).
    pub async fn wait_for_text(
        &self,
        css: &str,
        needle: &str,
        timeout: Duration,
    ) -> Result<(), BrowserError> {
        let what = format!("`{css}` to contain {needle:?}");
        self.wait(what, timeout, || async {
            Ok(match self.find_optional(css).await? {
                Some(id) => self.element_text(css, &id).await?.contains(needle),
                None => false,
            })
        })
        .await
    }

    /// Clicks the first element matching `css` (scrolled into view first,
    /// as a person would).
    pub async fn click(&self, css: &str) -> Result<(), BrowserError> {
        for _ in 0..STALE_TRIES {
            let id = self.find(css).await?;
            match self
                .post(&format!("/element/{id}/click"), json!({}), Some(css))
                .await
            {
                Err(e) if e.is_stale() => continue,
                other => return other.map(|_| ()),
            }
        }
        Err(self.still_stale(css).await)
    }

    /// The visible text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> Result<String, BrowserError> {
        for _ in 0..STALE_TRIES {
            let id = self.find(css).await?;
            match self.element_text(css, &id).await {
                Err(e) if e.is_stale() => continue,
                other => return other,
            }
        }
        Err(self.still_stale(css).await)
    }

    /// The error for an element the page kept replacing while it was read.
    async fn still_stale(&self, css: &str) -> BrowserError {
        BrowserError::NoElement {
            selector: format!("{css} (replaced by the page on each of {STALE_TRIES} reads)"),
            url: self
                .url()
                .await
                .unwrap_or_else(|e| format!("(unknown: {e})")),
        }
    }

    /// Empties the input matching `css` and types `text` into it.
    pub async fn fill(&self, css: &str, text: &str) -> Result<(), BrowserError> {
        let id = self.find(css).await?;
        self.post(&format!("/element/{id}/clear"), json!({}), Some(css))
            .await?;
        self.post(
            &format!("/element/{id}/value"),
            json!({ "text": text }),
            Some(css),
        )
        .await?;
        Ok(())
    }

    /// Chooses the option whose `value` is `value` in the `<select>`
    /// matching `css`, by clicking it (so the page sees a change event).
    pub async fn select(&self, css: &str, value: &str) -> Result<(), BrowserError> {
        let select = self.find(css).await?;
        let found = self
            .post(
                &format!("/element/{select}/elements"),
                json!({ "using": "css selector", "value": "option" }),
                Some(css),
            )
            .await?;
        let options = element_ids("POST /element/elements", found)?;
        let mut values = Vec::new();
        for option in options {
            let path = format!("/element/{option}/property/value");
            let option_value = self.get(&path, Some(css)).await?;
            let option_value = option_value.as_str().unwrap_or_default().to_string();
            if option_value == value {
                self.post(&format!("/element/{option}/click"), json!({}), Some(css))
                    .await?;
                return Ok(());
            }
            values.push(option_value);
        }
        Err(BrowserError::NoOption {
            selector: css.into(),
            value: value.into(),
            options: values,
        })
    }

    /// The attribute `name` of the first element matching `css`, `None`
    /// when it has none.
    pub async fn attr(&self, css: &str, name: &str) -> Result<Option<String>, BrowserError> {
        let id = self.find(css).await?;
        let value = self
            .get(&format!("/element/{id}/attribute/{name}"), Some(css))
            .await?;
        Ok(value.as_str().map(str::to_string))
    }

    /// Runs `js` in the page as a function body and returns what it
    /// `return`s, as JSON: for reading state no element shows
    /// (`return document.title`).
    pub async fn eval(&self, js: &str) -> Result<Value, BrowserError> {
        self.post("/execute/sync", json!({ "script": js, "args": [] }), None)
            .await
    }

    /// Saves what the window shows as a PNG file at `path`.
    pub async fn screenshot(&self, path: &Path) -> Result<(), BrowserError> {
        let value = self.get("/screenshot", None).await?;
        let encoded = as_string("GET /screenshot", value)?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_bytes())
            .map_err(|e| BrowserError::Answer {
                command: "GET /screenshot".into(),
                answer: format!("not base64: {e}"),
            })?;
        std::fs::write(path, png).map_err(|source| BrowserError::Io {
            what: format!("writing the screenshot {}", path.display()),
            source,
        })
    }

    /// Ends the session politely (Chromium closes its windows) before the
    /// processes are killed; dropping without it is fine too.
    pub async fn close(mut self) -> Result<(), BrowserError> {
        self.closed = true;
        send(
            &self.client,
            reqwest::Method::DELETE,
            &self.session,
            None,
            None,
        )
        .await?;
        Ok(())
    }

    /// The temp dir the browser's profile and the driver's log live in,
    /// for a test that checks nothing is left behind.
    pub fn dir(&self) -> &Path {
        self.driver.dir.path()
    }

    async fn wait<F, Fut>(
        &self,
        what: String,
        timeout: Duration,
        check: F,
    ) -> Result<(), BrowserError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<bool, BrowserError>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            if check().await? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.timeout_error(what, timeout).await);
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    async fn timeout_error(&self, what: String, timeout: Duration) -> BrowserError {
        let url = self
            .url()
            .await
            .unwrap_or_else(|e| format!("(unknown: {e})"));
        let text = match self
            .eval("return document.body ? document.body.innerText : ''")
            .await
        {
            Ok(Value::String(text)) => quote(&text),
            Ok(other) => other.to_string(),
            Err(e) => format!("(unreadable: {e})"),
        };
        BrowserError::Timeout {
            what,
            timeout,
            url,
            text,
        }
    }

    async fn find(&self, css: &str) -> Result<String, BrowserError> {
        match self.find_optional(css).await? {
            Some(id) => Ok(id),
            None => Err(BrowserError::NoElement {
                selector: css.into(),
                url: self
                    .url()
                    .await
                    .unwrap_or_else(|e| format!("(unknown: {e})")),
            }),
        }
    }

    /// The first element matching `css`, if any.
    async fn find_optional(&self, css: &str) -> Result<Option<String>, BrowserError> {
        let found = self
            .post(
                "/elements",
                json!({ "using": "css selector", "value": css }),
                Some(css),
            )
            .await?;
        Ok(element_ids("POST /elements", found)?.into_iter().next())
    }

    async fn element_text(&self, css: &str, id: &str) -> Result<String, BrowserError> {
        let value = self.get(&format!("/element/{id}/text"), Some(css)).await?;
        as_string("GET /element/text", value)
    }

    async fn post(
        &self,
        path: &str,
        body: Value,
        css: Option<&str>,
    ) -> Result<Value, BrowserError> {
        let url = format!("{}{path}", self.session);
        send(&self.client, reqwest::Method::POST, &url, Some(body), css).await
    }

    async fn get(&self, path: &str, css: Option<&str>) -> Result<Value, BrowserError> {
        let url = format!("{}{path}", self.session);
        send(&self.client, reqwest::Method::GET, &url, None, css).await
    }
}

impl Drop for Browser {
    /// Ends the session the way [`Browser::close`] does, but blocking (a
    /// drop cannot await): `chromedriver` then quits Chromium, whose
    /// processes its parent reaps, before the group is killed.
    fn drop(&mut self) {
        if !self.closed {
            let path = self.session.trim_start_matches(&self.driver.url);
            let _ = delete_blocking(self.driver.port, path);
        }
    }
}

/// `DELETE path` to 127.0.0.1:port over plain HTTP/1.1, waiting for the
/// answer (a few seconds at most).
fn delete_blocking(port: u16, path: &str) -> io::Result<()> {
    let address = (Ipv4Addr::LOCALHOST, port).into();
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "DELETE {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(())
}

/// The arguments Chromium runs with: headless, no sandbox (CI runs as
/// root), no GPU, no small `/dev/shm`, one window size, the given profile.
fn chromium_args(profile: &Path) -> Vec<String> {
    let (width, height) = WINDOW_SIZE;
    vec![
        "--headless=new".into(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-dev-shm-usage".into(),
        format!("--window-size={width},{height}"),
        format!("--user-data-dir={}", profile.display()),
        "--no-first-run".into(),
        "--no-default-browser-check".into(),
        "--disable-extensions".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--metrics-recording-only".into(),
        "--password-store=basic".into(),
    ]
}

fn http_client() -> reqwest::Client {
    // Only plain HTTP to 127.0.0.1 is spoken; a provider is installed
    // anyway, since reqwest's builder wants one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(COMMAND_TIMEOUT)
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Sends one WebDriver command and returns its answer's `value`, or the
/// error the driver answered with.
async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
    css: Option<&str>,
) -> Result<Value, BrowserError> {
    let command = format!("{method} {}", command_path(url));
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let http = |source| BrowserError::Http {
        command: command.clone(),
        source,
    };
    let answer: Value = request
        .send()
        .await
        .map_err(http)?
        .json()
        .await
        .map_err(http)?;
    let value = answer.get("value").cloned().unwrap_or(Value::Null);
    if let Some(error) = value.get("error").and_then(Value::as_str) {
        let message = value.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(BrowserError::Command {
            command,
            selector: css.map(str::to_string),
            error: error.to_string(),
            message: message.lines().next().unwrap_or("").to_string(),
        });
    }
    Ok(value)
}

/// `/session/ID/element/ID/click` → `/element/click`: the command without
/// the ids that make it unreadable.
fn command_path(url: &str) -> String {
    let path = url.splitn(4, '/').nth(3).unwrap_or(url);
    let mut words = path.split('/').peekable();
    let mut kept = Vec::new();
    while let Some(word) = words.next() {
        kept.push(word);
        if matches!(word, "session" | "element") && words.peek().is_some() {
            words.next();
        }
    }
    format!("/{}", kept.join("/"))
}

fn element_ids(command: &str, value: Value) -> Result<Vec<String>, BrowserError> {
    let bad = |value: &Value| BrowserError::Answer {
        command: command.into(),
        answer: value.to_string(),
    };
    let list = value.as_array().ok_or_else(|| bad(&value))?;
    list.iter()
        .map(|element| {
            element
                .get(ELEMENT_KEY)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| bad(element))
        })
        .collect()
}

fn as_string(command: &str, value: Value) -> Result<String, BrowserError> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(BrowserError::Answer {
            command: command.into(),
            answer: other.to_string(),
        }),
    }
}

/// The start of `text`, marked when cut.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTED_TEXT_LIMIT) {
        Some((end, _)) => format!("{}… (cut)", &text[..end]),
        None => text.to_string(),
    }
}

/// Chromium's own binary (not Debian's wrapper script, which reads
/// `/etc/chromium.d` and prints warnings of its own), else `chromium` on
/// the `PATH`.
fn find_chromium() -> Result<PathBuf, BrowserError> {
    // Installed here when missing; if that fails, the search below says
    // what is missing.
    let _ = crate::packages::ensure("browser");
    let own = PathBuf::from("/usr/lib/chromium/chromium");
    if own.is_file() {
        return Ok(own);
    }
    on_path("chromium").ok_or(BrowserError::Missing {
        program: "chromium",
        looked: "/usr/lib/chromium/chromium and the PATH".into(),
    })
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// `chromedriver` on a port of its own, the leader of a process group
/// that Chromium's processes join; the group is killed on drop.
struct Driver {
    child: Child,
    port: u16,
    url: String,
    dir: tempfile::TempDir,
    /// Kills the group and removes the dir if this process dies first.
    _watcher: Option<WhenGone>,
}

impl Driver {
    /// Starts it on a free port until one answers ready. The port is found
    /// by binding port 0 and letting it go, so another process may take it
    /// first: then the driver exits, and another port is tried.
    async fn start() -> Result<Driver, BrowserError> {
        let program = on_path("chromedriver").ok_or(BrowserError::Missing {
            program: "chromedriver",
            looked: "the PATH".into(),
        })?;
        let mut last = String::new();
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("coxswain-browser-")
                .tempdir()
                .map_err(|source| BrowserError::Io {
                    what: "making the browser's temp dir".into(),
                    source,
                })?;
            let port = free_port().map_err(|source| BrowserError::Io {
                what: "finding a free port".into(),
                source,
            })?;
            let mut driver = Driver::spawn(&program, dir, port)?;
            match driver.wait_ready().await {
                Ok(()) => return Ok(driver),
                Err(reason) => last = reason,
            }
        }
        Err(BrowserError::DriverStart { reason: last })
    }

    fn spawn(program: &Path, dir: tempfile::TempDir, port: u16) -> Result<Driver, BrowserError> {
        let scratch = dir.path().join("tmp");
        let log = dir.path().join("chromedriver.log");
        let io_error = |what: &str| {
            let what = what.to_string();
            move |source| BrowserError::Io { what, source }
        };
        std::fs::create_dir(&scratch).map_err(io_error("making the browser's scratch dir"))?;
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            // Chromium's own scratch, config and cache files land in the dir
            // removed on drop.
            .env("TMPDIR", &scratch)
            .env("HOME", dir.path())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(io_error("starting chromedriver"))?;
        // The same as the drop: the group, then whatever names the dir.
        // The dir is passed as parent and name, so that no process of the
        // watcher's own names it whole.
        let script = format!(
            r#"kill -KILL -- -{group} 2>/dev/null
            for p in /proc/[0-9]*; do
              case "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" in
                *"$0/$1"*) kill -KILL "${{p#/proc/}}" 2>/dev/null ;;
              esac
            done
            cd "$0" && rm -rf "$1""#,
            group = child.id(),
        );
        let parent = dir.path().parent().unwrap_or(Path::new("/"));
        let name = dir.path().file_name().unwrap_or_default();
        let watcher = WhenGone::run(
            "sh",
            &[
                "-c",
                &script,
                &parent.display().to_string(),
                &name.to_string_lossy(),
            ],
        )
        .ok();
        Ok(Driver {
            child,
            port,
            url: format!("http://127.0.0.1:{port}"),
            dir,
            _watcher: watcher,
        })
    }

    /// Waits until `GET /status` says ready; on failure, why, with the
    /// driver's log.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let client = http_client();
        let deadline = Instant::now() + DRIVER_START_TIMEOUT;
        let status = format!("{}/status", self.url);
        loop {
            if let Ok(Some(exit)) = self.child.try_wait() {
                return Err(format!("it exited ({exit}); its log:\n{}", self.log_tail()));
            }
            let ready = client.get(&status).send().await.ok();
            if let Some(answer) = ready {
                let body: Value = answer.json().await.unwrap_or(Value::Null);
                if body["value"]["ready"] == Value::Bool(true) {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "not ready on {} after {DRIVER_START_TIMEOUT:?}; its log:\n{}",
                    self.url,
                    self.log_tail()
                ));
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    fn log_tail(&self) -> String {
        let log =
            std::fs::read_to_string(self.dir.path().join("chromedriver.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = self.child.wait();
        // Chromium's crash reporter starts a session of its own, out of the
        // group; its command line names the dir, as every Chromium
        // process's does. Wait (briefly) until all are gone, so the dir is
        // not removed under them.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = live_processes(group, self.dir.path());
            if left.is_empty() || Instant::now() >= deadline {
                break;
            }
            for pid in left {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The processes still running (zombies aside) that are in the group or
/// name `dir` on their command line. A zombie does not count: the driver's
/// is reaped by [`Child::wait`], but Chromium's, orphaned by the kill, wait
/// for whoever reaps orphans here.
fn live_processes(group: rustix::process::Pid, dir: &Path) -> Vec<rustix::process::Pid> {
    let group = group.as_raw_pid().to_string();
    let dir = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `PID (COMM) STATE PPID PGRP …`; COMM may hold spaces and parens.
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
            let state = fields.next()?;
            let in_group = fields.nth(1)? == group;
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let names_dir = String::from_utf8_lossy(&cmdline).contains(&dir);
            let live = state != "Z" && (in_group || names_dir);
            live.then(|| rustix::process::Pid::from_raw(pid)).flatten()
        })
        .collect()
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}
