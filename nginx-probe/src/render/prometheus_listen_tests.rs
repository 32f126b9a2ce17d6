//! Listening-socket families: one series per address, closed sockets out of the live
//! queue.

use super::{has, render, report};

#[test]
fn reuseport_sockets_of_one_address_are_one_series_and_closed_ones_leave_the_queue() {
    // Two sockets of one address (reuseport, 2 workers), then one closed by a reload.
    let mut r = report();
    let mut second = r.listen[0].clone();
    second.queue_now = 5;
    second.queue_max = 9;
    r.listen.push(second);
    let text = render(&r);
    has(
        &text,
        &[
            r#"nginx_probe_listen_queue{addr="127.0.0.1:8080"} 7"#,
            r#"nginx_probe_listen_queue_peak{addr="127.0.0.1:8080"} 9"#,
            r#"nginx_probe_listen_backlog{addr="127.0.0.1:8080"} 511"#,
        ],
    );
    assert_eq!(
        text.matches("nginx_probe_listen_queue{").count(),
        1,
        "{text}"
    );
    r.listen[1].closed = true;
    let text = render(&r);
    has(
        &text,
        &[
            r#"nginx_probe_listen_queue{addr="127.0.0.1:8080"} 2"#,
            r#"nginx_probe_listen_queue_peak{addr="127.0.0.1:8080"} 7"#,
        ],
    );
    // All of an address's sockets closed: no live queue series for it.
    r.listen[0].closed = true;
    let text = render(&r);
    assert!(!text.contains("nginx_probe_listen_queue{"), "{text}");
}
