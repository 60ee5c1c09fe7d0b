//! This process's placement (`runtime.numa`): the topology crate's decision over the real host
//! (`/sys`) and the CPUs the process may run on, made once when the runtime starts. The DPDK
//! main lcore and the pool's node go to the NIC's opener, the stack threads' CPUs to `wait`.

use std::path::Path;

use config::Config;
use topology::{host::Host, Placement, Request};

/// The placement of this process's stack; an error names the config key the host cannot honour.
pub(crate) fn of_process(cfg: &Config) -> Result<Placement, String> {
    let allowed = affinity();
    let r = &cfg.runtime;
    let request = Request {
        iface: &cfg.nic.iface,
        numa: r.numa,
        allowed: &allowed,
        // `pronghorn run` pinned the application already: its CPUs are the affinity.
        app_cpus: None,
        stack_cpu: r.stack_cpu,
        shards: r.shards,
    };
    topology::decide(&Host::read(Path::new("/")), &request)
}

/// The CPUs this thread may run on.
pub fn affinity() -> Vec<u32> {
    // SAFETY: a zeroed cpu_set_t is an empty set; the kernel writes at most its size; CPU_ISSET
    // indexes it with a bounds check.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as u32).filter(|&c| libc::CPU_ISSET(c as usize, &set)).collect()
    }
}

/// Pins the calling thread to `cpus`.
pub fn pin(cpus: &[u32]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET is given only CPUs below its size
    // (it would panic, not write outside, on others); the kernel reads the set's size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| (c as usize) < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
