//! The claims: each seed claim as two to four nginx configs and the load they run under.

use super::*;

/// The load every config of a claim runs under.
#[derive(Clone, Copy, Debug)]
pub enum Load {
    /// `wrk -t1 -c<connections>`: keepalive clients.
    Wrk {
        /// Concurrent connections.
        connections: u32,
    },
    /// `hey -c <connections> -disable-keepalive`: a new connection per request.
    HeyNewConnections {
        /// Concurrent clients.
        connections: u32,
    },
    /// `wrk -t1 -c<connections>` over HTTPS (the config serves TLS); wrk resumes its
    /// TLS sessions when the server lets it.
    WrkTls {
        /// Concurrent connections.
        connections: u32,
    },
}

impl Load {
    pub(super) fn describe(&self) -> String {
        match self {
            Load::Wrk { connections } => format!("wrk -t1 -c{connections}"),
            Load::WrkTls { connections } => format!("wrk -t1 -c{connections} (HTTPS)"),
            Load::HeyNewConnections { connections } => {
                format!("hey -c {connections} -disable-keepalive")
            }
        }
    }

    /// The connections the load opens at its start (`-c`).
    pub fn connections(&self) -> u64 {
        match *self {
            Load::Wrk { connections }
            | Load::HeyNewConnections { connections }
            | Load::WrkTls { connections } => connections.into(),
        }
    }

    pub(super) fn run(&self, url: &str, secs: u64) -> Result<ClientRun> {
        match *self {
            Load::Wrk { connections } => wrk(url, connections, secs),
            Load::WrkTls { connections } => {
                wrk(&url.replacen("http://", "https://", 1), connections, secs)
            }
            Load::HeyNewConnections { connections } => hey_new_connections(url, connections, secs),
        }
    }
}

/// One config of a claim.
#[derive(Clone)]
pub struct Variant {
    /// "A", "B", "C".
    pub label: &'static str,
    /// The config change, as shown in the table.
    pub change: &'static str,
    /// The throwaway nginx to start.
    pub cfg: NginxConfig,
}

/// A tuning claim from a seed, as configs, a load and a rule.
pub struct Claim {
    /// Short id, used by the filter and for file names.
    pub id: &'static str,
    /// Seed file name(s) the claim comes from.
    pub source: &'static str,
    /// The claim, restated.
    pub claim: &'static str,
    /// The configs, A first.
    pub variants: Vec<Variant>,
    /// The same load for every config.
    pub load: Load,
    /// Extra nginx-probe options (`--syscalls all` where the rule needs openat/close).
    pub probe_args: &'static [&'static str],
    /// The rule, deciding on nginx-probe's metrics, one per variant in order.
    pub judge: fn(&[Metrics]) -> Judgement,
}

pub(super) const SEED_000: &str = "000_ea5cb12955f3aae2.txt";
pub(super) const SEED_003: &str = "003_44fba3f37d0f850d.txt";
pub(super) const SEED_004: &str = "004_baff9fcc93a0d565.txt";

pub(super) fn base() -> NginxConfig {
    NginxConfig::default()
}

pub(super) fn with_http(extra: &str) -> NginxConfig {
    NginxConfig {
        http_extra: extra.into(),
        ..base()
    }
}

pub(super) fn with_events(extra: &str) -> NginxConfig {
    NginxConfig {
        events_extra: extra.into(),
        ..base()
    }
}

