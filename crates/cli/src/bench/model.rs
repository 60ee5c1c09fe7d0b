//! The lab model of a benchmark: on which core each side's receive work runs.
//!
//! `veth` (the lab as it is): a veth hands a frame to its peer inside the sender's transmit, so
//! the receiver's kernel work runs on the sender's core. The kernel server's TCP receive runs on
//! the client's core (inside the client's send), so does the XDP veth's receive (XDP redirect
//! into pronghorn's AF_XDP ring), and the client's TCP receive runs on the server's core on both
//! paths (inside the server's send).
//!
//! `nic` (closer to a NIC, whose interrupts put each side's receive on its own side's cores):
//! RPS on the kernel server's veth steers its receive to the server's cores, RPS on side b's
//! veths steers the client's receive to the client's cores, and the XDP veth's NAPI becomes a
//! kthread (`threaded`) pinned to the server's cores. A veth has a NAPI only while it has an XDP
//! program or GRO on; GRO is turned on so that the NAPI (and its pinned kthread) outlives each
//! pronghorn server's XDP program. Frames redirected by XDP never reach GRO.
//!
//! `dma` (a NIC that writes frames into pronghorn's ring itself: AF_XDP in zero-copy mode, or a
//! DPDK PMD): RPS as in `nic`, and the XDP veth's receive left where the veth runs it, on the
//! client's core. The nic model's kthread stands in for a NIC's receive by running the veth's
//! poll, the XDP program and the copy into the AF_XDP ring on the server's core, which such a NIC
//! does by DMA; this model charges the server's core nothing for it, where a zero-copy driver's
//! interrupt and descriptor work would cost a little (a PMD: nothing). On that one count the two
//! bound such a NIC from either side. Both also carry RPS's interprocessor interrupts, which a
//! VM can price far above a NIC's interrupt (this lab's: docs/design-notes.md, "What an IPI
//! costs here, and a third lab model"); `bench/lab_split.sh` shows them apart.
//!
//! Owns: the sysfs settings of a model, applied to a lab and restored (on drop) to what they
//! were. Must not: run servers or clients (mod.rs).

use std::fmt::Write as _;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The real-time priority of the XDP veth's NAPI kthread in the nic model (threaded interrupt
/// handlers' default).
const NAPI_FIFO_PRIORITY: &str = "50";

/// `--model`: the lab models a run measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum ModelArg {
    /// The veth as it is: each side's receive runs inside the peer's send, on the peer's core.
    Veth,
    /// NIC-like: each side's receive on its own side's core (RPS, threaded NAPI).
    Nic,
    /// As nic, with pronghorn's receive copy off the server's core, as a NIC's DMA does it.
    Dma,
    /// Both, one after the other, each with its own results files.
    Both,
}

impl ModelArg {
    pub fn models(self) -> &'static [Model] {
        match self {
            ModelArg::Veth => &[Model::Veth],
            ModelArg::Nic => &[Model::Nic],
            ModelArg::Dma => &[Model::Dma],
            ModelArg::Both => &[Model::Veth, Model::Nic],
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Veth,
    Nic,
    Dma,
}

impl Model {
    pub fn as_str(self) -> &'static str {
        match self {
            Model::Veth => "veth",
            Model::Nic => "nic",
            Model::Dma => "dma",
        }
    }

    /// What the results files' names get: nothing for the veth model (the names results had
    /// before there were models), `-nic` and `-dma` for the others.
    pub fn file_suffix(self) -> &'static str {
        match self {
            Model::Veth => "",
            Model::Nic => "-nic",
            Model::Dma => "-dma",
        }
    }
}

/// The lab's interfaces a model touches.
pub struct LabDevices<'a> {
    pub ns_a: &'a str,
    pub ns_b: &'a str,
    /// pronghorn's XDP veth (side a) and its peer (side b).
    pub xdp_veth: &'a str,
    pub xdp_peer: &'a str,
    /// The kernel path's veth in side a and its peer in side b.
    pub kernel_veth: &'a str,
    pub kernel_peer: &'a str,
}

impl LabDevices<'_> {
    /// The veths whose kernel receive RPS steers in the nic model: (namespace, device, whether
    /// it is the server's side).
    fn rps_veths(&self) -> [(&str, &str, bool); 3] {
        [(self.ns_a, self.kernel_veth, true), (self.ns_b, self.kernel_peer, false), (self.ns_b, self.xdp_peer, false)]
    }
}

