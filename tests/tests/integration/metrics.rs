//! `--listen`: Prometheus metrics scraped from a real run, parsed with a Prometheus
//! text-format parser, with exact counts. Run as root through `cargo xtask test`.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    time::Duration,
};

use nginx_probe_tests::{free_port, hey, one_request_per_connection, Nginx, NginxConfig, Probe};
use prometheus_parse::{Sample, Scrape, Value};

/// `GET /metrics` on a new connection; panics unless the answer is 200 in the
/// Prometheus text format. Returns the raw text.
fn get_metrics(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to /metrics");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        .expect("send scrape");
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("read scrape");
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP header end: {resp}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    body.to_string()
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text parses")
}

fn samples<'a>(s: &'a Scrape, name: &str) -> Vec<&'a Sample> {
    s.samples.iter().filter(|x| x.metric == name).collect()
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Counter(x) | Value::Gauge(x) | Value::Untyped(x) => *x,
        other => panic!("not a number: {other:?}"),
    }
}

/// Sum of a metric's samples.
fn total(s: &Scrape, name: &str) -> f64 {
    samples(s, name).iter().map(|x| num(&x.value)).sum()
}

/// (worker, generation) of a sample.
fn worker_of(x: &Sample) -> (String, String) {
    (
        x.labels.get("worker").unwrap_or_default().to_string(),
        x.labels.get("generation").unwrap_or_default().to_string(),
    )
}

#[test]
fn metrics_count_connections_exactly_and_label_workers_without_pids() {
    let ng = Nginx::start(&NginxConfig::default());
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let probe = Probe::on(&ng).json().summary_only().listen(port).start();
    assert!(
        probe
            .stderr
            .iter()
            .any(|l| l
                == &format!("nginx-probe: serving Prometheus metrics at http://{listen}/metrics")),
        "{:?}",
        probe.stderr
    );

    const N: usize = 200;
    assert_eq!(one_request_per_connection(ng.addr(), N), N);
    let text = get_metrics(port);
    let first = parse(&text);
    assert_eq!(
        total(&first, "nginx_probe_accepts_total"),
        N as f64,
        "{text}"
    );
    // nginx's own request counter (global, no worker label).
    assert_eq!(
        total(&first, "nginx_probe_requests_total"),
        N as f64,
        "{text}"
    );
    assert_eq!(
        total(&first, "nginx_probe_master_pid"),
        ng.master_pid() as f64
    );
    for x in samples(&first, "nginx_probe_requests_total") {
        assert_eq!(x.labels.get("source"), Some("stub_status"));
        assert!(x.labels.get("worker").is_none(), "{text}");
    }
    assert!(first.docs.contains_key("nginx_probe_accepts_total"));
    assert!(text.contains("# TYPE nginx_probe_syscall_duration_seconds histogram"));
    assert!(text.contains("# TYPE nginx_probe_accepts_total counter"));

    // The info metric: one per worker, with the pids nginx has.
    let infos = samples(&first, "nginx_probe_worker_info");
    let info_pids: BTreeSet<u32> = infos
        .iter()
        .map(|x| x.labels.get("pid").expect("pid label").parse().unwrap())
        .collect();
    let nginx_pids: BTreeSet<u32> = ng.worker_pids().into_iter().collect();
    assert_eq!(info_pids, nginx_pids, "{text}");
    let slots: BTreeSet<(String, String)> = infos.iter().map(|x| worker_of(x)).collect();
    let expect: BTreeSet<(String, String)> = [("0", "0"), ("1", "0")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(slots, expect, "{text}");
    for x in &infos {
        assert_eq!(x.labels.get("alive"), Some("true"));
        assert_eq!(num(&x.value), 1.0);
    }

    // Every worker series carries worker and generation and never a pid; nothing but
    // the info metric has a pid label.
    let per_worker = [
        "nginx_probe_accepts_total",
        "nginx_probe_accept_errors_total",
        "nginx_probe_accept_eagain_total",
        "nginx_probe_syscalls_total",
        "nginx_probe_syscall_errors_total",
        "nginx_probe_syscall_duration_seconds",
        "nginx_probe_syscall_duration_seconds_sum",
        "nginx_probe_syscall_duration_seconds_count",
        "nginx_probe_writes_total",
        "nginx_probe_write_bytes_total",
        "nginx_probe_write_seconds_total",
        "nginx_probe_event_loop_iterations_total",
        "nginx_probe_event_loop_busy_seconds_total",
        "nginx_probe_cpu_seconds_total",
        "nginx_probe_accepted_then_closed_total",
        "nginx_probe_open_fds",
        "nginx_probe_open_fds_peak",
        "nginx_probe_fd_limit",
    ];
    for name in per_worker {
        let xs = samples(&first, name);
        assert!(!xs.is_empty(), "no {name} in {text}");
        for x in xs {
            let (w, g) = worker_of(x);
            assert!(
                expect.contains(&(w.clone(), g.clone())),
                "{name}: worker={w:?} generation={g:?}"
            );
        }
    }
    for x in &first.samples {
        if x.metric != "nginx_probe_worker_info" {
            assert!(
                x.labels.get("pid").is_none(),
                "{} has a pid label",
                x.metric
            );
        }
    }

    // The accept4 histogram: cumulative, +Inf last, its count that of syscalls_total
    // (nginx's workers wait in epoll, so no accept4 was in flight at attach).
    let mut hist_total = 0.0;
    for x in samples(&first, "nginx_probe_syscall_duration_seconds") {
        if x.labels.get("syscall") != Some("accept4") {
            continue;
        }
        let Value::Histogram(buckets) = &x.value else {
            panic!("not a histogram: {x:?}");
        };
        assert_eq!(buckets.len(), 27, "26 bounds and +Inf");
        assert!(buckets.windows(2).all(|b| b[0].less_than < b[1].less_than));
        assert!(buckets.windows(2).all(|b| b[0].count <= b[1].count));
        let inf = buckets.last().unwrap();
        assert!(inf.less_than.is_infinite(), "{buckets:?}");
        let (w, g) = worker_of(x);
        let pick = |name: &str| -> f64 {
            samples(&first, name)
                .into_iter()
                .filter(|s| worker_of(s) == (w.clone(), g.clone()))
                .filter(|s| s.labels.get("syscall") == Some("accept4"))
                .map(|s| num(&s.value))
                .sum()
        };
        let count = pick("nginx_probe_syscall_duration_seconds_count");
        assert_eq!(inf.count, count);
        assert_eq!(count, pick("nginx_probe_syscalls_total"), "worker {w}");
        assert!(pick("nginx_probe_syscall_duration_seconds_sum") > 0.0 || count == 0.0);
        hist_total += count;
    }
    // Every successful accept4 is one observation; the EAGAIN ones are the rest, counted
    // apart from the errors (nginx's accepts are non-blocking: EAGAIN is no failure).
    assert!(samples(&first, "nginx_probe_accept_errors_total")
        .iter()
        .all(|x| x.labels.get("errno") != Some("EAGAIN")));
    let eagain: f64 = samples(&first, "nginx_probe_accept_eagain_total")
        .iter()
        .map(|x| num(&x.value))
        .sum();
    assert_eq!(hist_total, N as f64 + eagain, "{text}");

    // A second scrape after M more connections: exactly M more accepts.
    const M: usize = 37;
    assert_eq!(one_request_per_connection(ng.addr(), M), M);
    let second = parse(&get_metrics(port));
    assert_eq!(
        total(&second, "nginx_probe_accepts_total") - total(&first, "nginx_probe_accepts_total"),
        M as f64
    );
    assert_eq!(total(&second, "nginx_probe_requests_total"), (N + M) as f64);

    // The JSON summary agrees, and the server goes with the run.
    let out = probe.stop();
    assert_eq!(
        nginx_probe_tests::total_accepts(&out.summary_json()),
        (N + M) as u64
    );
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "/metrics still served after exit"
    );
}

