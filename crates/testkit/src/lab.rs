//! What every lab test (`crates/cli/tests/lab/main.rs`) does before its scenario and the facts it
//! checks after: whether lab tests run at all here (PRONGHORN_LAB_TESTS, root, the tools a
//! scenario needs), one scenario at a time (hugepages, XDP programs and the lab's addresses are
//! machine-wide), and what a lab leaves on the machine (namespaces, hugepages, DPDK runtime
//! files). The rigs that start pronghorn and the servers stay with the tests, which know the
//! binary.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Output;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// The count of reserved 2 MiB hugepages (machine-wide).
pub const HUGEPAGES_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
/// The pool's surplus pages (in use above the count; see [`nr_hugepages`]).
pub const HUGEPAGES_2M_SURPLUS: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/surplus_hugepages";

/// A lab scenario under way: no other runs until it is dropped.
pub struct Scenario {
    name: String,
    _serial: MutexGuard<'static, ()>,
}

impl Scenario {
    /// The test's name (libtest names the thread of a test after it).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Starts the calling test's scenario, or says why it is skipped and gives `None`: lab tests
/// off (PRONGHORN_LAB_TESTS unset), not root, or one of `tools` (a command and the Debian
/// package that has it) missing.
pub fn scenario(tools: &[(&str, &str)]) -> Option<Scenario> {
    let name = std::thread::current().name().unwrap_or("lab test").to_string();
    if std::env::var_os("PRONGHORN_LAB_TESTS").is_none() {
        eprintln!("{name}: skipped (set PRONGHORN_LAB_TESTS=1 and run as root; scripts/test.sh does)");
        return None;
    }
    if !have(&name, tools) {
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Some(Scenario { name, _serial: serial })
}

/// Whether the tools a test needs are here (and we are root), saying "skipped" if not.
fn have(test: &str, tools: &[(&str, &str)]) -> bool {
    // /proc/self belongs to the effective user.
    if std::fs::metadata("/proc/self").map_or(true, |m| m.uid() != 0) {
        eprintln!("{test}: skipped (not root: the lab needs root)");
        return false;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for (tool, package) in tools {
        if !std::env::split_paths(&path).any(|d| d.join(tool).is_file()) {
            eprintln!("{test}: skipped ({tool} is not installed: Debian's {package}; scripts/setup.sh installs it)");
            return false;
        }
    }
    true
}

/// A command's stdout and stderr, for assertions and failure messages.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The machine's reserved 2 MiB hugepages: the pool's persistent pages, as `pronghorn lab`
/// counts them. The sysfs count is the pool's total, which also holds surplus pages: those a
/// process still uses after a lab's down lowered the count below them, freed when it exits, so
/// a check before and after a lab would otherwise see the tail of the previous lab's exit.
pub fn nr_hugepages() -> u64 {
    let read = |path: &str| -> u64 { std::fs::read_to_string(path).unwrap().trim().parse().unwrap() };
    read(HUGEPAGES_2M).saturating_sub(read(HUGEPAGES_2M_SURPLUS))
}

pub fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// The DPDK runtime directories pronghorn's processes left (`/var/run/dpdk/pronghorn-*`).
pub fn dpdk_runtime_dirs() -> Vec<String> {
    std::fs::read_dir("/var/run/dpdk")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("pronghorn-"))
                .collect()
        })
        .unwrap_or_default()
}

/// A test's lab prefix `tst-...`, with PRONGHORN_LAB_PREFIX in place of `tst` when set.
pub fn lab_prefix(prefix: &str) -> String {
    match (std::env::var("PRONGHORN_LAB_PREFIX"), prefix.strip_prefix("tst")) {
        (Ok(mine), Some(rest)) => format!("{mine}{rest}"),
        _ => prefix.to_string(),
    }
}

/// Polls `cond` until it holds (bounded: a hang detector, not a timing assertion).
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