/// A sysfs file (seen from inside a namespace) a model wrote, with what it held before and what
/// it holds after the write (read back).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Setting {
    pub namespace: String,
    pub file: String,
    pub before: String,
    pub set: String,
}

/// A NAPI kthread the model pinned, with its CPU list as read back.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PinnedThread {
    pub pid: u32,
    pub name: String,
    pub cpus: String,
}

/// A model in force on a lab; dropping it restores every setting it changed.
#[derive(Debug, serde::Serialize)]
pub struct Applied {
    pub model: Model,
    /// One line for the results: what each side's receive runs on.
    pub description: String,
    pub settings: Vec<Setting>,
    /// GRO turned on for the XDP veth's NAPI (namespace, device), turned off again on restore.
    pub gro_enabled: Option<(String, String)>,
    pub napi_threads: Vec<PinnedThread>,
    #[serde(skip)]
    restored: bool,
}

/// The rps_cpus bitmap of a taskset CPU list ("1", "0-3", "0,2"): hexadecimal, in comma-separated
/// groups of 32 CPUs as the kernel prints it.
pub fn rps_mask(cpus: &str) -> Result<String> {
    let mut bits: Vec<u32> = Vec::new();
    for part in cpus.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.trim().parse::<usize>(), part.trim().parse::<usize>()),
        };
        let (Ok(first), Ok(last)) = (first, last) else { bail!("\"{cpus}\" is not a CPU list") };
        if first > last || last >= 4096 {
            bail!("\"{cpus}\" is not a CPU list");
        }
        for cpu in first..=last {
            if bits.len() <= cpu / 32 {
                bits.resize(cpu / 32 + 1, 0);
            }
            bits[cpu / 32] |= 1 << (cpu % 32);
        }
    }
    let mut groups = bits.iter().rev().map(|w| format!("{w:08x}")).collect::<Vec<_>>();
    // The most significant group without its leading zeros, as the kernel accepts and prints it.
    groups[0] = format!("{:x}", bits[bits.len() - 1]);
    Ok(groups.join(","))
}

/// Whether two rps_cpus bitmaps are the same CPUs ("2" and "00000002" are).
fn same_mask(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let t = s.trim().replace(',', "");
        let t = t.trim_start_matches('0');
        t.to_string()
    };
    norm(a) == norm(b)
}

