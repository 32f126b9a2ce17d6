//! Which master a stderr line is about, under `--all`: every line a master's session
//! prints there (the banner, worker events, warnings through the logger, whatever
//! collect warns of while it runs) starts with `master <pid>: `, after the program's
//! `nginx-probe: `, so one master's lines can be told from another's. Without `--all`
//! nothing is tagged: a single-master run prints what it always printed.
//!
//! The sessions share one thread (a `LocalSet`), so the master is a tokio task-local
//! set around each session's task ([`scope`]) and around the synchronous work done for
//! one master outside it ([`sync_scope`]: its attach, its programs' detach on a
//! blocking thread); the logger reads it ([`tag`]).

use std::future::Future;

tokio::task_local! {
    /// Host pid of the master whose session is running.
    static MASTER: u32;
}

/// `master <pid>: ` inside a master's scope, empty outside (a single-master run, the
/// `--all` supervisor's own lines). A pid is digits: nothing to escape.
pub(super) fn tag() -> String {
    MASTER
        .try_with(|pid| format!("master {pid}: "))
        .unwrap_or_default()
}

/// The start of a line that has no `nginx-probe: ` of its own (the banner): under
/// `--all`, `nginx-probe: master <pid>: `; empty otherwise.
pub(super) fn line_start() -> String {
    match tag() {
        t if t.is_empty() => t,
        t => format!("nginx-probe: {t}"),
    }
}

/// Runs `f` (a session's task) with every line it prints tagged with master `pid`.
pub(super) async fn scope<F: Future>(pid: u32, f: F) -> F::Output {
    MASTER.scope(pid, f).await
}

/// Runs `f` with every line it prints tagged with master `pid`.
pub(super) fn sync_scope<R>(pid: u32, f: impl FnOnce() -> R) -> R {
    MASTER.sync_scope(pid, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_masters_scope_is_tagged() {
        assert_eq!(tag(), "");
        assert_eq!(line_start(), "");
        sync_scope(4242, || {
            assert_eq!(tag(), "master 4242: ");
            assert_eq!(line_start(), "nginx-probe: master 4242: ");
        });
        assert_eq!(tag(), "");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let inside = rt.block_on(scope(7, async {
            tokio::task::yield_now().await;
            tag()
        }));
        assert_eq!(inside, "master 7: ");
    }
}
