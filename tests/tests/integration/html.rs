//! `nginx-probe report FILE --html OUT`: a run recorded with an exact number of
//! connections, rendered as a page, and the page loaded in headless Chromium: its
//! rendered DOM must show every worker with its accepts (summing to the connections
//! made), the summary's verdicts, one histogram per worker and traced syscall with calls,
//! and the page must not make a single network request.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use nginx_probe_tests::{
    keepalive_requests, one_request_per_connection, total_accepts, workers, Nginx, NginxConfig,
    Probe,
};

/// One-request connections, then keepalive connections carrying several requests each.
const SHORT_CONNECTIONS: usize = 300;
const KEEPALIVE_CONNECTIONS: usize = 5;
const KEEPALIVE_REQUESTS_EACH: usize = 40;

fn chromium_binary() -> String {
    std::env::var("CHROMIUM_BIN").unwrap_or_else(|_| "chromium".into())
}

/// What one headless Chromium run of a page gave.
struct Loaded {
    /// `--dump-dom`: the DOM after loading, serialized.
    dom: String,
    /// URLs the page itself asked for (from Chromium's net log: requests whose initiator
    /// is a document, not the browser).
    page_requests: Vec<String>,
}

/// Flags that keep Chromium's own background services (updates, accounts, spelling
/// dictionaries) quiet, and resolve every host name to NOTFOUND so that nothing at all
/// leaves the machine even if something tries.
const QUIET: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-features=Translate,OptimizationHints,MediaRouter,SpellCheck,AutofillServerCommunication",
    "--host-resolver-rules=MAP * ~NOTFOUND",
];

/// Runs Chromium with `args` and a fresh profile in `work`, killing it after 90 s.
fn chromium(work: &Path, args: &[String]) -> String {
    let profile = tempfile::tempdir_in(work).expect("profile dir");
    let mut child = Command::new(chromium_binary())
        .args(QUIET)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium (run `cargo xtask setup`, which installs it)");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).expect("read chromium stdout");
        s
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait chromium") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish in 90 s: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = reader.join().expect("reader");
    assert!(status.success(), "chromium failed ({status}): {args:?}");
    out
}

/// Loads `page` in headless Chromium: its DOM, and what it requested over the network.
fn load(work: &Path, page: &Path) -> Loaded {
    let netlog = work.join(format!(
        "{}.netlog.json",
        page.file_name().unwrap().to_string_lossy()
    ));
    let dom = chromium(
        work,
        &[
            format!("--log-net-log={}", netlog.display()),
            "--dump-dom".into(),
            format!("file://{}", page.display()),
        ],
    );
    let log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&netlog).expect("net log written"))
            .expect("net log is JSON");
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .expect("URL_REQUEST_START_JOB in the net log constants");
    let page_requests = log["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start_job))
        .filter(|e| {
            // Chromium's own requests have no origin; a file:// page's have "null".
            e["params"]["url"].is_string() && e["params"]["initiator"] != "not an origin"
        })
        .map(|e| e["params"]["url"].as_str().unwrap().to_string())
        .collect();
    Loaded { dom, page_requests }
}

/// The value of attribute `name` in the start tag at the beginning of `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let head = &tag[..tag.find('>')?];
    let i = head.find(&format!(" {name}=\""))? + name.len() + 3;
    Some(&head[i..i + head[i..].find('"')?])
}

/// Every element of `dom` whose start tag begins with `open`: from there to `close`.
fn elements<'a>(dom: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    dom.match_indices(open)
        .map(|(i, _)| {
            let end = i + dom[i..].find(close).expect("element closed");
            &dom[i..end]
        })
        .collect()
}