/// Applies `model` to the lab: server_cpus and client_cpus are taskset lists.
pub fn apply(model: Model, lab: &LabDevices, server_cpus: &str, client_cpus: &str) -> Result<Applied> {
    let mut applied = Applied {
        model,
        description: String::new(),
        settings: Vec::new(),
        gro_enabled: None,
        napi_threads: Vec::new(),
        restored: false,
    };
    if model != Model::Nic {
        check_as_made(lab, model)?;
    }
    if model == Model::Veth {
        applied.description = format!(
            "veth (as the veth does it: each side's receive runs inside the peer's send, on the sender's core: the \
             kernel server's TCP receive and the XDP veth's receive into pronghorn's AF_XDP ring on the client's \
             core {client_cpus}, the client's TCP receive on the server's core {server_cpus} on both paths; no RPS, \
             no threaded NAPI)"
        );
        return Ok(applied);
    }
    let (server_mask, client_mask) = (rps_mask(server_cpus)?, rps_mask(client_cpus)?);
    for (ns, dev, server_side) in lab.rps_veths() {
        let mask = if server_side { &server_mask } else { &client_mask };
        for queue in rx_queues(ns, dev)? {
            let file = format!("/sys/class/net/{dev}/queues/{queue}/rps_cpus");
            let before = read_in(ns, &file)?;
            write_in(ns, &file, mask)?;
            let set = read_in(ns, &file)?;
            applied.settings.push(Setting { namespace: ns.into(), file: file.clone(), before, set: set.clone() });
            if !same_mask(&set, mask) {
                bail!("{file} in {ns} reads {set} after writing {mask}");
            }
        }
    }
    if model == Model::Dma {
        applied.description = format!(
            "dma-like (a NIC that writes frames into pronghorn's AF_XDP ring itself, as zero-copy AF_XDP or a \
             DPDK PMD does: RPS on the kernel server's veth {} = the server's core {server_cpus} (rps_cpus \
             {server_mask}); RPS on side b's veths {} and {} = the client's core {client_cpus} (rps_cpus \
             {client_mask}); the XDP veth {}'s receive (its poll, the XDP program, the copy into the ring) left \
             on the sender's core {client_cpus}, so the server's core pays nothing for it, where a zero-copy \
             driver's interrupt would cost a little; the server's core still runs pronghorn's transmit copy and \
             kick, with RPS's hand-off of each frame to the client's core)",
            lab.kernel_veth, lab.kernel_peer, lab.xdp_peer, lab.xdp_veth
        );
        return Ok(applied);
    }
    let gro_on = gro(lab.ns_a, lab.xdp_veth)?;
    if !gro_on {
        sh(&["ip", "netns", "exec", lab.ns_a, "ethtool", "-K", lab.xdp_veth, "gro", "on"])?;
        applied.gro_enabled = Some((lab.ns_a.into(), lab.xdp_veth.into()));
    }
    let threaded = format!("/sys/class/net/{}/threaded", lab.xdp_veth);
    let napi_before = napi_threads();
    let before = read_in(lab.ns_a, &threaded)?;
    write_in(lab.ns_a, &threaded, "1")?;
    let set = read_in(lab.ns_a, &threaded)?;
    applied.settings.push(Setting { namespace: lab.ns_a.into(), file: threaded.clone(), before, set: set.clone() });
    if set != "1" {
        bail!("{threaded} in {} reads {set} after writing 1", lab.ns_a);
    }
    // The kthreads are named napi/<device>-<napi id>, cut to the 15 characters of a task's name;
    // the ones that appeared with the write are this veth's (the lab lock is not held here, so
    // the name is checked too).
    let name_start: String = format!("napi/{}-", lab.xdp_veth).chars().take(15).collect();
    for (pid, name) in napi_threads() {
        if napi_before.iter().any(|(p, _)| *p == pid) || !name.starts_with(&name_start) {
            continue;
        }
        sh(&["taskset", "-pc", server_cpus, &pid.to_string()])?;
        // A NIC's receive runs in softirq, which preempts the application's threads; a
        // kthread of the default policy instead waits its turn among them (16 MariaDB threads
        // on the server's core: frames sat in the veth while they ran, p95 2x the kernel's
        // in one round, tps 0.45x). SCHED_FIFO 50 is what threaded interrupt handlers run at.
        sh(&["chrt", "-f", "-p", NAPI_FIFO_PRIORITY, &pid.to_string()])?;
        let cpus = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:").map(|v| v.trim().to_string())))
            .unwrap_or_default();
        applied.napi_threads.push(PinnedThread { pid, name, cpus });
    }
    if applied.napi_threads.is_empty() {
        bail!("no NAPI kthread appeared for {} after writing 1 to {threaded}", lab.xdp_veth);
    }
    let mut d = format!(
        "nic-like (each side's receive on its own side's core: RPS on the kernel server's veth {} = the server's core \
         {server_cpus} (rps_cpus {server_mask}); RPS on side b's veths {} and {} = the client's core {client_cpus} \
         (rps_cpus {client_mask}); the XDP veth {}'s NAPI threaded",
        lab.kernel_veth, lab.kernel_peer, lab.xdp_peer, lab.xdp_veth
    );
    if applied.gro_enabled.is_some() {
        d += " (GRO on, so that its NAPI outlives each server's XDP program)";
    }
    let threads = applied.napi_threads.iter().map(|t| format!("{} pid {}", t.name, t.pid)).collect::<Vec<_>>();
    let _ = write!(
        d,
        " and pinned to the server's core {server_cpus} at SCHED_FIFO {NAPI_FIFO_PRIORITY} (so that it preempts the \
         server's threads as a NIC's softirq would): {}; the sender's core still runs the veth's transmit and \
         the hand-off, an RPS enqueue and IPI or the kthread's wakeup, which a NIC's DMA would not)",
        threads.join(", ")
    );
    applied.description = d;
    Ok(applied)
}

/// The veth model is the lab as `lab up` makes it (no RPS, the XDP veth's NAPI not threaded),
/// and the dma model wants that NAPI as made (it sets RPS itself): a lab left otherwise (by a
/// bench killed in the nic model, or by hand) would be measured as something else.
fn check_as_made(lab: &LabDevices, model: Model) -> Result<()> {
    let mut files = Vec::new();
    for (ns, dev, _) in lab.rps_veths().into_iter().filter(|_| model == Model::Veth) {
        files
            .extend(rx_queues(ns, dev)?.into_iter().map(|q| (ns, format!("/sys/class/net/{dev}/queues/{q}/rps_cpus"))));
    }
    files.push((lab.ns_a, format!("/sys/class/net/{}/threaded", lab.xdp_veth)));
    for (ns, file) in files {
        let value = read_in(ns, &file)?;
        if !same_mask(&value, "0") {
            bail!(
                "{file} in {ns} is {value}, not 0: the lab is not as `lab up` made it (a bench killed in the nic \
                 model leaves that); take the lab down, or write 0 there, to measure the {} model",
                model.as_str()
            );
        }
    }
    Ok(())
}