#[test]
fn metrics_count_tls_handshakes_exactly() {
    let ng = Nginx::start(&NginxConfig {
        tls: true,
        ..NginxConfig::default()
    });
    let port = free_port();
    let probe = Probe::on(&ng).json().summary_only().listen(port).start();
    // Exporter mode is --detail sampled: past the first window (the first second),
    // libssl's programs are unlinked until the next (20 s) and nginx's
    // ngx_ssl_ocsp_validate alone counts.
    std::thread::sleep(Duration::from_millis(1500));
    // One TLS connection per request: one completed handshake each.
    const N: usize = 50;
    let n = N.to_string();
    assert_eq!(
        hey(
            &["-n", &n, "-c", "2", "-disable-keepalive"],
            &ng.https_url()
        ),
        N
    );
    let text = get_metrics(port);
    let s = parse(&text);
    for (name, want) in [
        ("nginx_probe_tls_handshakes_total", N as f64),
        ("nginx_probe_tls_handshakes_from_nginx", 1.0),
        // Detail-layer figures: no window was open during the load.
        ("nginx_probe_tls_handshakes_started_total", 0.0),
        ("nginx_probe_tls_handshakes_abandoned_total", 0.0),
        ("nginx_probe_tls_handshake_calls_total", 0.0),
    ] {
        assert_eq!(samples(&s, name).len(), 1, "{name}: {text}");
        assert_eq!(total(&s, name), want, "{name}: {text}");
    }
    assert!(
        text.lines().any(
            |l| l.starts_with("# HELP nginx_probe_tls_handshakes_started_total")
                && l.contains("Under --detail sampled: counted inside detail windows only")
        ),
        "{text}"
    );
    assert!(text.contains("# TYPE nginx_probe_tls_handshakes_total counter"));
    drop(probe);
}

