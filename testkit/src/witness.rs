//! A witness HTTP server on 127.0.0.1: HTTP jobs call it, and it records each call and
//! how many calls of the same key were in flight at once — what the jobs really did,
//! seen from outside probactr.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone)]
pub struct Hit {
    pub key: String,
    pub headers: HashMap<String, String>,
    pub started: std::time::Instant,
    pub ended: std::time::Instant,
}

impl Hit {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }
}

#[derive(Default)]
struct State {
    hits: Vec<Hit>,
    in_flight: HashMap<String, usize>,
    max_in_flight: HashMap<String, usize>,
}

#[derive(Clone)]
pub struct Witness {
    pub base_url: String,
    state: Arc<Mutex<State>>,
}

impl Witness {
    pub async fn start() -> Witness {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind witness");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        Witness { base_url, state }
    }

    /// The URL a job calls: `key` groups calls, `hold_ms` keeps the call in flight.
    pub fn url(&self, key: &str, hold_ms: u64) -> String {
        format!("{}/hit/{key}?hold_ms={hold_ms}", self.base_url)
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.state.lock().unwrap().hits.clone()
    }

    pub fn hits_of(&self, key: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|hit| hit.key == key).collect()
    }

    pub fn max_in_flight(&self, key: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .max_in_flight
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    pub fn in_flight(&self, key: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .in_flight
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let Some((path, headers)) = read_request(&mut stream).await else {
        return;
    };
    let started = std::time::Instant::now();
    let (key, hold_ms) = parse_path(&path);
    {
        let mut state = state.lock().unwrap();
        let now = state.in_flight.entry(key.clone()).or_default();
        *now += 1;
        let now = *now;
        let max = state.max_in_flight.entry(key.clone()).or_default();
        *max = (*max).max(now);
    }
    // Count the call as over when the client goes away (a stopped job) or the hold ends.
    let mut probe = [0u8; 1];
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(hold_ms)) => {}
        _ = stream.read(&mut probe) => {}
    }
    let _ = stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        .await;
    let mut state = state.lock().unwrap();
    if let Some(now) = state.in_flight.get_mut(&key) {
        *now -= 1;
    }
    state.hits.push(Hit {
        key,
        headers,
        started,
        ended: std::time::Instant::now(),
    });
}

async fn read_request(stream: &mut TcpStream) -> Option<(String, HashMap<String, String>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buffer);
    let mut lines = text.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers = lines
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Some((path, headers))
}

fn parse_path(path: &str) -> (String, u64) {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    let key = route.trim_start_matches("/hit/").to_owned();
    let hold_ms = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("hold_ms="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (key, hold_ms)
}
