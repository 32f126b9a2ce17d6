//! The exposition of the fixture report read back line by line as a scraper reads it:
//! HELP before TYPE, each family whole and once, counters named `_total`, no `pid`
//! label but on `worker_info`, and the number of series per worker within the
//! documented bound.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

/// What a pass over the exposition has seen so far.
#[derive(Default)]
struct Reader {
    /// Each family's TYPE.
    typed: BTreeMap<String, String>,
    /// Families with a HELP line.
    helped: BTreeSet<String>,
    /// Every series, to catch one written twice.
    seen: BTreeSet<String>,
    /// Families whose samples ended (another family's TYPE came).
    finished: BTreeSet<String>,
    /// The family whose samples come now.
    current: String,
    /// Series per `worker="..",generation=".."` pair.
    per_worker: BTreeMap<String, usize>,
}

impl Reader {
    /// Reads one line of the exposition, asserting its well-formedness.
    fn line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(self.helped.insert(name.to_string()), "HELP twice: {name}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            self.type_line(rest);
        } else {
            self.sample(line);
        }
    }

    /// `# TYPE name kind`: after its HELP, once, and named as its kind asks.
    fn type_line(&mut self, rest: &str) {
        let mut it = rest.split(' ');
        let (name, kind) = (it.next().unwrap(), it.next().unwrap());
        assert!(self.helped.contains(name), "TYPE before HELP: {name}");
        assert!(
            self.typed.insert(name.into(), kind.into()).is_none(),
            "TYPE twice: {name}"
        );
        if !self.current.is_empty() {
            self.finished.insert(std::mem::take(&mut self.current));
        }
        self.current = name.to_string();
        assert!(name.starts_with("nginx_probe_"), "{name}");
        match kind {
            "counter" => assert!(name.ends_with("_total"), "{name}"),
            "gauge" | "histogram" => assert!(!name.ends_with("_total"), "{name}"),
            _ => panic!("unexpected type {kind}"),
        }
    }

    /// A sample: a number, a series once, inside its family, counted per worker.
    fn sample(&mut self, line: &str) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok() || value == "+Inf", "{line}");
        assert!(
            self.seen.insert(series.to_string()),
            "series twice: {series}"
        );
        let name = series.split('{').next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| self.typed.get(*f).map(String::as_str) == Some("histogram"))
            })
            .unwrap_or(name);
        assert_eq!(family, self.current, "{line} outside its family");
        assert!(!self.finished.contains(family), "{family} split");
        if name != "nginx_probe_worker_info" {
            assert!(!series.contains("pid="), "pid label: {line}");
        }
        if let Some(i) = series.find("worker=") {
            assert!(series.contains("generation="), "{line}");
            let w = series[i..].split(',').take(2).collect::<Vec<_>>().join(",");
            *self
                .per_worker
                .entry(w.trim_end_matches('}').to_string())
                .or_default() += 1;
        }
    }
}

#[test]
fn exposition_is_well_formed_and_bounded() {
    let text = render(&report());
    let mut reader = Reader::default();
    for line in text.lines() {
        reader.line(line);
    }
    let per_worker = reader.per_worker;
    let core_names: Vec<String> = core()
        .iter()
        .map(|&i| nginx_probe_common::SYSCALLS[i].name.to_string())
        .collect();
    let n = series_for(&core_names);
    // 45 + 32 per timed syscall (12) + 3 per exit-only one (8) + 39 upstream + 22 fd
    // errors.
    assert_eq!(n, 514, "the documented bound for the core set");
    // Worker 0 was counted by uprobes: one more (worker_requests_total).
    assert_eq!(per_worker[r#"worker="0",generation="1""#], n + 1);
    assert_eq!(
        per_worker[r#"worker="1",generation="0""#],
        n - 4,
        "no fd gauges, no upstream_fds_open"
    );
    assert_eq!(
        per_worker[r#"worker="exited",generation="merged""#],
        n - 5,
        "no fd gauges, no upstream_fds_open, no info"
    );
    assert_eq!(per_worker.len(), 3);
    // The same from the table's rows: 12 timed and 8 exit-only core syscalls.
    let of = |who| super::super::super::prometheus_series::series_of(12, 8, who);
    assert_eq!(of(Workers::Live), n);
    assert_eq!(of(Workers::Listed), n - 4);
    assert_eq!(of(Workers::All), n - 5);
}