impl Applied {
    /// Puts back what `apply` changed, last change first (once; what was set stays on record
    /// for the results); says what it could not.
    pub fn restore(&mut self) {
        if std::mem::replace(&mut self.restored, true) {
            return;
        }
        for s in self.settings.iter().rev() {
            if let Err(e) = write_in(&s.namespace, &s.file, &s.before) {
                eprintln!("warning: cannot restore {} in {} to {}: {e:#}", s.file, s.namespace, s.before);
            }
        }
        if let Some((ns, dev)) = &self.gro_enabled {
            if let Err(e) = sh(&["ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "off"]) {
                eprintln!("warning: cannot turn GRO off again on {dev} in {ns}: {e:#}");
            }
        }
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        self.restore();
    }
}

/// The rx queue directories of a device (rx-0, rx-1, ...).
fn rx_queues(ns: &str, dev: &str) -> Result<Vec<String>> {
    let out = output(&["ip", "netns", "exec", ns, "ls", &format!("/sys/class/net/{dev}/queues")])?;
    let queues: Vec<String> = out.split_whitespace().filter(|q| q.starts_with("rx-")).map(String::from).collect();
    if queues.is_empty() {
        bail!("{dev} in {ns} has no rx queues in sysfs");
    }
    Ok(queues)
}

/// Whether GRO is on for a device.
fn gro(ns: &str, dev: &str) -> Result<bool> {
    let out = output(&["ip", "netns", "exec", ns, "ethtool", "-k", dev])?;
    Ok(out.lines().any(|l| l.trim() == "generic-receive-offload: on"))
}

/// Kernel threads named napi/...: (pid, name).
fn napi_threads() -> Vec<(u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let name = std::fs::read_to_string(e.path().join("comm")).ok()?.trim().to_string();
            name.starts_with("napi/").then_some((pid, name))
        })
        .collect()
}

/// A file of namespace ns's sysfs (`ip netns exec` mounts the namespace's own).
fn read_in(ns: &str, file: &str) -> Result<String> {
    Ok(output(&["ip", "netns", "exec", ns, "cat", file])?.trim().to_string())
}

fn write_in(ns: &str, file: &str, value: &str) -> Result<()> {
    sh(&["ip", "netns", "exec", ns, "sh", "-c", "printf %s \"$1\" > \"$2\"", "sh", value, file])
}

fn output(argv: &[&str]) -> Result<String> {
    let out = Command::new(argv[0]).args(&argv[1..]).output().with_context(|| format!("cannot run {}", argv[0]))?;
    if !out.status.success() {
        bail!("`{}` failed: {}", argv.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn sh(argv: &[&str]) -> Result<()> {
    output(argv).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_are_the_kernels_bitmaps() {
        assert_eq!(rps_mask("0").unwrap(), "1");
        assert_eq!(rps_mask("1").unwrap(), "2");
        assert_eq!(rps_mask("0-3").unwrap(), "f");
        assert_eq!(rps_mask("0,2").unwrap(), "5");
        assert_eq!(rps_mask("1,4-5").unwrap(), "32");
        // Beyond 32 CPUs: groups of 32, most significant first, separated by commas.
        assert_eq!(rps_mask("32").unwrap(), "1,00000000");
        assert_eq!(rps_mask("0-32").unwrap(), "1,ffffffff");
        for bad in ["", "a", "3-1", "1-", "5000"] {
            assert!(rps_mask(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn masks_compare_as_cpu_sets() {
        assert!(same_mask("2", "00000002"));
        assert!(same_mask("1,00000000", "00000001,00000000"));
        assert!(!same_mask("2", "1"));
    }

    #[test]
    fn both_runs_the_veth_model_first() {
        assert_eq!(ModelArg::Both.models(), [Model::Veth, Model::Nic]);
        assert_eq!(ModelArg::Nic.models(), [Model::Nic]);
        assert_eq!(Model::Veth.file_suffix(), "", "the veth model's files keep their names");
        assert_eq!(Model::Nic.file_suffix(), "-nic");
        assert_eq!(ModelArg::Dma.models(), [Model::Dma]);
        assert_eq!(Model::Dma.file_suffix(), "-dma");
    }
}
