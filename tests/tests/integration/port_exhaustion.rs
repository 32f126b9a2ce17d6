//! Case 18 of ../shared/cases: upstream connects fail with EADDRNOTAVAIL. In a network
//! namespace with 500 local ports and no TIME-WAIT reuse, nginx proxies with HTTP/1.1
//! and `Connection ""` but no `keepalive` in an upstream block: it closes every
//! upstream connection itself, each leaves its local port in TIME-WAIT on nginx's
//! side, and after 500 requests every connect fails for lack of a port.

use std::{
    io::{BufReader, Write},
    net::TcpStream,
    time::Duration,
};

use nginx_probe_tests::{read_status, verdict, verdict_ids, NetNs, Nginx, NginxConfig, Probe};

const REQUESTS: usize = 700;

#[test]
fn eaddrnotavail_is_critical_naming_keepalive_the_port_range_and_the_peer() {
    let ns = NetNs::new(
        &format!("np-ports-{}", std::process::id()),
        &[
            ("net.ipv4.ip_local_port_range", "40000 40499"),
            ("net.ipv4.tcp_tw_reuse", "0"),
        ],
    );
    let backend = Nginx::start(&NginxConfig {
        netns: Some(ns.name.clone()),
        access_log: Some("off".into()),
        ..NginxConfig::default()
    });
    let front = Nginx::start(&NginxConfig {
        netns: Some(ns.name.clone()),
        access_log: Some("off".into()),
        server_extra: format!(
            "location / {{ proxy_pass http://{}; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}",
            backend.addr()
        ),
        ..NginxConfig::default()
    });
    let addr = front.addr();
    // TIME-WAIT sockets already in the namespace (the readiness checks' connections,
    // which the checker closed first), from the kernel's own count.
    let tw = || -> u64 {
        let t =
            std::fs::read_to_string(format!("/proc/{}/net/sockstat", front.master_pid())).unwrap();
        let line = t
            .lines()
            .find(|l| l.starts_with("TCP:"))
            .unwrap()
            .to_string();
        let w: Vec<&str> = line.split_whitespace().collect();
        w[w.iter().position(|x| *x == "tw").unwrap() + 1]
            .parse()
            .unwrap()
    };
    let tw_before = tw();
    // One client connection carries every request and stays open until the report is
    // made, so every TIME-WAIT socket in the namespace is nginx's, on the upstream side.
    let mut client = None;
    let mut statuses = std::collections::BTreeMap::<u16, u64>::new();
    let s = Probe::on(&front)
        .args(["--detail", "full"])
        .json()
        .settle(Duration::from_millis(1500))
        .summary_around(|| {
            let (c, st) = NetNs::run_in(&ns.name, move || {
                let mut c = BufReader::new(TcpStream::connect(addr).expect("connect"));
                let mut st = std::collections::BTreeMap::<u16, u64>::new();
                for _ in 0..REQUESTS {
                    c.get_mut()
                        .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                        .expect("send");
                    let (code, _) = read_status(&mut c).expect("a response");
                    *st.entry(code).or_default() += 1;
                }
                (c, st)
            });
            client = Some(c);
            statuses = st;
        });
    drop(client);
    let ok = statuses.get(&200).copied().unwrap_or(0);
    let bad_gateway = statuses.get(&502).copied().unwrap_or(0);
    assert_eq!(ok + bad_gateway, REQUESTS as u64, "{statuses:?}");
    assert!(ok <= 500 && bad_gateway >= 200, "{statuses:?}");

    // Three sources agree: the kernel's connect errno, nginx's error log, the clients.
    let up = |k: &str| -> u64 {
        s["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["upstream"]["errors"][k].as_u64().unwrap_or(0))
            .sum()
    };
    assert_eq!(up("EADDRNOTAVAIL"), bad_gateway, "{s}");
    assert_eq!(
        s["nginx_errors"]["classes"]["upstream_addr_unavailable"]["count"], bad_gateway,
        "{}",
        s["nginx_errors"]
    );
    let lp = &s["local_ports"];
    assert_eq!(lp["range"], serde_json::json!([40000, 40499]), "{lp}");
    assert_eq!(lp["tcp_tw_reuse"], 0, "{lp}");
    // nginx closed each upstream connection it established: one TIME-WAIT each.
    assert_eq!(lp["time_wait"], tw_before + ok, "{lp}");

    let v =
        verdict(&s, "upstream_keepalive_off").unwrap_or_else(|| panic!("{:?}", verdict_ids(&s)));
    assert_eq!(v["severity"], "critical", "{v}");
    assert_eq!(v["evidence"]["attempts_per_request"], 1.0, "{v}");
    // The configuration: a bare-address proxy_pass (no pool to enable), already on
    // HTTP/1.1 without `Connection: close`: only the upstream block is missing.
    let loc = format!("server 127.0.0.1:{} location /", front.port);
    assert_eq!(
        v["evidence"]["config_upstream_keepalive"],
        "no upstream block (a proxy_pass to an address has no pool of idle connections)",
        "{v}"
    );
    assert_eq!(
        v["evidence"]["config_proxy_http_version"],
        format!("{loc}: 1.1 ({})", front.conf_at("proxy_pass"))
    );
    let a = v["advice"].as_str().unwrap();
    assert!(
        a.contains(&format!("{loc} passes to {}, an address with no `upstream` block and so no pool: give it one with `keepalive 32;`", backend.addr())),
        "{a}"
    );
    assert!(
        a.contains(&format!(
            "(EADDRNOTAVAIL: {bad_gateway} connects failed for lack of a local port; local ports 40000-40499 (500, net.ipv4.ip_local_port_range in nginx's network namespace), {} sockets in TIME-WAIT there",
            tw_before + ok
        )),
        "{a}"
    );
    assert!(
        a.contains(&format!(
            "peers in nginx's error log: http://{} ({bad_gateway} lines)",
            backend.addr()
        )),
        "{a}"
    );
    drop(front);
    drop(backend);
    drop(ns);
}
