//! `pronghorn ps`, `stat`, `conns`, `lat`, `pcap`: what a running accelerated process shows of
//! itself. Counters and latency come from its stats region (mapped read-only, nothing asked of
//! the process); the connection table, a capture and fresh NIC counters come over its control
//! socket. Both live in the run directory (`PRONGHORN_RUN_DIR`, /dev/shm by default) and are
//! owner-only: another user's processes are not shown.

mod conns;
mod filter;
mod lat;
mod pcap;
mod ps;
mod stat;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use anyhow::{bail, Result};
use runtime::observe::region::{self, Snapshot};

pub use conns::{run as conns, ConnsArgs};
pub use lat::{run as lat, LatArgs};
pub use pcap::{run as pcap, PcapArgs};
pub use ps::{run as ps, PsArgs};
pub use stat::{run as stat, StatArgs};

/// An accelerated process found in the run directory.
pub struct Process {
    pub pid: u32,
    pub snapshot: Snapshot,
}

impl Process {
    /// Its command line (from /proc), or its name in brackets when that is gone. A keeper
    /// (the copy of a family's opener that drives the NIC after the opener exited) keeps the
    /// opener's command line: it is named first.
    pub fn command(&self) -> String {
        let raw = std::fs::read(format!("/proc/{}/cmdline", self.pid)).unwrap_or_default();
        let words: Vec<String> =
            raw.split(|&b| b == 0).filter(|w| !w.is_empty()).map(|w| String::from_utf8_lossy(w).into_owned()).collect();
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", self.pid)).unwrap_or_default();
        match (words.is_empty(), comm.trim() == "pronghorn-keep") {
            (true, _) => format!("[pid {}]", self.pid),
            (false, true) => format!("[pronghorn-keep] {}", words.join(" ")),
            (false, false) => words.join(" "),
        }
    }

    pub fn re_read(&mut self) -> Result<()> {
        self.snapshot = Snapshot::read(&region::stats_path(&dir(), self.pid))?;
        Ok(())
    }
}

fn dir() -> PathBuf {
    region::run_dir()
}

/// The pid of a region file name `pronghorn.<pid>.stats`.
fn pid_of(name: &str) -> Option<u32> {
    parse_pid(name.strip_prefix("pronghorn.")?.strip_suffix(".stats")?).ok()
}

/// A pid as the kernel writes it: decimal digits, no sign, no leading zero, not 0 (Rust's
/// `parse` takes `+123` and `0123`, which name no process the way the user wrote them).
pub fn parse_pid(text: &str) -> Result<u32, String> {
    let canonical = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && !text.starts_with('0');
    match text.parse::<u32>() {
        Ok(pid) if canonical && pid <= i32::MAX as u32 => Ok(pid),
        _ => Err(format!("{text:?} is not a process id (decimal digits, no sign, no leading zero)")),
    }
}

/// Every live accelerated process whose region this user may read, and how many it may not.
/// Regions of processes that are gone are removed when this user may (the cleanup helper does
/// it for processes started as root).
pub fn processes() -> Result<(Vec<Process>, usize)> {
    let dir = dir();
    let mut found = Vec::new();
    let mut hidden = 0;
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) => bail!("cannot read the run directory {}: {e}", dir.display()),
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(pid_of) else { continue };
        match Snapshot::read(&entry.path()) {
            Ok(snapshot) if snapshot.alive() => found.push(Process { pid, snapshot }),
            Ok(_) => {
                let _ = std::fs::remove_file(entry.path());
                let _ = std::fs::remove_file(region::control_path(&dir, pid));
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                if region::start_time_of(pid).is_some() {
                    hidden += 1;
                }
            }
            Err(_) => {}
        }
    }
    found.sort_by_key(|p| p.pid);
    Ok((found, hidden))
}

/// The process `pid` names, or the only one there is.
pub fn pick(pid: Option<u32>) -> Result<Process> {
    let dir = dir();
    match pid {
        Some(pid) => {
            let path = region::stats_path(&dir, pid);
            match Snapshot::read(&path) {
                Ok(s) if s.alive() => Ok(Process { pid, snapshot: s }),
                Ok(_) => bail!("pid {pid} has exited (its stats region {} is stale)", path.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    bail!("pid {pid} is not an accelerated process: no {} (is it running under `pronghorn run`?)", path.display())
                }
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
                    "pid {pid}'s stats belong to another user ({} is readable by its owner only): run as that user or root",
                    path.display()
                ),
                Err(e) => bail!("cannot read {}: {e}", path.display()),
            }
        }
        None => {
            let (mut found, hidden) = processes()?;
            match found.len() {
                1 => Ok(found.remove(0)),
                0 if hidden > 0 => bail!("no accelerated process of this user ({hidden} of other users: run as root)"),
                0 => bail!("no accelerated process on this host (none in {})", dir.display()),
                _ => {
                    let pids: Vec<String> = found.iter().map(|p| p.pid.to_string()).collect();
                    bail!("several accelerated processes ({}): name one", pids.join(", "))
                }
            }
        }
    }
}

/// Sends `request` to `pid`'s control socket; the connected stream, its answer to come.
pub fn control(pid: u32, request: &str) -> Result<UnixStream> {
    let path = region::control_path(&dir(), pid);
    // Not through a symbolic link to some other socket, which root would talk to.
    match std::fs::symlink_metadata(&path) {
        Ok(m) if !m.file_type().is_socket() => {
            bail!("pid {pid}'s control socket {} is not a socket: not connecting to it", path.display())
        }
        _ => {}
    }
    let mut s = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!("pid {pid}'s control socket {} is its owner's only: run as that user or root", path.display())
        }
        Err(e) => bail!("cannot reach pid {pid}'s control socket {}: {e}", path.display()),
    };
    s.write_all(format!("{request}\n").as_bytes())?;
    Ok(s)
}

/// The lines of a text answer up to `end` (or the end of the stream).
pub fn control_lines(pid: u32, request: &str) -> Result<Vec<String>> {
    let s = control(pid, request)?;
    let mut lines = Vec::new();
    for line in BufReader::new(s).lines() {
        let line = line?;
        if line == "end" {
            break;
        }
        if let Some(e) = line.strip_prefix("error: ") {
            bail!("pid {pid}: {e}");
        }
        lines.push(line);
    }
    Ok(lines)
}
