//! A stand-in for a server someone hostile runs to collect git credentials:
//! every HTTP request is answered `401` with `WWW-Authenticate: Basic`, as
//! a git server that wants a login would answer, so a git client that has
//! credentials sends them on its next request. It keeps each request line
//! and every `Authorization` header it was sent.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the trap saw.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Each request's first line (`GET /app.git/info/refs?… HTTP/1.1`).
    pub requests: Vec<String>,
    /// The value of every `Authorization` header sent.
    pub authorizations: Vec<String>,
}

/// The trap, on 127.0.0.1, until dropped.
pub struct AuthTrap {
    port: u16,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AuthTrap {
    /// Listens on a free port of 127.0.0.1 and answers in a thread.
    pub fn start() -> io::Result<AuthTrap> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let _ = answer(stream, &s);
                }
            }
        });
        Ok(AuthTrap {
            port,
            seen,
            stop,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// What it saw so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn answer(stream: TcpStream, seen: &Mutex<Seen>) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        if first {
            seen.requests.push(line.to_string());
            first = false;
        } else if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("authorization")
        {
            seen.authorizations.push(value.trim().to_string());
        }
    }
    let mut stream = stream;
    stream.write_all(
        b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
}

impl Drop for AuthTrap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