/// The text of an HTML fragment: tags removed.
fn text(fragment: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in fragment.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn html_report_of_a_recorded_run_renders_in_chromium() {
    let work = tempfile::tempdir().expect("temp dir");
    let rec = work.path().join("run.jsonl");
    let out = work.path().join("report.html");
    let ng = Nginx::start(&NginxConfig::default());
    let probe = Probe::on(&ng)
        .record(&rec)
        .interval(1)
        .syscalls_all()
        .summary_only()
        .start();
    let started = Instant::now();
    assert_eq!(
        one_request_per_connection(ng.addr(), SHORT_CONNECTIONS),
        SHORT_CONNECTIONS
    );
    assert_eq!(
        keepalive_requests(ng.addr(), KEEPALIVE_CONNECTIONS, KEEPALIVE_REQUESTS_EACH),
        KEEPALIVE_CONNECTIONS * KEEPALIVE_REQUESTS_EACH
    );
    // At least two whole intervals in the recording.
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(started.elapsed()));
    probe.stop();
    drop(ng);

    let connections = (SHORT_CONNECTIONS + KEEPALIVE_CONNECTIONS) as u64;
    let recorded = std::fs::read_to_string(&rec).expect("recording");
    let lines: Vec<serde_json::Value> = recorded
        .lines()
        .map(|l| serde_json::from_str(l).expect("recording line is JSON"))
        .collect();
    let summary = lines.last().expect("lines").clone();
    assert_eq!(summary["type"], "summary");
    assert_eq!(total_accepts(&summary), connections, "{summary}");
    let intervals = lines.iter().filter(|l| l["type"] == "interval").count();
    assert!(intervals >= 2, "{intervals} intervals");

    // Render.
    let made = Probe::report(&rec).arg("--html").arg(&out).run();
    assert!(made.status.success(), "{made:?}");
    assert_eq!(
        made.stderr.trim(),
        format!("nginx-probe: wrote {}", out.display())
    );
    let html = std::fs::read_to_string(&out).expect("page written");
    assert!(!html.contains("://"), "the page names a URL");

    let page = load(work.path(), &out);
    let dom = &page.dom;
    assert!(
        page.page_requests.is_empty(),
        "the page made network requests: {:?}",
        page.page_requests
    );
    for attr_url in ["src=\"http", "href=\"http", "src=\"//", "href=\"//"] {
        assert!(!dom.contains(attr_url), "{attr_url} in the rendered page");
    }

    // Accept-share bars: one per worker, with its pid, accepts and share in the label.
    let bars = elements(dom, "<div class=\"bar-row", "</span></span></div>");
    let sw = workers(&summary);
    assert_eq!(bars.len(), sw.len(), "one bar per worker");
    let mut accepts_shown = 0;
    for w in &sw {
        let pid = w["pid"].as_u64().unwrap().to_string();
        let accepts = w["accepts"].as_u64().unwrap();
        let bar = bars
            .iter()
            .find(|b| attr(b, "data-pid") == Some(pid.as_str()))
            .unwrap_or_else(|| panic!("no bar for worker {pid}"));
        assert_eq!(
            attr(bar, "data-accepts"),
            Some(accepts.to_string().as_str())
        );
        let share = w["accept_share"].as_f64().unwrap() * 100.0;
        assert_eq!(
            text(bar),
            format!("worker {pid} — {accepts} accepts ({share:.1}%)"),
            "{bar}"
        );
        assert!(
            bar.contains(&format!("style=\"width:{share:.1}%\"")),
            "{bar}"
        );
        accepts_shown += accepts;
    }
    assert_eq!(accepts_shown, connections);

    // The summary's verdicts, in its order; or the plain "no verdicts".
    let ids: Vec<String> = summary["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    let shown: Vec<String> = elements(dom, "<div class=\"verdict ", "</div>")
        .iter()
        .map(|v| attr(v, "data-verdict").unwrap().to_string())
        .collect();
    assert_eq!(shown, ids);
    // 305 connections for 500 requests: 0.61 accepts per request.
    assert!(ids.contains(&"keepalive_off".to_string()), "{ids:?}");
    if ids.is_empty() {
        assert!(dom.contains("No verdicts"));
    }

    // One histogram per worker and traced syscall with calls, its bars summing to the
    // calls timed.
    let mut want = BTreeSet::new();
    for w in &sw {
        for (name, s) in w["syscalls"].as_object().unwrap() {
            let count = s["count"].as_u64().unwrap();
            if count > 0 {
                let timed: u64 = s["hist_log2_ns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_u64().unwrap())
                    .sum();
                want.insert((w["pid"].as_u64().unwrap(), name.clone(), count, timed));
            }
        }
    }
    let mut got = BTreeSet::new();
    for fig in elements(dom, "<figure class=\"hist\"", "</figure>") {
        let drawn: u64 = elements(fig, "<g class=\"bucket\"", "</g>")
            .iter()
            .map(|g| attr(g, "data-count").unwrap().parse::<u64>().unwrap())
            .sum();
        assert!(fig.contains("<svg "), "{fig}");
        got.insert((
            attr(fig, "data-pid").unwrap().parse().unwrap(),
            attr(fig, "data-syscall").unwrap().to_string(),
            attr(fig, "data-calls").unwrap().parse().unwrap(),
            drawn,
        ));
    }
    assert_eq!(got, want);
    // --syscalls all: a worker serving static files calls at least accept4, close,
    // epoll_wait, newfstatat, openat, recvfrom, sendfile, write and writev.
    assert!(want.len() >= 9, "{want:?}");
    assert!(want.iter().any(|(_, s, _, _)| s == "sendfile"));

    // The timeline has a point per recorded interval.
    assert!(
        dom.contains(&format!("data-intervals=\"{intervals}\"")),
        "timeline of {intervals} intervals"
    );

    // A screenshot to look at (kept in the target directory).
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html-report.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        work.path(),
        &[
            "--window-size=1280,2400".into(),
            format!("--screenshot={}", shot.display()),
            format!("file://{}", out.display()),
        ],
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000);
    eprintln!("screenshot: {}", shot.display());

    // The network check is real: a page with an external image and style sheet is
    // caught by it (host names resolve to nothing, so nothing leaves the machine).
    let control = work.path().join("control.html");
    std::fs::write(
        &control,
        "<!DOCTYPE html><p>x</p><img src=\"http://nginx-probe-test.invalid/x.png\">\
         <link rel=\"stylesheet\" href=\"https://nginx-probe-test.invalid/a.css\">",
    )
    .unwrap();
    let c = load(work.path(), &control);
    assert_eq!(
        c.page_requests.iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            &"http://nginx-probe-test.invalid/x.png".to_string(),
            &"https://nginx-probe-test.invalid/a.css".to_string()
        ])
    );
}

