//! Configuration loads from nginx's own code: the uretprobe on `ngx_init_cycle` (see
//! `nginx_probe_common::reloads`) counts per process the loads that returned a cycle
//! and those that returned NULL; the tracker reads the map every refresh.

use std::path::Path;

use aya::maps::HashMap;
use nginx_probe_common::reloads::{self, ConfigLoads};

use super::Probe;

/// The offsets of `task_struct.real_parent` and `task_struct.tgid` in the kernel's
/// BTF for the uretprobe's `CONFIG_PARENT_OFF` global, so that a binary upgrade's new
/// master (a child of the master) is told from other processes; `u64::MAX` each when
/// unknown (the report then says so: `ConfigLoadsReport::upgrades_unknown`).
pub(super) fn parent_offsets(btf: Result<&crate::collect::btf::Btf, &String>) -> [u64; 2] {
    btf.ok()
        .and_then(|b| crate::collect::btf::offsets_of(b, &reloads::PARENT_PATHS).ok())
        .unwrap_or([u64::MAX; 2])
}

/// Processes read from the map at most (its size).
const MAX_READ: usize = reloads::MAX_PROCESSES as usize;

impl Probe {
    /// Attaches the uretprobe on `ngx_init_cycle` in `binary` (the master's
    /// `/proc/<pid>/exe`), for every process running it. On failure (the symbol not
    /// exported, uprobes refused) configuration loads stay unknown:
    /// [`Probe::config_loads`] gives the reason.
    pub fn attach_config_loads(&mut self, binary: &Path) {
        let attached = self
            .attach_uprobe(reloads::PROGRAM, reloads::SYMBOL, binary)
            .and_then(|()| {
                let map = self
                    .ebpf
                    .take_map(reloads::MAP)
                    .ok_or_else(|| format!("the eBPF object has no map {}", reloads::MAP))?;
                HashMap::try_from(map).map_err(|e| e.to_string())
            });
        if let Err(e) = &attached {
            log::info!("configuration loads are not measured ({e})");
        }
        self.config_loads = attached;
    }

    /// Every process's configuration loads since attach, (tgid, loads), at most
    /// [`reloads::MAX_PROCESSES`]; Err: why they are not measured. A process's entry
    /// that fails to read is left out (the map is read again at the next refresh).
    pub fn config_loads(&self) -> Result<Vec<(u32, ConfigLoads)>, &str> {
        let map = self.config_loads.as_ref().map_err(String::as_str)?;
        Ok(map.iter().filter_map(Result::ok).take(MAX_READ).collect())
    }

    /// Drops the entries of `gone` (processes that exited: their loads were read) from
    /// the map, so that it stays far below its size and the kernel's LRU never evicts
    /// an entry not yet read (a flood of `nginx -t` runs lost 3-7% of their loads to
    /// it), and a reused pid starts from 0. A failed delete is left for the next
    /// refresh.
    pub fn forget_config_loads(&mut self, gone: &[u32]) {
        if let Ok(map) = self.config_loads.as_mut() {
            for tgid in gone {
                let _ = map.remove(tgid);
            }
        }
    }
}
