//! Library target of the eBPF crate: empty, it exists so that `nginx-probe` can name this
//! crate as a build-dependency and cargo rebuilds the programs when it changes.
#![no_std]
