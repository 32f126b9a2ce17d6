//! The `nginx_errors` part of a report, built from what the error-log reader
//! (`collect::error_log`) counted, handed over as plain data ([`ErrorLogInputs`]): the
//! lines by class and level, the upstream peers they name, the reader's own bounds, and
//! the master's history back to its start. Start reading at [`nginx_errors_report`].

use std::collections::BTreeMap;

use crate::model::{
    error_classes::{class, Counts, Group, HISTORY_CLASSES, LEVELS},
    ErrorClassReport, NginxErrorsReport, PeerErrorsReport, PeerRestReport, ProcessHistoryReport,
};

/// What the error log says between the master's start and attach, read back from the
/// attach offset (`collect::error_log_history::scan`, bounded).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorLogHistory {
    /// The master's start, Unix seconds (`/proc/<master>/stat` starttime + `btime` of
    /// `/proc/stat`).
    pub master_started_unix_s: u64,
    /// Bytes of the log read back before attach.
    pub bytes_read: u64,
    /// False when the bound cut the scan before the master's start: the first line
    /// read was already after it (counts are then a lower bound).
    pub reached_master_start: bool,
    /// Lines of each of [`HISTORY_CLASSES`] at or after the master's start and before
    /// attach, by class.
    pub classes: BTreeMap<&'static str, u64>,
    /// Of the `worker_spawn_failed` lines, those ending in nginx's errno text for
    /// EMFILE, `(24: Too many open files)`.
    pub spawn_failed_emfile: u64,
    /// The `worker_spawn_failed` lines by failed call and errno (`fork() EAGAIN`,
    /// `socketpair() EMFILE`; `collect::error_log_history::spawn_failure`), at most 8
    /// keys, then `other`.
    pub spawn_failed_by: BTreeMap<String, u64>,
}

/// The error log as the reader knows it, for one period (since attach for a summary,
/// else since the interval started), as `collect::tracker::Tracker::period_inputs`
/// hands it over. Source: the file behind the master's fd 2, read from its size at
/// attach; the master's limits from `/proc/<master>/limits`.
#[derive(Clone, Debug, Default)]
pub struct ErrorLogInputs<'a> {
    /// The file read, as the kernel names it (raw); None when it is not being read.
    pub path: Option<String>,
    /// Why it is not being read (raw, like the path it may quote); None when it is.
    pub unknown_reason: Option<String>,
    /// Lines by class and level in the period.
    pub counts: Counts,
    /// Lines by class and level since attach (the most verbose level seen is judged
    /// on them, and the history adds them).
    pub counts_since_attach: Counts,
    /// Lines longer than the reader keeps, since attach.
    pub lines_cut: u64,
    /// Bytes not read in the period (a backlog too large to chase, lost to rotation).
    pub bytes_skipped: u64,
    /// Truncations of the file seen in the period (copytruncate).
    pub truncations: u64,
    /// Upstream-class lines of the largest peers in the period (`scheme://host:port`,
    /// most lines first), each with its lines by class.
    pub upstream_peers: Vec<PeerErrorsReport>,
    /// Upstream-class lines of every peer not in `upstream_peers` in the period.
    pub other_peers: u64,
    /// Upstream-class lines with no readable `upstream:` field, and with two or more
    /// (not attributed), in the period.
    pub unattributed: u64,
    /// Upstream-class lines with two or more `upstream:` fields (a client's fake), in the period.
    pub ambiguous: u64,
    /// The log read back to the master's start; None when the master's start or the
    /// log could not be read.
    pub history: Option<&'a ErrorLogHistory>,
    /// The bound on the bytes read back, bytes.
    pub history_bytes_limit: u64,
    /// The master's soft and hard open-files limits (`/proc/<master>/limits`, Max open
    /// files), read when the report is built; None when unlimited or unreadable.
    pub master_nofile: (Option<u64>, Option<u64>),
    /// The master's soft process limit (`/proc/<master>/limits`, Max processes), read
    /// when the report is built; None when unlimited or unreadable.
    pub master_nproc: Option<u64>,
    /// The process limit of the master's cgroup (`collect::cgroup::pids_limit_of`),
    /// read when the report is built; None when none is set or unreadable.
    pub master_pids_limit: Option<crate::model::PidsLimitReport>,
    /// Crash lines read since attach that are no confirmed crash (naming no worker the
    /// kernel saw exit, repeating a pid already counted, or beyond the pids checked):
    /// not nginx's, left out of the crash counts.
    pub crash_lines_contradicted: u64,
    /// The period's last `[emerg]` lines (at most [`MAX_EMERG_KEPT`]), oldest first:
    /// held in memory for `config_not_loaded` to quote the one of the process whose
    /// load failed (`reloads::ConfigLoadsReport::quote_emerg`), never reported whole.
    pub emerg_lines: Vec<EmergLine>,
}

