//! What a worker writes to: the fd kinds writes are split by ([`fd_kind`]), the kernel
//! struct offsets the programs walk the fd table with ([`off`], from the kernel's BTF),
//! and the sizes of the maps that help classify (error logs, listening ports, fds
//! classified from /proc).

indexed! {
    /// What a worker writes to, for splitting write/writev/pwrite64/pwritev by
    /// destination.
    ///
    /// With the kernel's BTF, the write's entry tracepoint classifies the fd at the
    /// moment of the write by walking the worker's fd table
    /// (`task_struct->files->fdt->fd[fd]`): [`CLIENT`], [`UPSTREAM`], [`ACCESS_LOG`],
    /// [`ERROR_LOG`], [`TEMP_FILE`], [`OTHER_FILE`], [`OTHER`]. Without BTF (fallback),
    /// user space classifies each worker's fds from `/proc/<pid>/fd` every 2 s into the
    /// `FD_KINDS` map, and an fd not in it counts as [`SOCKET`]; regular files that are
    /// not logs count as [`FILE`].
    pub mod fd_kind: u32;
    /// Number of fd kinds.
    pub const FD_KIND_COUNT;
    /// Names of the fd kinds, indexed by the constants in [`fd_kind`] (the keys of a
    /// report's `writes`).
    pub const FD_KIND_NAMES: [&str];
    /// Fallback only: a socket, or an fd the last /proc snapshot did not have.
    SOCKET => "socket",
    /// A regular file opened with `O_APPEND` that is not an error log: an access log.
    ACCESS_LOG => "access_log",
    /// An error log: the file on the workers' fd 2 (any file type), by inode.
    ERROR_LOG => "error_log",
    /// Fallback only: another regular file (temp files, cache).
    FILE => "file",
    /// A pipe, eventfd, epoll or other anonymous inode, or a socket that is neither
    /// TCP nor unix.
    OTHER => "other",
    /// A TCP socket whose local port is one of nginx's listening ports, or a unix
    /// socket with a bound address (accepted from a unix listener): a client.
    CLIENT => "client",
    /// Any other TCP or unix socket: an upstream (proxy_pass, fastcgi_pass, ...).
    UPSTREAM => "upstream",
    /// A regular file opened for writing without `O_APPEND`: nginx's client_body,
    /// proxy, fastcgi, uwsgi and scgi temp files (which become cache files).
    TEMP_FILE => "temp_file",
    /// Any other file: read-only regular files, character and block devices.
    OTHER_FILE => "other_file",
    /// The fd table could not be read (fd closed meanwhile, or out of range).
    UNKNOWN => "unknown",
}

/// The kinds a report lists when writes are classified in the kernel (fd table walk).
pub const FD_KINDS_KERNEL: [u32; 8] = [
    fd_kind::CLIENT,
    fd_kind::UPSTREAM,
    fd_kind::ACCESS_LOG,
    fd_kind::ERROR_LOG,
    fd_kind::TEMP_FILE,
    fd_kind::OTHER_FILE,
    fd_kind::OTHER,
    fd_kind::UNKNOWN,
];

/// The kinds a report lists when writes are classified from /proc snapshots.
pub const FD_KINDS_PROC: [u32; 5] = [
    fd_kind::SOCKET,
    fd_kind::ACCESS_LOG,
    fd_kind::ERROR_LOG,
    fd_kind::FILE,
    fd_kind::OTHER,
];

indexed! {
    /// Kernel struct member offsets, bytes, read from the kernel's BTF
    /// (`/sys/kernel/btf/vmlinux`) by user space and patched into the eBPF object as the
    /// `KOFF` global; the eBPF programs walk the fd table with them. Each constant
    /// indexes `KOFF` and [`OFF_PATHS`](crate::OFF_PATHS).
    pub mod off: usize;
    /// Number of kernel offsets in [`off`].
    pub const OFF_COUNT;
    /// (struct, member path) of each offset in [`off`], in index order: what user space
    /// looks up in BTF. A path descends through named and anonymous members.
    pub const OFF_PATHS: [(&str, &str)];
    /// `task_struct.files`
    TASK_FILES => ("task_struct", "files"),
    /// `files_struct.fdt`
    FILES_FDT => ("files_struct", "fdt"),
    /// `fdtable.max_fds`
    FDT_MAX_FDS => ("fdtable", "max_fds"),
    /// `fdtable.fd`
    FDT_FD => ("fdtable", "fd"),
    /// `file.f_flags`
    FILE_FLAGS => ("file", "f_flags"),
    /// `file.f_inode`
    FILE_INODE => ("file", "f_inode"),
    /// `file.private_data`
    FILE_PRIVATE => ("file", "private_data"),
    /// `inode.i_mode`
    INODE_MODE => ("inode", "i_mode"),
    /// `inode.i_ino`
    INODE_INO => ("inode", "i_ino"),
    /// `inode.i_sb`
    INODE_SB => ("inode", "i_sb"),
    /// `super_block.s_magic`
    SB_MAGIC => ("super_block", "s_magic"),
    /// `socket.sk`
    SOCKET_SK => ("socket", "sk"),
    /// `sock.__sk_common.skc_family`
    SK_FAMILY => ("sock", "__sk_common.skc_family"),
    /// `sock.__sk_common.skc_num` (local port, host order)
    SK_NUM => ("sock", "__sk_common.skc_num"),
    /// `unix_sock.addr` (non-null once bound, and on sockets accepted from a listener)
    UNIX_ADDR => ("unix_sock", "addr"),
    /// `socket.state` (`SS_CONNECTED` once accepted; not on listening or new sockets)
    SOCKET_STATE => ("socket", "state"),
}

/// Entries of the `ERROR_LOGS` map: inode numbers (`i_ino`) of the error logs. Matched by inode
/// number alone: a `stat`'s device differs from the kernel's `s_dev` on overlayfs and btrfs.
pub const MAX_ERROR_LOGS: u32 = 64;

/// Entries of the `LISTEN_PORTS` map (nginx's listening TCP ports).
pub const MAX_LISTEN_PORTS: u32 = 1024;

/// Entries of the `FD_KINDS` map: non-socket fds of all workers.
pub const MAX_CLASSIFIED_FDS: u32 = 8192;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_follow_their_indexes() {
        assert_eq!(FD_KIND_COUNT, 10);
        assert_eq!(fd_kind::UNKNOWN, 9);
        assert_eq!(FD_KIND_NAMES[fd_kind::TEMP_FILE as usize], "temp_file");
        assert_eq!(OFF_COUNT, 16);
        assert_eq!(off::SOCKET_STATE, 15);
        assert_eq!(OFF_PATHS[off::SK_NUM], ("sock", "__sk_common.skc_num"));
    }
}
