//! The `/metrics` HTTP server (`--listen ADDR`, axum). It never touches the tracker:
//! each scrape sends a [`Scrape`] (a oneshot for the reply) over a channel that the main
//! loop serves between its other work, so each scrape reads fresh kernel counters and
//! the tracker stays on one thread. The text comes from [`crate::render::prometheus`];
//! it is gzipped when the client sends `Accept-Encoding: gzip`.
//!
//! Any local user can connect to the port, so the server is bounded: at most
//! [`MAX_CONNECTIONS`] connections are served at once (more wait in the kernel's
//! accept queue, costing nginx-probe no file descriptor), a request's headers must
//! arrive within [`HEADER_READ_TIMEOUT`] (also the idle timeout between keep-alive
//! requests), headers are at most [`MAX_HEADER_BYTES`], and a connection lives at most
//! [`MAX_CONNECTION_LIFETIME`]. Idle or slowloris clients therefore cannot exhaust the
//! probe's file descriptors, grow its memory or stop the counting (which runs in the
//! kernel and in the main loop, not here).

use std::{net::SocketAddr, time::Duration};

use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use log::warn;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::error::ProbeError;

/// Address `--listen` uses when given without a value: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9752";

/// `Content-Type` of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `--listen` value: `IP:PORT` (IPv6 as `[::1]:9752`).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("`{s}` is not an address to listen on: give IP:PORT, e.g. {DEFAULT_LISTEN}")
    })
}

/// Binds the `--listen` address, if any, before anything is attached: a bad or busy
/// address is a usage error. Warns when the address is not loopback (`/metrics` has no
/// authentication).
pub fn bind(addr: Option<SocketAddr>) -> Result<Option<std::net::TcpListener>, ProbeError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| ProbeError::Listen { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| ProbeError::Listen { addr, source })?;
    if !addr.ip().is_loopback() {
        warn!(
            "--listen {addr} is not a loopback address: anyone who can reach it can read /metrics (there is no authentication)"
        );
    }
    Ok(Some(listener))
}

/// A scrape waiting for the main loop: send it the rendered text.
pub type Scrape = oneshot::Sender<String>;

/// Scrapes that may wait for the main loop at once; more wait in the HTTP handler.
const SCRAPE_QUEUE: usize = 8;

/// How long the server gets at exit to finish the responses it is writing.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Connections served at once; more wait in the listen backlog (the kernel's, not ours).
pub const MAX_CONNECTIONS: usize = 64;

/// Time a client has to send a request's headers, from the connection's start or the
/// end of the previous response (the keep-alive idle timeout).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest life of one connection, however active (then it is closed after its
/// current response).
pub const MAX_CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// Largest request head (request line and headers), bytes.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// The `/metrics` HTTP server of one run (or nothing without `--listen`).
pub struct Endpoint {
    running: Option<Running>,
}

struct Running {
    scrapes: mpsc::Receiver<Scrape>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Endpoint {
    /// No server (without `--listen`, or once it has been shut down).
    pub fn none() -> Endpoint {
        Endpoint { running: None }
    }

    /// Starts serving on `listener` (from [`bind`]); must be called inside the tokio
    /// runtime. Says where on stderr.
    pub fn start(listener: Option<std::net::TcpListener>) -> Result<Endpoint, ProbeError> {
        let Some(listener) = listener else {
            return Ok(Endpoint { running: None });
        };
        let addr = listener.local_addr()?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let (tx, scrapes) = mpsc::channel::<Scrape>(SCRAPE_QUEUE);
        let (stop, stopped) = oneshot::channel::<()>();
        let app = Router::new()
            .route("/metrics", get(metrics_handler))
            .route(
                "/",
                get(|| async { "nginx-probe: Prometheus metrics at /metrics\n" }),
            )
            .with_state(tx)
            // gzip when the scraper asks for it (Prometheus does: Accept-Encoding: gzip).
            .layer(tower_http::compression::CompressionLayer::new());
        let task = tokio::spawn(serve(listener, app, stopped));
        eprintln!("nginx-probe: serving Prometheus metrics at http://{addr}/metrics");
        Ok(Endpoint {
            running: Some(Running {
                scrapes,
                stop,
                task,
            }),
        })
    }

    /// An endpoint with no server of its own, fed by the returned sender: under
    /// `--all` the one server hands each scrape to every master's session this way.
    /// Must be called inside the tokio runtime.
    pub fn relay() -> (mpsc::Sender<Scrape>, Endpoint) {
        let (tx, scrapes) = mpsc::channel::<Scrape>(SCRAPE_QUEUE);
        let (stop, _) = oneshot::channel::<()>();
        let task = tokio::spawn(async {});
        let running = Running {
            scrapes,
            stop,
            task,
        };
        (
            tx,
            Endpoint {
                running: Some(running),
            },
        )
    }

    /// The next scrape to answer; never resolves without a server.
    pub async fn next_scrape(&mut self) -> Option<Scrape> {
        match &mut self.running {
            Some(r) => r.scrapes.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Stops the server: scrapes still waiting get 503, responses being written get
    /// [`SHUTDOWN_GRACE`], and the port is closed when this returns.
    pub async fn shutdown(self) {
        let Some(r) = self.running else {
            return;
        };
        drop(r.scrapes);
        let _ = r.stop.send(());
        let mut task = r.task;
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
            .await
            .is_err()
        {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Accepts connections (at most [`MAX_CONNECTIONS`] at once) and serves each with
/// hyper's HTTP/1 with the timeouts above, until `stopped` fires; then stops accepting
/// and lets the connections finish their current response.
async fn serve(listener: tokio::net::TcpListener, app: Router, mut stopped: oneshot::Receiver<()>) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let permits = std::sync::Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (closing_tx, closing) = tokio::sync::watch::channel(false);
    let mut warned = false;
    loop {
        // A free slot first: while all are taken, new clients wait in the backlog.
        let permit = tokio::select! {
            _ = &mut stopped => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            _ = &mut stopped => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // EMFILE/ENFILE and the like: wait a little rather than spin.
                    if !warned {
                        warned = true;
                        warn!("/metrics: accepting a connection failed ({e}); retrying");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut closing = closing.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES.max(8192));
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let lifetime = tokio::time::sleep(MAX_CONNECTION_LIFETIME);
            tokio::pin!(lifetime);
            let mut shutting = false;
            loop {
                tokio::select! {
                    _ = conn.as_mut() => break,
                    _ = &mut lifetime => {
                        conn.as_mut().graceful_shutdown();
                        // A client that reads nothing gets the grace, then is dropped.
                        let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn.as_mut()).await;
                        break;
                    }
                    _ = closing.changed(), if !shutting => {
                        shutting = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    // Let connections finish their responses: every permit back means all are done.
    let _ =
        tokio::time::timeout(SHUTDOWN_GRACE, permits.acquire_many(MAX_CONNECTIONS as u32)).await;
}

/// `GET /metrics`: asks the main loop for a fresh rendering and waits for it.
async fn metrics_handler(State(tx): State<mpsc::Sender<Scrape>>) -> Response {
    let (reply, text) = oneshot::channel();
    if tx.send(reply).await.is_ok() {
        if let Ok(text) = text.await {
            return ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response();
        }
    }
    (StatusCode::SERVICE_UNAVAILABLE, "nginx-probe is stopping\n").into_response()
}
