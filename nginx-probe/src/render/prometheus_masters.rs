//! `--all`: one exposition made of every followed master's ([`merge`]). Each master's
//! session renders its own text ([`super::prometheus::render_with`]); here every
//! sample gains a `master` label (the master's host pid) and each family keeps its one
//! `# HELP`/`# TYPE` header, its samples from every master together. The families
//! about the nginx-probe process itself ([`PROCESS_WIDE`]) are written once, without
//! the label; with no master followed, the exporter's own families are served as a
//! waiting exporter serves them (`nginx_probe_attached 0`). [`MASTER_INFO`] names each master's version, container and pid namespace;
//! [`MASTERS`] and [`MASTERS_LEFT_OUT`] say how many are followed and how many were
//! not (the cap keeps the series bounded).

use std::fmt::Write as _;

use super::prometheus_format::escape_label;
use crate::model::masters::MasterInfo;

/// Families about the nginx-probe process, not a master: written once, unlabelled.
pub const PROCESS_WIDE: &[&str] = &[
    "nginx_probe_build_info",
    "nginx_probe_self_cpu_seconds_total",
    "nginx_probe_self_resident_memory_bytes",
    "nginx_probe_bpf_stats_enabled",
];

/// Always 1, per followed master: its version, container id and pid namespace in labels.
pub const MASTER_INFO: &str = "nginx_probe_master_info";
/// nginx masters followed now.
pub const MASTERS: &str = "nginx_probe_masters";
/// nginx masters found and not followed because of the cap.
pub const MASTERS_LEFT_OUT: &str = "nginx_probe_masters_left_out";

/// One family being put together: its header lines and its samples.
struct Family {
    name: String,
    header: String,
    samples: String,
}

/// The families of one exposition in order of first appearance.
#[derive(Default)]
struct Families(Vec<Family>);

impl Families {
    fn get(&mut self, name: &str) -> &mut Family {
        let i = match self.0.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.0.push(Family {
                    name: name.to_string(),
                    header: String::new(),
                    samples: String::new(),
                });
                self.0.len() - 1
            }
        };
        &mut self.0[i]
    }

    /// Adds the lines of `text`: samples labelled `master="<pid>"` when `master` is
    /// given; with `process_wide` only [`PROCESS_WIDE`] families are taken, else only
    /// the others.
    fn add(&mut self, text: &str, master: Option<u32>, process_wide: bool) {
        let mut current = String::new();
        let mut fresh = false;
        for line in text.lines() {
            if let Some(rest) = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
            {
                let name = rest.split(' ').next().unwrap_or_default();
                if name != current {
                    current = name.to_string();
                    fresh = self.0.iter().all(|f| f.name != current);
                }
                if fresh && PROCESS_WIDE.contains(&name) == process_wide {
                    let f = self.get(name);
                    f.header.push_str(line);
                    f.header.push('\n');
                }
                continue;
            }
            if line.is_empty() || PROCESS_WIDE.contains(&current.as_str()) != process_wide {
                continue;
            }
            let f = self.get(&current);
            f.samples.push_str(&labelled(line, master));
            f.samples.push('\n');
        }
    }
}

/// `line` (a sample) with `master="<pid>"` first among its labels.
fn labelled(line: &str, master: Option<u32>) -> String {
    let Some(pid) = master else {
        return line.to_string();
    };
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let (name, rest) = line.split_at(end);
    match rest.strip_prefix('{') {
        Some(labels) if labels.starts_with('}') => format!("{name}{{master=\"{pid}\"{labels}"),
        Some(labels) => format!("{name}{{master=\"{pid}\",{labels}"),
        None => format!("{name}{{master=\"{pid}\"}}{rest}"),
    }
}

