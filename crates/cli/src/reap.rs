//! `pronghorn reap --pid P --iface I` (hidden; started by the runtime, not by people): cleans up
//! after an accelerated process that could not: one that died by a signal, or gave up root
//! (mariadbd --user=mysql). Waits for P to exit (a pidfd); if P's EAL directory is still there
//! (P did not close its port), removes it and detaches the XDP program left on I (`ip link set
//! dev I xdp off`, in the namespace it was started in). When P closed its port itself there is
//! nothing to do, and the interface is not touched (another process may drive it by then).
//!
//! On an interface shared by several processes (`--queues` > 1, see `nic::share`) a process
//! leaves its port open unless it is the last one out, and two that end together may both
//! leave it: the XDP program is detached when no process holds a queue any more, whatever P
//! did, with every queue lock held so that no newcomer attaches meanwhile. With one queue too
//! the detach waits for the interface to be idle: a server started right after P died holds
//! the queue with a program of its own (it detached P's itself: `nic::xdp::detach_leftover`).
//!
//! A fork family's opener that exits while its children still run hands its port to a keeper
//! (docs/runtime.md, "The opener leaving first"), which it names in `<EAL dir>.keeper`: the
//! helper then waits for the keeper too, and cleans up after it as after P. The opener names
//! itself there as its family starts: when it (or whoever drives the NIC for the family) dies
//! without handing the port on, a child takes the NIC over and names itself, and the helper
//! follows it; it cleans up once no process holds a queue if none does.

use std::os::fd::FromRawFd;
use std::process::Command;

use anyhow::{bail, Result};
use clap::Args;

#[derive(Args)]
pub struct ReapArgs {
    /// The accelerated process to wait for.
    #[arg(long, value_parser = crate::inspect::parse_pid)]
    pid: u32,
    /// The interface its DPDK port drove.
    #[arg(long)]
    iface: String,
    /// Queues of the interface that processes share (nic.queues).
    #[arg(long, default_value_t = 1)]
    queues: u16,
    /// The directory of the process's stats region and control socket (removed too).
    #[arg(long)]
    run_dir: Option<String>,
}

pub fn run(args: ReapArgs) -> Result<i32> {
    // Every fd beyond stderr was inherited from the accelerated process: holding a copy would
    // keep its sockets and files open. Terminal signals cannot reach us (own session); others
    // sent to the group must not stop the cleanup either.
    unsafe {
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    // The process, then the keeper it may have handed its port to at its exit (a fork family's
    // opener whose children outlive it: runtime's `process::keeper`), which names itself in a
    // file beside the EAL's directory before the opener ends.
    let mut watched = args.pid;
    loop {
        wait_for_exit(watched)?;
        if let Some(run_dir) = &args.run_dir {
            let run_dir = std::path::Path::new(run_dir);
            let _ = std::fs::remove_file(runtime::observe::region::stats_path(run_dir, watched));
            let _ = std::fs::remove_file(runtime::observe::region::control_path(run_dir, watched));
        }
        match named_driver(args.pid) {
            Some(k) if k != watched => watched = k,
            // The family's driver died without handing the NIC on (killed: no keeper), while
            // its port is open and its children hold their queue: one of them takes the NIC
            // over within a second or so and names itself (runtime's `family::succession`).
            // Followed when it does; cleaned up after when nobody holds a queue any more.
            Some(_) if std::path::Path::new(&nic::dpdk::runtime_dir_of(args.pid)).exists() => {
                match wait_for_successor(&args, watched) {
                    Some(k) => watched = k,
                    None => break,
                }
            }
            _ => break,
        }
    }
    // The keeper's record stays while it runs (`pronghorn doctor` reads it), gone with it.
    let _ = std::fs::remove_file(runtime::successor_file(args.pid));
    let dir = nic::dpdk::runtime_dir_of(args.pid);
    let left = std::path::Path::new(&dir).exists();
    // With one queue too: a server started after P died (a restart) may drive the interface
    // by now, with a program of its own that must stay.
    let _nobody_else = match nic::share::idle(&args.iface, args.queues) {
        Some(guard) => guard,
        // Others use the program; only the directory is ours to remove.
        None => return remove_dir(&dir).map(|()| 0).map_err(anyhow::Error::msg),
    };
    if !left && args.queues <= 1 {
        return Ok(0);
    }
    if left {
        eprintln!(
            "pronghorn reap: pid {watched} ended without closing its port: detaching the XDP program from {} and \
             removing {dir}",
            args.iface
        );
    }
    // Detach first, then remove the directory: whoever waits for the directory to go (the
    // benchmarks, before the next server) then finds the interface free. A detach that fails
    // because the interface is gone (a lab taken down meanwhile) is no error.
    let detached = match Command::new("ip").args(["link", "set", "dev", &args.iface, "xdp", "off"]).output() {
        Err(e) => Err(format!("cannot run `ip` (iproute2) to detach the XDP program: {e}")),
        Ok(out)
            if !out.status.success() && std::path::Path::new(&format!("/sys/class/net/{}", args.iface)).exists() =>
        {
            Err(format!(
                "`ip link set dev {} xdp off` failed: {}",
                args.iface,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
        Ok(_) => Ok(()),
    };
    if let Err(e) = detached.and(remove_dir(&dir)) {
        bail!("reap: {e}");
    }
    Ok(0)
}

/// The process the file beside P's EAL directory names as the family's driver (P itself while
/// it drives; its keeper, or a child that took the NIC over, then).
fn named_driver(pid: u32) -> Option<u32> {
    std::fs::read_to_string(runtime::successor_file(pid)).ok()?.trim().parse().ok()
}

/// How often the helper looks for the successor of a family's driver that died.
const SUCCESSOR_LOOK: std::time::Duration = std::time::Duration::from_millis(100);

/// After the family's driver `dead` died without handing the NIC on: the process that names
/// itself its successor, or `None` once no process holds a queue of the interface (nobody took
/// over: the port is the helper's to clean up).
fn wait_for_successor(args: &ReapArgs, dead: u32) -> Option<u32> {
    loop {
        if let Some(k) = named_driver(args.pid).filter(|&k| k != dead) {
            return Some(k);
        }
        if nic::share::idle(&args.iface, args.queues).is_some() {
            return None;
        }
        std::thread::sleep(SUCCESSOR_LOOK);
    }
}

/// Waits until process `pid` has exited (at once if it is gone).
fn wait_for_exit(pid: u32) -> Result<()> {
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as i32;
    if pidfd < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            bail!("reap: cannot watch pid {pid}: {e}");
        }
        return Ok(());
    }
    let _owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(pidfd) };
    loop {
        let mut p = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
        let r = unsafe { libc::poll(&mut p, 1, -1) };
        if r > 0 {
            return Ok(());
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            bail!("reap: waiting for pid {pid}: {}", std::io::Error::last_os_error());
        }
    }
}

fn remove_dir(dir: &str) -> Result<(), String> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("cannot remove {dir}: {e}")),
        _ => Ok(()),
    }
}
