//! The browser harness against a real headless Chromium and a real page
//! served by axum on 127.0.0.1: clicks change the page, a filled form
//! reaches the server, screenshots are PNGs of the window's size, and no
//! process or file is left once a browser is dropped, even by a panic.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::response::Html;
use axum::routing::{get, post};
use coxswain_test_support::browser::{Browser, BrowserError, WINDOW_SIZE};

const WAIT: Duration = Duration::from_secs(10);

const PAGE: &str = r#"<!doctype html>
<html><head><title>harness page</title></head>
<body>
  <button id="greet" type="button">Say hello</button>
  <p id="greeting" data-state="idle">Not yet</p>
  <form method="post" action="/submit">
    <input id="who" name="who" value="placeholder">
    <select id="color" name="color">
      <option value="red">Red</option>
      <option value="blue">Blue</option>
    </select>
    <button id="send" type="submit">Send</button>
  </form>
  <script>
    document.getElementById('greet').addEventListener('click', () => {
      const p = document.getElementById('greeting');
      setTimeout(() => { p.textContent = 'Hello, browser'; p.dataset.state = 'greeted'; }, 100);
    });
  </script>
</body></html>"#;

/// The page above, and every POST body `/submit` got.
struct Site {
    url: String,
    posts: Arc<Mutex<Vec<String>>>,
}

async fn serve() -> Site {
    let posts = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/submit", post(submit))
        .with_state(posts.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let url = format!("http://{}", listener.local_addr().expect("local addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Site { url, posts }
}

async fn submit(State(posts): State<Arc<Mutex<Vec<String>>>>, body: String) -> Html<String> {
    posts.lock().expect("posts lock").push(body);
    Html(r#"<!doctype html><p id="thanks">Thanks</p>"#.to_string())
}

#[tokio::test]
async fn a_click_changes_the_page_and_a_filled_form_reaches_the_server() {
    let site = serve().await;
    let browser = Browser::start().await.expect("the browser starts");
    browser.goto(&site.url).await.expect("the page opens");
    browser.wait_for("#greet", WAIT).await.expect("the button");

    assert_eq!(browser.text("#greeting").await.expect("text"), "Not yet");
    browser.click("#greet").await.expect("click");
    browser
        .wait_for("#greeting[data-state=greeted]", WAIT)
        .await
        .expect("the page reacts to the click");
    assert_eq!(
        browser.text("#greeting").await.expect("text"),
        "Hello, browser"
    );
    assert_eq!(
        browser.attr("#send", "type").await.expect("attr"),
        Some("submit".to_string())
    );
    assert_eq!(
        browser.attr("#send", "data-none").await.expect("attr"),
        None
    );
    assert_eq!(
        browser.eval("return document.title").await.expect("eval"),
        serde_json::json!("harness page")
    );

    browser.fill("#who", "Ada & Bob").await.expect("fill");
    browser.select("#color", "blue").await.expect("select");
    browser.click("#send").await.expect("submit");
    browser
        .wait_for_text("#thanks", "Thanks", WAIT)
        .await
        .expect("the server's answer shows");
    assert_eq!(
        *site.posts.lock().expect("posts lock"),
        vec!["who=Ada+%26+Bob&color=blue".to_string()],
        "fill replaced the field's text and select chose the option"
    );
    assert!(
        browser.url().await.expect("url").ends_with("/submit"),
        "the form's POST navigated to /submit"
    );
    browser.close().await.expect("the session ends");
}

#[tokio::test]
async fn a_screenshot_is_a_png_of_the_window() {
    let site = serve().await;
    let browser = Browser::start().await.expect("the browser starts");
    browser.goto(&site.url).await.expect("the page opens");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("page.png");
    browser.screenshot(&path).await.expect("screenshot");

    let png = std::fs::read(&path).expect("the file was written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&png[12..16], b"IHDR", "the first chunk is the header");
    let width = u32::from_be_bytes(png[16..20].try_into().expect("4 bytes"));
    let height = u32::from_be_bytes(png[20..24].try_into().expect("4 bytes"));
    assert_eq!((width, height), WINDOW_SIZE);
}

#[tokio::test]
async fn failures_name_the_selector_the_address_and_what_the_page_shows() {
    let site = serve().await;
    let browser = Browser::start().await.expect("the browser starts");
    browser.goto(&site.url).await.expect("the page opens");

    let waited = browser
        .wait_for("#never-there", Duration::from_millis(300))
        .await
        .expect_err("nothing matches");
    assert!(matches!(waited, BrowserError::Timeout { .. }), "{waited:?}");
    let message = waited.to_string();
    for part in ["`#never-there`", site.url.as_str(), "Say hello", "Not yet"] {
        assert!(message.contains(part), "{part:?} is not in: {message}");
    }

    let clicked = browser
        .click(".missing")
        .await
        .expect_err("nothing to click");
    assert!(
        clicked.to_string().contains("`.missing`") && clicked.to_string().contains(&site.url),
        "{clicked}"
    );
    let chosen = browser
        .select("#color", "green")
        .await
        .expect_err("no green");
    assert!(
        chosen.to_string().contains(r#"["red", "blue"]"#),
        "{chosen}"
    );
    let thrown = browser
        .eval("throw new Error('boom')")
        .await
        .expect_err("throws");
    assert!(thrown.to_string().contains("boom"), "{thrown}");
}

#[tokio::test]
async fn nothing_is_left_once_a_browser_is_dropped_even_by_a_panic() {
    let dropped = Browser::start().await.expect("the browser starts");
    let dir = dropped.dir().to_path_buf();
    assert!(
        !processes_using(&dir).is_empty(),
        "chromium runs from {dir:?}"
    );
    drop(dropped);
    assert_gone(&dir);

    let (sender, receiver) = tokio::sync::oneshot::channel();
    let panicked = tokio::spawn(async move {
        let browser = Browser::start().await.expect("the browser starts");
        browser.goto("about:blank").await.expect("a page opens");
        let _ = sender.send(browser.dir().to_path_buf());
        panic!("a test fails while its browser is open");
    })
    .await;
    assert!(panicked.is_err_and(|e| e.is_panic()));
    let dir = receiver.await.expect("the task sent its dir");
    assert_gone(&dir);
}

fn assert_gone(dir: &Path) {
    assert!(!dir.exists(), "{dir:?} was left behind");
    let left = processes_using(dir);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// The processes whose command line names `dir` (Chromium's, by its
/// profile dir; the driver's, by its log path), zombies aside.
fn processes_using(dir: &Path) -> Vec<PathBuf> {
    let needle = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|proc_dir| {
            let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(&needle)
        })
        .collect()
}