/// The exposition of `--all`: the process-wide families of `own` (the text a waiting
/// exporter serves), then every family of every master's text in `masters`, labelled
/// by master, the info series and the counts of masters followed and `left_out`.
pub fn merge(own: &str, masters: &[(MasterInfo, String)], left_out: usize) -> String {
    let mut families = Families::default();
    families.add(own, None, true);
    if masters.is_empty() {
        // What a waiting exporter serves (`nginx_probe_attached 0`): the alert on it
        // holds under --all too.
        families.add(own, None, false);
    }
    for (m, text) in masters {
        families.add(text, Some(m.pid), false);
    }
    let mut out = String::with_capacity(masters.iter().map(|(_, t)| t.len()).sum::<usize>() + 4096);
    for f in &families.0 {
        out.push_str(&f.header);
        out.push_str(&f.samples);
    }
    let _ = writeln!(
        out,
        "# HELP {MASTER_INFO} nginx master followed under --all: always 1; its nginx version, container id (from its cgroup path, empty on the host) and pid namespace inode in labels.\n# TYPE {MASTER_INFO} gauge"
    );
    for (m, _) in masters {
        let _ = writeln!(
            out,
            "{MASTER_INFO}{{master=\"{}\",nginx_version=\"{}\",container_id=\"{}\",pid_namespace=\"{}\"}} 1",
            m.pid,
            escape_label(m.nginx_version.as_deref().unwrap_or("")),
            escape_label(m.container_id.as_deref().unwrap_or("")),
            m.pid_namespace.map(|n| n.to_string()).unwrap_or_default(),
        );
    }
    let _ = writeln!(
        out,
        "# HELP {MASTERS} nginx masters followed now (--all).\n# TYPE {MASTERS} gauge\n{MASTERS} {}",
        masters.len()
    );
    let _ = writeln!(
        out,
        "# HELP {MASTERS_LEFT_OUT} nginx masters found but not followed: --all follows at most a fixed number at once.\n# TYPE {MASTERS_LEFT_OUT} gauge\n{MASTERS_LEFT_OUT} {left_out}"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "# HELP nginx_probe_build_info b\n# TYPE nginx_probe_build_info gauge\nnginx_probe_build_info{version=\"1\"} 1\n# HELP nginx_probe_attached a\n# TYPE nginx_probe_attached gauge\nnginx_probe_attached 0\n";

    fn part(accepts: u64) -> String {
        format!("# HELP nginx_probe_build_info b\n# TYPE nginx_probe_build_info gauge\nnginx_probe_build_info{{version=\"1\"}} 1\n# HELP nginx_probe_attached a\n# TYPE nginx_probe_attached gauge\nnginx_probe_attached 1\n# HELP nginx_accepts_total x\n# TYPE nginx_accepts_total counter\nnginx_accepts_total{{worker=\"0\",generation=\"0\"}} {accepts}\n# HELP h y\n# TYPE h histogram\nh_bucket{{le=\"+Inf\"}} 2\nh_sum 0.5\nh_count 2\n")
    }

    fn info(pid: u32, container: Option<&str>) -> MasterInfo {
        MasterInfo {
            pid,
            nginx_version: Some("1.22.1".into()),
            container_id: container.map(String::from),
            pid_namespace: Some(4026531836),
        }
    }

    #[test]
    fn every_sample_is_labelled_and_each_family_is_together() {
        let text = merge(
            OWN,
            &[
                (info(10, None), part(30)),
                (info(20, Some("c\"1")), part(50)),
            ],
            0,
        );
        let expected = "# HELP nginx_probe_build_info b\n# TYPE nginx_probe_build_info gauge\nnginx_probe_build_info{version=\"1\"} 1\n\
# HELP nginx_probe_attached a\n# TYPE nginx_probe_attached gauge\nnginx_probe_attached{master=\"10\"} 1\nnginx_probe_attached{master=\"20\"} 1\n\
# HELP nginx_accepts_total x\n# TYPE nginx_accepts_total counter\nnginx_accepts_total{master=\"10\",worker=\"0\",generation=\"0\"} 30\nnginx_accepts_total{master=\"20\",worker=\"0\",generation=\"0\"} 50\n\
# HELP h y\n# TYPE h histogram\nh_bucket{master=\"10\",le=\"+Inf\"} 2\nh_sum{master=\"10\"} 0.5\nh_count{master=\"10\"} 2\nh_bucket{master=\"20\",le=\"+Inf\"} 2\nh_sum{master=\"20\"} 0.5\nh_count{master=\"20\"} 2\n";
        assert!(text.starts_with(expected), "{text}");
        assert!(text.contains("nginx_probe_master_info{master=\"20\",nginx_version=\"1.22.1\",container_id=\"c\\\"1\",pid_namespace=\"4026531836\"} 1\n"), "{text}");
        assert!(text.contains("\nnginx_probe_masters 2\n"), "{text}");
        assert!(
            text.ends_with("\nnginx_probe_masters_left_out 0\n"),
            "{text}"
        );
        // One HELP per family.
        assert_eq!(text.matches("# HELP nginx_accepts_total ").count(), 1);
    }

    #[test]
    fn no_master_leaves_the_process_families_and_the_counts() {
        let text = merge(OWN, &[], 3);
        assert!(
            text.contains("nginx_probe_build_info{version=\"1\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("\nnginx_probe_attached 0\n"), "{text}");
        assert!(text.contains("\nnginx_probe_masters 0\n"), "{text}");
        assert!(
            text.contains("\nnginx_probe_masters_left_out 3\n"),
            "{text}"
        );
    }

    #[test]
    fn labels_go_first() {
        assert_eq!(labelled("a 1", Some(7)), "a{master=\"7\"} 1");
        assert_eq!(labelled("a{} 1", Some(7)), "a{master=\"7\"} 1");
        assert_eq!(
            labelled("a{x=\"y\"} 1", Some(7)),
            "a{master=\"7\",x=\"y\"} 1"
        );
        assert_eq!(labelled("a 1", None), "a 1");
    }
}
