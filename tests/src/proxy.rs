//! Fixtures for proxy and fd-limit tests: a slow plain-HTTP backend, a peer that resets
//! every connection, many clients at once, and a client that fetches a list of paths on
//! keepalive connections.

use std::{
    io::{BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    time::Duration,
};

/// A peer on a free loopback port: a thread per connection that reads one request to
/// its blank line, then hands the connection to `answer` and counts it. The accept
/// loop ends when `stop` is set (and a connection wakes it: see [`Peer::drop`]).
struct Peer {
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    served: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Peer {
    fn start(answer: fn(TcpStream, Duration), delay: Duration) -> Peer {
        use std::sync::{atomic::*, Arc};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind peer");
        let addr = listener.local_addr().expect("peer addr");
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (st, sv) = (stop.clone(), served.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(mut c) = conn else { continue };
                let sv = sv.clone();
                std::thread::spawn(move || {
                    let mut req = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                        match c.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => req.extend_from_slice(&buf[..n]),
                        }
                    }
                    answer(c, delay);
                    sv.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
        Peer { addr, stop, served }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Sets `SO_LINGER` 0 on `s`: its close sends a RST instead of a FIN.
pub fn reset_on_close(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let zero = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd and a linger struct of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &zero as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_LINGER 0");
}

/// A plain HTTP backend for proxy tests: a thread per connection on 127.0.0.1 that
/// reads one request, waits `delay`, answers `200 ok` with `Connection: close` and
/// closes. Dropping it stops accepting.
pub struct SlowBackend {
    peer: Peer,
    /// Requests answered so far.
    pub answered: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl SlowBackend {
    /// Starts the backend on a free loopback port.
    pub fn start(delay: Duration) -> SlowBackend {
        let answer = |mut c: TcpStream, delay: Duration| {
            std::thread::sleep(delay);
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
            );
        };
        let peer = Peer::start(answer, delay);
        let answered = peer.served.clone();
        SlowBackend { peer, answered }
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.peer.addr
    }
}

/// A backend that answers every request with a 1 MB body it sends one byte every
/// `period` (a slow stream, for `proxy_buffering off`): its connection thread ends when
/// the connection breaks. Dropping it stops accepting.
pub struct StreamBackend {
    peer: Peer,
}

impl StreamBackend {
    /// Starts the backend on a free loopback port.
    pub fn start(period: Duration) -> StreamBackend {
        let answer = |mut c: TcpStream, period: Duration| {
            if c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
                .is_err()
            {
                return;
            }
            while c.write_all(b"x").is_ok() {
                std::thread::sleep(period);
            }
        };
        StreamBackend {
            peer: Peer::start(answer, period),
        }
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.peer.addr
    }
}

/// Opens a client on `path` at `addr` and returns it once the first body byte arrived
/// (so nginx has the request in flight on both sides).
pub fn stream_client(addr: SocketAddr, path: &str) -> TcpStream {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = c.read(&mut buf).expect("read the stream");
        assert!(n > 0, "stream closed early");
        got.extend_from_slice(&buf[..n]);
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            if got.len() > end + 4 {
                return c;
            }
        }
    }
}

/// A peer that resets every connection: a thread per connection on 127.0.0.1 that
/// reads one request to its blank line, then closes with `SO_LINGER` 0, which sends a
/// RST instead of a FIN (nginx: "recv() failed (104: Connection reset by peer)").
/// Dropping it stops accepting.
pub struct ResetBackend {
    peer: Peer,
    /// Connections reset so far.
    pub reset: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl ResetBackend {
    /// Starts the peer on a free loopback port.
    pub fn start() -> ResetBackend {
        let peer = Peer::start(|c, _| reset_on_close(&c), Duration::ZERO);
        let reset = peer.served.clone();
        ResetBackend { peer, reset }
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.peer.addr
    }
}

/// A keepalive HTTP backend that closes idle connections, as a peer with its own idle
/// timeout does: each request is answered `200 ok` after 300 ms (so requests sent at
/// once each need a connection), the connection is kept, and it is closed with a FIN
/// once it has been idle `idle` after a response. Dropping it stops accepting.
pub struct IdleCloseBackend {
    peer: Peer,
}

impl IdleCloseBackend {
    /// Starts the backend on a free loopback port.
    pub fn start(idle: Duration) -> IdleCloseBackend {
        IdleCloseBackend {
            peer: Peer::start(|c, idle| idle_answer(c, idle, false), idle),
        }
    }

    /// The same backend, but its close of an idle connection sends a reset (SO_LINGER
    /// 0), as a peer or a NAT, firewall or load balancer dropping idle flows can.
    pub fn start_resetting(idle: Duration) -> IdleCloseBackend {
        IdleCloseBackend {
            peer: Peer::start(|c, idle| idle_answer(c, idle, true), idle),
        }
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        self.peer.addr
    }
}

/// Answers requests on `c` (`200 ok` after 300 ms each) until it has been idle `idle`,
/// then closes it: with a FIN, or a reset when `reset`.
fn idle_answer(mut c: TcpStream, idle: Duration, reset: bool) {
    loop {
        std::thread::sleep(Duration::from_millis(300));
        if c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            .is_err()
        {
            return;
        }
        let _ = c.set_read_timeout(Some(idle));
        let mut req = Vec::new();
        let mut buf = [0u8; 4096];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut buf) {
                Ok(0) => return,
                Err(_) => {
                    if reset {
                        reset_on_close(&c);
                    }
                    return;
                }
                Ok(n) => req.extend_from_slice(&buf[..n]),
            }
        }
    }
}

/// Sends `GET <path>` with `Connection: close` from `n` clients at once (a thread
/// each, all connected before any sends) and reads each response to the end. Returns
/// the status codes (0 for a connection that ended without a status line).
pub fn concurrent_requests(addr: SocketAddr, n: usize, path: &str) -> Vec<u16> {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let b = barrier.clone();
            let path = path.to_string();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.set_read_timeout(Some(Duration::from_secs(60))).ok();
                b.wait();
                let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
                if s.write_all(req.as_bytes()).is_err() {
                    return 0;
                }
                let mut resp = Vec::new();
                let _ = s.read_to_end(&mut resp);
                std::str::from_utf8(resp.get(9..12).unwrap_or(b"000"))
                    .ok()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("client thread"))
        .collect()
}

/// Sends `GET <path>` for every path in `paths`, one after the other on keepalive
/// connections (a new one whenever nginx closes). Returns the response bodies.
pub fn get_paths(addr: SocketAddr, paths: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut conn: Option<BufReader<TcpStream>> = None;
    for p in paths {
        let c =
            conn.get_or_insert_with(|| BufReader::new(TcpStream::connect(addr).expect("connect")));
        c.get_mut()
            .write_all(format!("GET {p} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes())
            .expect("send");
        let r = crate::read_response(c).expect("nginx closed before answering");
        out.push(String::from_utf8_lossy(&r.body).into_owned());
        if r.close {
            conn = None;
        }
    }
    out
}