#[test]
fn html_to_a_bad_path_is_one_line_and_exit_2_with_nothing_written() {
    let work = tempfile::tempdir().expect("temp dir");
    let rec = work.path().join("run.jsonl");
    std::fs::write(
        &rec,
        include_str!("../../../nginx-probe/src/testdata/two_workers_300_connections.jsonl"),
    )
    .unwrap();
    let missing_dir = work.path().join("no/such/dir/report.html");
    let out = Probe::report(&rec).arg("--html").arg(&missing_dir).run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        out.stderr,
        format!(
            "nginx-probe: --html {}: cannot write it (No such file or directory (os error 2)): choose a writable file path\n",
            missing_dir.display(),
        )
    );
    assert!(out.stdout.is_empty());
    // A directory as OUT: refused, left as it was.
    let out = Probe::report(&rec).arg("--html").arg(work.path()).run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("it is a directory"), "{}", out.stderr);
    // Somewhere nothing can be created, even by root.
    let out = Probe::report(&rec)
        .arg("--html")
        .arg("/proc/report.html")
        .run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("nginx-probe: --html /proc/report.html: cannot write it ("),
        "{}",
        out.stderr
    );
    // --html with --json: a usage error.
    let out = Probe::report(&rec).arg("--html").arg("x.html").json().run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
}
