//! Outputs held byte for byte on a real recording (2 workers, `--syscalls all
//! --interval 1 --duration 5`, 300 one-request connections): the JSON `report --json`
//! prints, the Prometheus text of its summary and the text report. A change that
//! moves code between layers must leave these files as they are; a change meant to
//! alter an output rewrites them with `NGINX_PROBE_UPDATE_GOLDEN=1 cargo test -p
//! nginx-probe golden` and shows the difference in its diff.

use crate::{
    io::recording::Recording,
    render::{prometheus, text},
    safe,
};

const REAL: &str = include_str!("../testdata/two_workers_300_connections.jsonl");

fn whole() -> crate::model::Report {
    let rec = Recording::parse("real", REAL).expect("the recording parses");
    rec.whole_run().0.clone()
}

/// `actual` equals the file `testdata/<name>`, or rewrites it when asked to.
fn holds(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/testdata")
        .join(name);
    if std::env::var_os("NGINX_PROBE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write the golden file");
    }
    let expected = std::fs::read_to_string(&path).expect("the golden file");
    assert!(
        expected == actual,
        "{name} changed; first differing line: {:?}",
        expected.lines().zip(actual.lines()).find(|(a, b)| a != b)
    );
}

#[test]
fn golden_report_json() {
    holds(
        "two_workers_300_connections.report.json",
        &(safe::json(&whole()) + "\n"),
    );
}

#[test]
fn golden_metrics() {
    holds(
        "two_workers_300_connections.metrics.txt",
        &prometheus::render(&whole()),
    );
}

#[test]
fn golden_text() {
    let r = whole();
    holds(
        "two_workers_300_connections.report.txt",
        &text::render_text(&r, None, &text::clock(r.time_unix_s)),
    );
}
