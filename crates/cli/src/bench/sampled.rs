//! `--sample-server`: the server's cores sampled by perf while a client runs, and what share of
//! their busy time the application's own code took. This shared host's speed differs up to 2x
//! from one run to the next (the same build's mariadbd code took 17 us per point_select in one
//! round and 30 in the next), so two paths' microseconds, measured one after the other, do not
//! compare; the application does the same work per request on both paths, so the server cores'
//! busy time per unit of its own code's time does (`server_core_per_app`). It hides a slowdown
//! of the application's own code that the path itself causes (cache misses its stack adds), and
//! is only as good as the application's samples are many.
//!
//! Owns the perf process and the reading of its report; knows nothing of the workloads.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};

/// perf's sampling period, in ns of CPU time: 10,000 samples a second of a busy core.
const PERIOD_NS: &str = "100000";

/// A perf recording of the server's cores, from `start` to `finish`.
pub struct Sampler {
    perf: Child,
    data: PathBuf,
}

impl Sampler {
    /// Starts sampling every task on `cpus` (a taskset list) into `data`.
    pub fn start(cpus: &str, data: &Path) -> Result<Sampler> {
        let perf = Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-c", PERIOD_NS, "-a", "-C", cpus, "-o"])
            .arg(data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("--sample-server: cannot start perf (scripts/setup.sh installs it)")?;
        Ok(Sampler { perf, data: data.to_path_buf() })
    }

    /// Stops the recording and returns the server cores' busy time per unit of `app`'s own
    /// code (perf's name of its binary) over it.
    pub fn finish(mut self, app: &str) -> Result<f64> {
        // perf record writes its file when interrupted, as after Ctrl-C, and then dies of the
        // signal it got (so that a shell sees it).
        // SAFETY: kill takes no memory; the pid is our own child's, not yet reaped.
        unsafe { libc::kill(self.perf.id() as i32, libc::SIGINT) };
        let status = self.perf.wait().context("--sample-server: perf record")?;
        if !status.success() && status.signal() != Some(libc::SIGINT) {
            bail!("--sample-server: perf record failed ({status})");
        }
        let out = Command::new("perf")
            .args(["report", "--sort", "comm,dso", "-F", "sample,comm,dso", "--stdio", "-q", "-t", "|", "-i"])
            .arg(&self.data)
            .output()
            .context("--sample-server: cannot run perf report")?;
        let _ = std::fs::remove_file(&self.data);
        let report = String::from_utf8_lossy(&out.stdout);
        let (busy, own) = busy_and_own(&report, app);
        if own == 0 {
            bail!("--sample-server: no sample of {app}'s own code on the server's cores (is the server {app}?)");
        }
        Ok(busy as f64 / own as f64)
    }
}

/// From `perf report --sort comm,dso -F sample,comm,dso -t '|'` lines: the samples of every
/// task but the idle one (swapper), and those in `app`'s binary.
fn busy_and_own(report: &str, app: &str) -> (u64, u64) {
    let (mut busy, mut own) = (0, 0);
    for line in report.lines() {
        let mut f = line.split('|').map(str::trim);
        let (Some(Ok(n)), Some(comm), Some(dso)) = (f.next().map(str::parse::<u64>), f.next(), f.next()) else {
            continue;
        };
        if comm == "swapper" {
            continue;
        }
        busy += n;
        if dso == app {
            own += n;
        }
    }
    (busy, own)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_leaves_the_idle_task_out_and_own_code_is_the_apps_binary_only() {
        let report = " 4          |kworker/1:3-mm_|[kernel.kallsyms]   \n\
                      13984      |mariadbd       |[kernel.kallsyms]   \n\
                      1416       |mariadbd       |libc.so.6           \n\
                      3755       |mariadbd       |libpronghorn.so     \n\
                      8000       |mariadbd       |mariadbd            \n\
                      900        |swapper        |[kernel.kallsyms]   \n\
                      junk line\n";
        assert_eq!(busy_and_own(report, "mariadbd"), (4 + 13984 + 1416 + 3755 + 8000, 8000));
        assert_eq!(busy_and_own(report, "postgres"), (27159, 0));
    }
}