/// Every claim the lab checks, in table order.
pub fn all_claims() -> Vec<Claim> {
    // Long because: the lab's table of claims, one flat entry of data per claim (its
    // source, configs, load and rule) in table order; nothing in it branches.
    let v = |label, change, cfg| Variant { label, change, cfg };
    vec![
        Claim {
            id: "keepalive",
            source: SEED_000,
            claim: "keepalive_timeout 0 collapses throughput ~3x, all of it spent on connection set-up",
            variants: vec![
                v("A", "keepalive_timeout 65", with_http("keepalive_timeout 65;")),
                v("B", "keepalive_timeout 0", with_http("keepalive_timeout 0;")),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &["--syscalls", "all"],
            judge: judge_keepalive,
        },
        Claim {
            id: "access_log",
            source: "000_ea5cb12955f3aae2.txt, 004_baff9fcc93a0d565.txt",
            claim: "an unbuffered access log costs a write() per request, the biggest single mover (off: +38%); buffer=32k removes it",
            variants: vec![
                v("A", "access_log <file>", base()),
                v("B", "access_log <file> buffer=32k", NginxConfig {
                    access_log: Some("combined buffer=32k".into()),
                    ..base()
                }),
                v("C", "access_log off", NginxConfig {
                    access_log: Some("off".into()),
                    ..base()
                }),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &[],
            judge: judge_access_log,
        },
        Claim {
            id: "multi_accept",
            source: SEED_000,
            claim: "multi_accept on skews accepts and CPU onto one worker with 60 keepalive clients; off spreads them",
            variants: vec![
                v("A", "multi_accept off", with_events("multi_accept off;")),
                v("B", "multi_accept on", with_events("multi_accept on;")),
            ],
            load: Load::Wrk { connections: 60 },
            probe_args: &[],
            judge: judge_multi_accept,
        },
        Claim {
            id: "nofile",
            source: SEED_000,
            claim: "a soft nofile limit below the load makes accept4 fail with EMFILE; worker_rlimit_nofile (within the hard limit) clears it",
            variants: vec![
                v("A", "soft nofile 64 (hard 4096)", NginxConfig {
                    nofile: Some((64, 4096)),
                    ..base()
                }),
                v("B", "same + worker_rlimit_nofile 4096", NginxConfig {
                    nofile: Some((64, 4096)),
                    main_extra: "worker_rlimit_nofile 4096;".into(),
                    ..base()
                }),
            ],
            load: Load::Wrk { connections: 300 },
            probe_args: &[],
            judge: judge_nofile,
        },
        Claim {
            id: "worker_connections",
            source: SEED_000,
            claim: "worker_connections 64 under 300 connections degrades gracefully: idle keepalive connections are reused, every request answered",
            variants: vec![
                v("A", "worker_connections 1024", base()),
                v("B", "worker_connections 64", NginxConfig {
                    worker_connections: 64,
                    ..base()
                }),
            ],
            load: Load::Wrk { connections: 300 },
            probe_args: &[],
            judge: judge_worker_connections,
        },
        Claim {
            id: "open_file_cache",
            source: "000_ea5cb12955f3aae2.txt, 003_44fba3f37d0f850d.txt, 004_baff9fcc93a0d565.txt",
            claim: "open_file_cache saves opening the file on every request (004: +4%)",
            variants: vec![
                v("A", "no open_file_cache", base()),
                v("B", "open_file_cache max=1000 inactive=20s", with_http("open_file_cache max=1000 inactive=20s;")),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &["--syscalls", "all"],
            judge: judge_open_file_cache,
        },
        Claim {
            id: "sendfile",
            source: SEED_000,
            claim: "sendfile on is a cheap kernel win: the file goes out without a copy through user space",
            variants: vec![
                v("A", "sendfile off", NginxConfig {
                    sendfile: false,
                    ..base()
                }),
                v("B", "sendfile on", base()),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &["--syscalls", "all"],
            judge: judge_sendfile,
        },
        Claim {
            id: "worker_processes",
            source: "000_ea5cb12955f3aae2.txt, 002_59c1c54667e60002.txt",
            claim: "one worker per core: workers beyond the cores add context switches, not capacity (002: gains flatten after ~4)",
            variants: vec![
                v("A", "worker_processes 1", NginxConfig { workers: 1, ..base() }),
                v("B", "worker_processes 2", base()),
                v("C", "worker_processes 4", NginxConfig { workers: 4, ..base() }),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &[],
            judge: judge_worker_processes,
        },
        Claim {
            id: "backlog",
            source: SEED_003,
            claim: "a large listen backlog (backlog=20000, somaxconn) is needed to absorb bursts of new connections",
            variants: vec![
                v("A", "listen ... (default backlog 511)", base()),
                v("B", "listen ... backlog=16", NginxConfig {
                    listen_extra: "backlog=16".into(),
                    ..base()
                }),
            ],
            load: Load::HeyNewConnections { connections: 500 },
            probe_args: &[],
            judge: judge_backlog,
        },
        Claim {
            id: "keepalive_requests",
            source: "000_ea5cb12955f3aae2.txt, 003_44fba3f37d0f850d.txt, 004_baff9fcc93a0d565.txt",
            claim: "keepalive_requests (1000 by default) closes a connection every 1000 requests; raising it (003/004: 100000) stops the recycling",
            variants: vec![
                v("A", "keepalive_requests 100", with_http("keepalive_requests 100;")),
                v("B", "keepalive_requests 1000 (the default)", with_http("keepalive_requests 1000;")),
                v("C", "keepalive_requests 100000", with_http("keepalive_requests 100000;")),
            ],
            // Few connections, so that each passes 1000 requests within a --quick run.
            load: Load::Wrk { connections: 10 },
            probe_args: &[],
            judge: judge_keepalive_requests,
        },
        Claim {
            id: "upstream_keepalive",
            source: SEED_000,
            claim: "every proxied request costs an upstream connect; `keepalive N` in the upstream plus proxy_http_version 1.1 and `Connection \"\"` removes it",
            variants: vec![
                v("A", "proxy_pass to an upstream without keepalive", proxy_to_backend(false)),
                v("B", "upstream keepalive 64, proxy_http_version 1.1, Connection \"\"", proxy_to_backend(true)),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &[],
            judge: judge_upstream_keepalive,
        },
        Claim {
            id: "worker_connections_nofile",
            source: SEED_000,
            claim: "worker_connections 8192 above the fd limit: nginx warns at start and fails under load with EMFILE",
            variants: vec![
                v("A", "worker_connections 8192 at soft nofile 64 (hard 16384)", NginxConfig {
                    worker_connections: 8192,
                    nofile: Some((64, 16384)),
                    ..base()
                }),
                v("B", "same + worker_rlimit_nofile 16384", NginxConfig {
                    worker_connections: 8192,
                    nofile: Some((64, 16384)),
                    main_extra: "worker_rlimit_nofile 16384;".into(),
                    ..base()
                }),
            ],
            load: Load::Wrk { connections: 300 },
            probe_args: &[],
            judge: judge_worker_connections_nofile,
        },
        Claim {
            id: "accept_mutex",
            source: SEED_004,
            claim: "accept_mutex_delay 100ms with 4 workers: +9% req/s (004); the delay acts only with accept_mutex on",
            variants: vec![
                v("A", "4 workers, accept_mutex off (default)", NginxConfig { workers: 4, ..base() }),
                v("B", "accept_mutex_delay 100ms", NginxConfig {
                    workers: 4,
                    events_extra: "accept_mutex_delay 100ms;".into(),
                    ..base()
                }),
                v("C", "accept_mutex on; accept_mutex_delay 100ms", NginxConfig {
                    workers: 4,
                    events_extra: "accept_mutex on;\n    accept_mutex_delay 100ms;".into(),
                    ..base()
                }),
            ],
            load: Load::HeyNewConnections { connections: 50 },
            probe_args: &[],
            judge: judge_accept_mutex,
        },
        Claim {
            id: "tcp_nopush",
            source: "000_ea5cb12955f3aae2.txt, 004_baff9fcc93a0d565.txt",
            claim: "tcp_nopush on with sendfile batches headers and body into full segments (004: +9%)",
            variants: vec![
                v("A", "sendfile on", base()),
                v("B", "sendfile on; tcp_nopush on", with_http("tcp_nopush on;")),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &[],
            judge: judge_tcp_nopush,
        },
        Claim {
            id: "worker_processes_sweep",
            source: "002_59c1c54667e60002.txt",
            claim: "more workers raise throughput, with gains flattening after ~4 (002: 1..8 workers)",
            variants: vec![
                v("A", "worker_processes 2", base()),
                v("B", "worker_processes 4", NginxConfig { workers: 4, ..base() }),
                v("C", "worker_processes 8", NginxConfig { workers: 8, ..base() }),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &[],
            judge: judge_worker_processes_sweep,
        },
        Claim {
            id: "aio_threads",
            source: SEED_004,
            claim: "aio threads made it worse on a small cached file (004: 6107 → 5223 req/s); reads that bypass the page cache shown beside, not judged",
            variants: vec![
                v("A", "the 30-byte file (cached), sendfile on", base()),
                v("B", "aio threads", aio_config(false, true)),
                v("C", "a 256 KiB file read with directio 4k (page cache bypassed)", aio_config(true, false)),
                v("D", "same + aio threads", aio_config(true, true)),
            ],
            load: Load::Wrk { connections: 50 },
            probe_args: &[],
            judge: judge_aio_threads,
        },
        Claim {
            id: "tls_session_cache",
            source: SEED_003,
            claim: "ssl_session_cache shared:...:30m lets clients resume TLS sessions instead of a full handshake per connection",
            variants: vec![
                v("A", "no session cache, ssl_session_tickets off", tls_new_connections("ssl_session_tickets off;")),
                v("B", "ssl_session_cache shared:TLSSL:30m, ssl_session_timeout 10m, tickets off", tls_new_connections(
                    "ssl_session_cache shared:TLSSL:30m;\n    ssl_session_timeout 10m;\n    ssl_session_tickets off;",
                )),
                v("C", "no session cache, ssl_session_tickets on (the default)", tls_new_connections("ssl_session_tickets on;")),
            ],
            load: Load::WrkTls { connections: 20 },
            probe_args: &[],
            judge: judge_tls_session_cache,
        },
    ]
}

/// A config proxying every request to the lab's backend (a second nginx, its port
/// [`BACKEND_PORT`]) through `upstream backend`; `keepalive`: with `keepalive 64`,
/// `proxy_http_version 1.1` and `proxy_set_header Connection ""`.
pub(super) fn proxy_to_backend(keepalive: bool) -> NginxConfig {
    let (ka, loc) = if keepalive {
        (
            " keepalive 64;",
            " proxy_http_version 1.1; proxy_set_header Connection \"\";",
        )
    } else {
        ("", "")
    };
    NginxConfig {
        http_extra: format!("upstream backend {{ server 127.0.0.1:{BACKEND_PORT};{ka} }}"),
        server_extra: format!("location / {{ proxy_pass http://backend;{loc} }}"),
        ..base()
    }
}

/// Size of the file the `aio_threads` claim reads with `directio` (C and D): 8 reads of
/// nginx's default 32 KiB output buffer per response, small enough for a CI disk and
/// for thousands of responses in a `--quick` run.
pub const AIO_FILE_BYTES: usize = 256 * 1024;

/// A config of the `aio_threads` claim: `directio`: `/` serves a file of
/// [`AIO_FILE_BYTES`] read with `directio 4k` (O_DIRECT: every read goes to the disk,
/// standing in for a file larger than the page cache; sendfile is not used for it);
/// `aio`: `aio threads` (reads, and sendfile, handed to nginx's default thread pool).
pub(super) fn aio_config(directio: bool, aio: bool) -> NginxConfig {
    let mut http = Vec::new();
    let mut files = Vec::new();
    if directio {
        http.push("directio 4k;\n    index big.bin;");
        let body = (0..AIO_FILE_BYTES).map(|i| (i % 251) as u8).collect();
        files.push(("big.bin".to_string(), body));
    }
    if aio {
        http.push("aio threads;");
    }
    NginxConfig {
        http_extra: http.join("\n    "),
        files,
        ..base()
    }
}

/// An HTTPS config where every request comes on a new connection (`keepalive_timeout
/// 0`), so that every request costs a TLS handshake, full or resumed; `extra` goes in
/// `http { }`.
pub(super) fn tls_new_connections(extra: &str) -> NginxConfig {
    NginxConfig {
        tls: true,
        http_extra: format!("keepalive_timeout 0;\n    {extra}"),
        ..base()
    }
}

/// Checks a claim filter against [`all_claims`]; an unknown id is a one-line error
/// naming the known ones.
pub fn select(filter: &[String]) -> Result<Vec<Claim>> {
    let all = all_claims();
    for f in filter {
        if !all.iter().any(|c| c.id == f) {
            let ids: Vec<&str> = all.iter().map(|c| c.id).collect();
            bail!("unknown claim `{f}`: known claims are {}", ids.join(", "));
        }
    }
    Ok(all
        .into_iter()
        .filter(|c| filter.is_empty() || filter.iter().any(|f| f == c.id))
        .collect())
}

// ---------------------------------------------------------------------------------------
// Running.