/// `[emerg]` lines the error-log reader holds, at most (the last ones).
pub const MAX_EMERG_KEPT: usize = 8;

/// One `[emerg]` line of nginx's error log as read: nginx writes there why a
/// configuration did not load (`unknown directive "x" in /etc/nginx/nginx.conf:12`,
/// `bind() to 0.0.0.0:80 failed (98: Address already in use)`). Not proven nginx's: a
/// client can write lines into the error log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmergLine {
    /// The writer's pid from the line's `PID#TID` field (the pid in nginx's own pid
    /// namespace; 0 when unreadable).
    pub pid: u32,
    /// The message after `PID#TID: `, raw, cut at 300 bytes.
    pub message: String,
}

/// The `nginx_errors` part of a report: counts by class with their directive and group,
/// the most verbose level seen, the upstream peers, the reader's bounds and the
/// master's history.
pub fn nginx_errors_report(e: &ErrorLogInputs) -> NginxErrorsReport {
    // The most verbose level written since attach (not only in this period).
    let seen = levels_seen(&e.counts_since_attach);
    NginxErrorsReport {
        path: e.path.clone(),
        readable: e.path.is_some(),
        unknown_reason: e.unknown_reason.clone(),
        classes: class_reports(&e.counts),
        most_verbose_level_seen: seen
            .iter()
            .rposition(|&n| n > 0)
            .map(|i| LEVELS[i].to_string()),
        // LEVELS[3] is `error`: a line there or more verbose shows the level lets
        // refusals through.
        refusals_visible: seen[3..].iter().any(|&n| n > 0).then_some(true),
        lines_cut: e.lines_cut,
        bytes_skipped: e.bytes_skipped,
        truncations: e.truncations,
        history: e.history.map(|h| history_report(e, h)),
        upstream_peers: e.upstream_peers.clone(),
        upstream_peers_rest: (e.other_peers + e.unattributed + e.ambiguous > 0).then_some(
            PeerRestReport {
                other_peers: e.other_peers,
                unattributed: e.unattributed,
                ambiguous: e.ambiguous,
            },
        ),
    }
}

/// Each class's lines, by level (non-zero only), with its directive and group (`-` and
/// `other` for a name the class table does not have).
fn class_reports(counts: &Counts) -> BTreeMap<String, ErrorClassReport> {
    counts
        .iter()
        .map(|(name, levels)| {
            let def = class(name);
            let report = ErrorClassReport {
                count: levels.iter().sum(),
                levels: LEVELS
                    .iter()
                    .zip(levels.iter())
                    .filter(|(_, &n)| n > 0)
                    .map(|(l, &n)| (l.to_string(), n))
                    .collect(),
                directive: def.map(|d| d.directive).unwrap_or("-").to_string(),
                group: def
                    .map(|d| d.group)
                    .unwrap_or(Group::Other)
                    .name()
                    .to_string(),
            };
            (name.to_string(), report)
        })
        .collect()
}

/// Lines by level index ([`LEVELS`]), all classes together.
fn levels_seen(counts: &Counts) -> [u64; 8] {
    counts.values().fold([0u64; 8], |mut a, l| {
        for i in 0..8 {
            a[i] += l[i];
        }
        a
    })
}