#[test]
fn metrics_follow_a_reload_by_worker_and_generation() {
    let ng = Nginx::start(&NginxConfig::default());
    let port = free_port();
    let probe = Probe::on(&ng).json().summary_only().listen(port).start();
    let old: BTreeSet<u32> = ng.worker_pids().into_iter().collect();
    assert_eq!(one_request_per_connection(ng.addr(), 100), 100);
    ng.reload();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let new: BTreeSet<u32> = loop {
        let now: BTreeSet<u32> = ng.worker_pids().into_iter().collect();
        if now.len() == 2 && now.is_disjoint(&old) {
            break now;
        }
        assert!(std::time::Instant::now() < deadline, "no reload: {now:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(one_request_per_connection(ng.addr(), 50), 50);
    // The 500 ms refresh marks the old workers exited.
    std::thread::sleep(Duration::from_millis(1200));
    let text = get_metrics(port);
    let m = parse(&text);
    assert_eq!(total(&m, "nginx_probe_accepts_total"), 150.0, "{text}");
    // Four distinct (worker, generation) names; pids only in the info metric.
    let mut by_name: BTreeMap<(String, String), (u32, bool)> = BTreeMap::new();
    for x in samples(&m, "nginx_probe_worker_info") {
        let pid = x.labels.get("pid").unwrap().parse().unwrap();
        let alive = x.labels.get("alive") == Some("true");
        assert!(
            by_name.insert(worker_of(x), (pid, alive)).is_none(),
            "{text}"
        );
    }
    assert_eq!(by_name.len(), 4, "{text}");
    let alive: BTreeSet<u32> = by_name.values().filter(|v| v.1).map(|v| v.0).collect();
    let dead: BTreeSet<u32> = by_name.values().filter(|v| !v.1).map(|v| v.0).collect();
    assert_eq!(alive, new);
    assert_eq!(dead, old);
    // The first 100 connections were the old workers', the last 50 the new ones'.
    let accepts_of = |pids: &BTreeSet<u32>| -> f64 {
        samples(&m, "nginx_probe_accepts_total")
            .iter()
            .filter(|x| {
                by_name
                    .get(&worker_of(x))
                    .is_some_and(|v| pids.contains(&v.0))
            })
            .map(|x| num(&x.value))
            .sum()
    };
    assert_eq!(accepts_of(&old), 100.0, "{text}");
    assert_eq!(accepts_of(&new), 50.0, "{text}");
    // Exited workers keep their counters but not their fd gauges.
    for x in samples(&m, "nginx_probe_open_fds") {
        assert!(by_name[&worker_of(x)].1, "fd gauge of an exited worker");
    }
    drop(probe);
}

#[test]
fn metrics_series_per_worker_are_as_documented() {
    let ng = Nginx::start(&NginxConfig::default());
    let port = free_port();
    // Every series, as documented (sampled leaves out nginx_probe_upstream_fds_open).
    let probe = Probe::on(&ng)
        .json()
        .summary_only()
        .listen(port)
        .args(["--detail", "full"])
        .start();
    assert_eq!(one_request_per_connection(ng.addr(), 10), 10);
    // Let the 500 ms sampler see fds and CPU time.
    std::thread::sleep(Duration::from_millis(700));
    let text = get_metrics(port);
    let mut per_worker: BTreeMap<String, usize> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, _value) = line.rsplit_once(' ').expect("sample line");
        if let Some(i) = series.find("worker=\"") {
            let w = series[i..].split(',').take(2).collect::<Vec<_>>().join(",");
            *per_worker
                .entry(w.trim_end_matches('}').to_string())
                .or_default() += 1;
        }
    }
    // The documented bound (render::prometheus::series_per_worker): 44 (5 of them the
    // worker's own closes, by who closed and its own resets) + 32 per timed syscall (12 in the core set) +
    // 3 per exit-only one (8) + 39 upstream + 22 fd errors; 8 write destinations: this
    // kernel has BTF.
    assert_eq!(per_worker.len(), 2, "{per_worker:?}");
    for (w, n) in &per_worker {
        assert_eq!(*n, 45 + 32 * 12 + 3 * 8 + 39 + 22, "{w}");
    }
    drop(probe);
}

#[test]
fn busy_or_bad_listen_address_exits_2_with_one_line() {
    let ng = Nginx::start(&NginxConfig::default());
    let master = ng.master_pid().to_string();
    let busy = TcpListener::bind("127.0.0.1:0").expect("bind a port to make it busy");
    let addr = busy.local_addr().unwrap().to_string();
    for (args, expect) in [
        (
            vec!["--pid", &master, "--listen", &addr],
            format!("nginx-probe: --listen {addr}: cannot listen there (Address already in use"),
        ),
        (
            vec!["--pid", &master, "--listen", "localhost:80"],
            "nginx-probe: invalid value 'localhost:80' for '--listen [<ADDR>]': `localhost:80` is not an address to listen on: give IP:PORT, e.g. 127.0.0.1:9752".to_string(),
        ),
        (
            // TEST-NET-1: not an address of this host.
            vec!["--pid", &master, "--listen", "192.0.2.1:9752"],
            "nginx-probe: --listen 192.0.2.1:9752: cannot listen there (Cannot assign requested address".to_string(),
        ),
    ] {
        let out = Probe::with_args(&args).run_loading_nothing();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {:?}", out.stderr);
        assert!(lines[0].starts_with(&expect), "{args:?}: {}", lines[0]);
    }
    drop(busy);
}
