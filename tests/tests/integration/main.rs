//! The integration tests, one module per area, in one test binary (one link, one run,
//! one summary): each runs nginx-probe as root against a real nginx started by the
//! fixtures of `nginx_probe_tests`. Run them with `cargo xtask test`, or one area with
//! `cargo test --release -p nginx-probe-tests --test integration -- --test-threads=1
//! <module>::`.

mod accepts;
mod all_masters;
mod bad_input;
mod claims;
mod config;
mod conn_lifecycle;
mod contrib;
mod detail;
mod dist;
mod draining;
mod exporter;
mod html;
mod idle_closes;
mod lifecycle;
mod live_view;
mod log_rotation;
mod metrics;
mod nginx126;
mod nginx_errors;
mod nginx_words;
mod outcomes;
mod port_exhaustion;
mod production;
mod recording;
mod requests;
mod source_build;
mod static_ssl;
mod tls_closes;
mod untrusted;
mod upstream;
mod verdicts;
mod writes;