/// The master's history since it started: the lines read back at attach plus the same
/// classes counted since attach.
fn history_report(e: &ErrorLogInputs, h: &ErrorLogHistory) -> ProcessHistoryReport {
    let mut classes = BTreeMap::new();
    for c in HISTORY_CLASSES {
        let n = h.classes.get(c).copied().unwrap_or(0)
            + e.counts_since_attach
                .get(c)
                .map(|l| l.iter().sum())
                .unwrap_or(0);
        if n > 0 {
            classes.insert(c.to_string(), n);
        }
    }
    let count = |name: &str| classes.get(name).copied().unwrap_or(0);
    ProcessHistoryReport {
        master_started_unix_s: h.master_started_unix_s,
        bytes_read_back: h.bytes_read,
        bytes_read_back_limit: e.history_bytes_limit,
        reached_master_start: h.reached_master_start,
        workers_failed_to_spawn: count("worker_spawn_failed"),
        workers_exited_fatal: count("worker_exited_fatal"),
        spawn_failed_emfile_before_attach: h.spawn_failed_emfile,
        workers_crashed: count("worker_crashed").saturating_sub(e.crash_lines_contradicted),
        workers_crashed_since_attach: e
            .counts_since_attach
            .get("worker_crashed")
            .map(|l| l.iter().sum::<u64>())
            .unwrap_or(0)
            .saturating_sub(e.crash_lines_contradicted),
        crash_lines_contradicted: e.crash_lines_contradicted,
        workers_killed: count("worker_killed"),
        master_nofile_soft: e.master_nofile.0,
        master_nofile_hard: e.master_nofile.1,
        spawn_failed_by_before_attach: h.spawn_failed_by.clone(),
        master_nproc_soft: e.master_nproc,
        master_pids_limit: e.master_pids_limit.clone(),
        classes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_classes_levels_peers_and_history_from_the_counts() {
        let mut counts = Counts::new();
        counts.insert("limit_req", [0, 0, 0, 2, 1, 0, 0, 0]);
        counts.insert("someone_elses", [0, 0, 0, 0, 0, 1, 0, 0]);
        let mut since_attach = counts.clone();
        since_attach.insert("worker_crashed", [0, 1, 0, 0, 0, 0, 0, 0]);
        let history = ErrorLogHistory {
            master_started_unix_s: 100,
            bytes_read: 5,
            reached_master_start: true,
            classes: [("worker_crashed", 2), ("worker_spawn_failed", 1)].into(),
            spawn_failed_emfile: 1,
            spawn_failed_by: [("socketpair() EMFILE".to_string(), 1)].into(),
        };
        let e = ErrorLogInputs {
            path: Some("/var/log/nginx/error.log".into()),
            counts,
            counts_since_attach: since_attach,
            upstream_peers: vec![PeerErrorsReport {
                peer: "http://10.0.0.1:80".into(),
                lines: 3,
                by_class: [("upstream_reset".to_string(), 3)].into(),
            }],
            unattributed: 1,
            history: Some(&history),
            history_bytes_limit: 16 << 20,
            master_nofile: (Some(1024), None),
            ..Default::default()
        };
        let r = nginx_errors_report(&e);
        assert!(r.readable);
        let limit_req = &r.classes["limit_req"];
        assert_eq!((limit_req.count, limit_req.group.as_str()), (3, "refused"));
        assert_eq!(limit_req.levels["error"], 2);
        assert_eq!(r.classes["someone_elses"].directive, "-");
        assert_eq!(r.classes["someone_elses"].group, "other");
        assert_eq!(r.most_verbose_level_seen.as_deref(), Some("notice"));
        assert_eq!(r.refusals_visible, Some(true));
        assert_eq!(r.upstream_peers[0].lines, 3);
        assert_eq!(r.upstream_peers[0].by_class["upstream_reset"], 3);
        assert_eq!(
            r.upstream_peers_rest.as_ref().map(|p| p.unattributed),
            Some(1)
        );
        let h = r.history.unwrap();
        assert_eq!((h.workers_crashed, h.workers_failed_to_spawn), (3, 1));
        assert_eq!(h.workers_crashed_since_attach, 1);
        assert_eq!(
            (h.master_nofile_soft, h.bytes_read_back_limit),
            (Some(1024), 16 << 20)
        );
        let unread = nginx_errors_report(&ErrorLogInputs::default());
        assert_eq!(unread, NginxErrorsReport::default());
    }
}
