//! A TCP proxy on 127.0.0.1 that the test controls: it forwards between its clients and
//! one upstream (PostgreSQL, Redis) until told to stall, and then stops forwarding
//! without closing anything, the way a network partition or a hung switch looks to
//! both ends: connections stay open, bytes simply stop arriving. New connections are
//! accepted but get nowhere while stalled. `heal` resumes forwarding on every connection.
//!
//! `lose_replies` forwards requests but drops the answers, and `reset` closes every open
//! connection: together they give the ambiguous outcome of a statement whose commit
//! reached the server while its reply never reached the client.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

struct Control {
    forwarding: watch::Sender<bool>,
    replying: watch::Sender<bool>,
    stop: CancellationToken,
    /// Cancelled by `reset`: the connections open at that moment close.
    generation: Mutex<CancellationToken>,
}

impl Control {
    fn generation(&self) -> CancellationToken {
        self.generation.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

pub struct Proxy {
    addr: SocketAddr,
    control: Arc<Control>,
}

impl Proxy {
    /// Starts forwarding from a free loopback port to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let stop = CancellationToken::new();
        let control = Arc::new(Control {
            forwarding: watch::channel(true).0,
            replying: watch::channel(true).0,
            generation: Mutex::new(stop.child_token()),
            stop,
        });
        let shared = control.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = shared.stop.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((client, _)) = accepted else { continue };
                tokio::spawn(connection(client, upstream, shared.clone()));
            }
        });
        Proxy { addr, control }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Stops forwarding; connections stay open.
    pub fn stall(&self) {
        self.control.forwarding.send_replace(false);
    }

    /// Forwards again, answers included.
    pub fn heal(&self) {
        self.control.replying.send_replace(true);
        self.control.forwarding.send_replace(true);
    }

    /// Forwards requests, drops what the server answers.
    pub fn lose_replies(&self) {
        self.control.replying.send_replace(false);
    }

    /// Closes every open connection (new ones are accepted as usual).
    pub fn reset(&self) {
        let mut generation = self.control.generation.lock().unwrap_or_else(|p| p.into_inner());
        generation.cancel();
        *generation = self.control.stop.child_token();
    }

    pub fn is_stalled(&self) -> bool {
        !*self.control.forwarding.borrow()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.control.stop.cancel();
    }
}

async fn connection(client: TcpStream, upstream: SocketAddr, control: Arc<Control>) {
    let closed = control.generation();
    let mut forwarding = control.forwarding.subscribe();
    // While stalled, a new connection is accepted but reaches nothing.
    tokio::select! {
        _ = closed.cancelled() => return,
        ready = forwarding.wait_for(|on| *on) => if ready.is_err() { return },
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let requests = pump(client_read, server_write, forwarding.clone(), None);
    let replies = pump(
        server_read,
        client_write,
        forwarding,
        Some(control.replying.subscribe()),
    );
    tokio::select! {
        _ = closed.cancelled() => {}
        _ = async { tokio::join!(requests, replies) } => {}
    }
}

/// Copies one direction; a chunk read while stalled is held until the proxy heals, and
/// with `replying` off the chunk is dropped.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut forwarding: watch::Receiver<bool>,
    replying: Option<watch::Receiver<bool>>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if forwarding.wait_for(|on| *on).await.is_err() {
            return;
        }
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if forwarding.wait_for(|on| *on).await.is_err() {
            return;
        }
        if replying.as_ref().is_some_and(|on| !*on.borrow()) {
            continue;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
