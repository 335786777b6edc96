//! A webhook receiver on 127.0.0.1 for alert tests: records every request (headers and
//! raw body) and answers as told — at once, after holding the first requests, or with an
//! error status and an error page that echoes the request's path and query (as many
//! servers' do).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(&name.to_ascii_lowercase()).map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

#[derive(Default)]
struct Behaviour {
    /// Requests still to hold (not answered) before answering normally.
    hold_next: usize,
    hold_for: Duration,
    status: u16,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    behaviour: Arc<Mutex<Behaviour>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let received = Arc::new(Mutex::new(Vec::new()));
        let behaviour = Arc::new(Mutex::new(Behaviour {
            status: 200,
            ..Behaviour::default()
        }));
        let (seen, told) = (received.clone(), behaviour.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, seen.clone(), told.clone()));
            }
        });
        Receiver {
            url,
            received,
            behaviour,
        }
    }

    /// Requests received so far (held ones included, recorded when they arrive).
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Holds the next `count` requests for `hold` before answering.
    pub fn hold_next(&self, count: usize, hold: Duration) {
        let mut behaviour = self.behaviour.lock().unwrap();
        behaviour.hold_next = count;
        behaviour.hold_for = hold;
    }

    /// Answers every request with `status` from now on.
    pub fn answer_with(&self, status: u16) {
        self.behaviour.lock().unwrap().status = status;
    }
}

async fn serve(mut stream: TcpStream, received: Arc<Mutex<Vec<Received>>>, behaviour: Arc<Mutex<Behaviour>>) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let path = request.path.clone();
    received.lock().unwrap().push(request);
    let (hold, status) = {
        let mut behaviour = behaviour.lock().unwrap();
        let hold = if behaviour.hold_next > 0 {
            behaviour.hold_next -= 1;
            behaviour.hold_for
        } else {
            Duration::ZERO
        };
        (hold, behaviour.status)
    };
    tokio::time::sleep(hold).await;
    let body = if (200..300).contains(&status) {
        "ok".to_owned()
    } else {
        format!("no hook at {path}")
    };
    let reply = format!(
        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
}

async fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: HashMap<String, String> = lines
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Received { path, headers, body })
}
