//! `--sample-server`: the server's cores sampled by perf while a client runs, and what share of
//! their busy time the application's own code took. This shared host's speed differs up to 2x
//! from one run to the next (the same build's mariadbd code took 17 us per point_select in one
//! round and 30 in the next), so two paths' microseconds, measured one after the other, do not
//! compare; the application does the same work per request on both paths, so the server cores'
//! busy time per unit of its own code's time does (`server_core_per_app`). It hides a slowdown
//! of the application's own code that the path itself causes (cache misses its stack adds), and
//! is only as good as the application's samples are many.
//!
//! The same recording (with call graphs) says what share of the busy time was the kernel's
//! network code (`kernel_net_percent`): on the kernel path, what a user-space stack takes over,
//! so 100 / (100 - it) is the most any stack could give a server whose cores are saturated, were
//! its own cost nothing (docs/design-notes.md, "What a stack could give at most").
//!
//! Owns the perf process and the reading of its report (and starts and stops the perf of
//! `--count-server`, `counted`); knows nothing of the workloads.

use std::io::{BufRead, BufReader};
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
        let args = ["record", "-q", "-g", "-e", "cpu-clock", "-c", PERIOD_NS, "-a", "-C", cpus, "-o"];
        let perf = start_perf(&args, data, "--sample-server")?;
        Ok(Sampler { perf, data: data.to_path_buf() })
    }

    /// Stops the recording and says what it saw of the server's cores; `app` is perf's name of
    /// the application's binary.
    pub fn finish(mut self, app: &str) -> Result<Sampled> {
        stop_perf(&mut self.perf, "--sample-server: perf record")?;
        let result = read(&self.data, app);
        let _ = std::fs::remove_file(&self.data);
        result
    }
}

/// Starts `perf ARGS OUT` with no terminal (`option`: the bench option that wants it, for the
/// error).
pub(super) fn start_perf(args: &[&str], out: &Path, option: &str) -> Result<Child> {
    Command::new("perf")
        .args(args)
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("{option}: cannot start perf (scripts/setup.sh installs it)"))
}

/// Interrupts a perf started by [`start_perf`] and waits for it: perf record and perf stat
/// write their output when interrupted, as after Ctrl-C, and then die of the signal (so that
/// a shell sees it). `what` names it in the error.
pub(super) fn stop_perf(perf: &mut Child, what: &str) -> Result<()> {
    // SAFETY: kill takes no memory; the pid is our own child's, not yet reaped.
    unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
    let status = perf.wait().with_context(|| what.to_string())?;
    if !status.success() && status.signal() != Some(libc::SIGINT) {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// What one recording of the server's cores says.
pub struct Sampled {
    /// Their busy time per unit of the application's own code.
    pub per_app: f64,
    /// The percentage of their busy time in the kernel's network code ([`NET_PREFIXES`]).
    pub kernel_net_percent: f64,
}

fn read(data: &Path, app: &str) -> Result<Sampled> {
    let out = Command::new("perf")
        .args(["report", "--no-children", "--sort", "comm,dso", "-F", "sample,comm,dso", "--stdio", "-q", "-t", "|"])
        .arg("-i")
        .arg(data)
        .output()
        .context("--sample-server: cannot run perf report")?;
    let report = String::from_utf8_lossy(&out.stdout);
    let (busy, own) = busy_and_own(&report, app);
    if own == 0 {
        bail!("--sample-server: no sample of {app}'s own code on the server's cores (is the server {app}?)");
    }
    let mut script = Command::new("perf")
        .args(["script", "-F", "comm,ip,sym", "-i"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("--sample-server: cannot run perf script")?;
    let (chains, net) = busy_and_network(BufReader::new(script.stdout.take().expect("piped")))?;
    let status = script.wait().context("--sample-server: perf script")?;
    if !status.success() || chains == 0 {
        bail!("--sample-server: perf script read no call chain of a busy sample ({status})");
    }
    Ok(Sampled { per_app: busy as f64 / own as f64, kernel_net_percent: 100.0 * net as f64 / chains as f64 })
}

/// The kernel's network code, by its functions' names: socket calls, TCP and IP, a packet's
/// receive (softirq, NAPI, RPS) and transmit (the device queue, the veth, AF_XDP's), and the
/// waits for socket events (epoll, poll). A sample is the network's when any kernel frame of its
/// call chain starts with one of these, so what that code calls (a wake, an allocation) is the
/// network's too.
const NET_PREFIXES: &[&str] = &[
    "tcp_",
    "__tcp_",
    "tcp4_",
    "tcp6_",
    "inet_",
    "inet6_",
    "__inet_",
    "__inet6_",
    "sock_",
    "__sock_",
    "sk_",
    "__sk_",
    "skb_",
    "__skb_",
    "kfree_skb",
    "consume_skb",
    "__kfree_skb",
    "ip_",
    "__ip_",
    "ip6_",
    "ipv6_",
    "net_rx_action",
    "__netif_",
    "netif_",
    "napi_",
    "__napi",
    "process_backlog",
    "__dev_queue_xmit",
    "__dev_direct_xmit",
    "dev_hard_start_xmit",
    "veth_",
    "xsk_",
    "__xsk_",
    "__sys_accept4",
    "__sys_sendto",
    "__sys_recvfrom",
    "__sys_sendmsg",
    "__sys_recvmsg",
    "__sys_connect",
    "__sys_bind",
    "__sys_listen",
    "__sys_socket",
    "__sys_setsockopt",
    "__sys_getsockopt",
    "__sys_getsockname",
    "__sys_getpeername",
    "__sys_shutdown",
    "do_epoll_wait",
    "do_epoll_ctl",
    "ep_poll",
    "do_sys_poll",
    "security_socket_",
    "neigh_",
    "nf_",
    "rps_",
];

/// From `perf script -F comm,ip,sym` of a recording with call graphs (a line with the task's
/// name, then a tab-indented `address symbol` line per frame, then an empty line): the samples of
/// every task but the idle one (swapper), and those whose chain has a kernel frame of
/// [`NET_PREFIXES`].
fn busy_and_network(script: impl BufRead) -> Result<(u64, u64)> {
    let (mut busy, mut net) = (0, 0);
    // The sample being read: (idle, seen a network frame).
    let mut sample: Option<(bool, bool)> = None;
    let mut end = |sample: &mut Option<(bool, bool)>| {
        if let Some((idle, in_net)) = sample.take() {
            if !idle {
                busy += 1;
                net += u64::from(in_net);
            }
        }
    };
    for line in script.lines() {
        let line = line.context("--sample-server: reading perf script")?;
        if line.trim().is_empty() {
            end(&mut sample);
        } else if let Some(frame) = line.strip_prefix('\t') {
            let mut f = frame.split_whitespace();
            let (Some(addr), Some(sym)) = (f.next(), f.next()) else { continue };
            if let Some((_, in_net)) = sample.as_mut() {
                *in_net |= addr.starts_with("ffff") && NET_PREFIXES.iter().any(|p| sym.starts_with(p));
            }
        } else {
            end(&mut sample);
            sample = Some((line.trim() == "swapper", false));
        }
    }
    end(&mut sample);
    Ok((busy, net))
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

    #[test]
    fn a_busy_sample_is_the_networks_when_a_kernel_frame_of_its_chain_is_network_code() {
        // A backend's send (network: the frames above tcp_sendmsg are what it called), its page
        // fault (not), a user-space function named like a kernel one (not: its address is not the
        // kernel's), a softirq receive in a kworker (network), the idle task (not busy), and a
        // sample with no chain (busy, not network).
        let script = "postgres \n\
                      \tffffffff821eb0e7 _raw_spin_unlock_irqrestore\n\
                      \tffffffff81620028 tcp_sendmsg\n\
                      \tffffffff81621753 __sys_sendto\n\
                      \t          5cd89d secure_write (/usr/lib/postgresql/15/bin/postgres)\n\
                      \n\
                      postgres \n\
                      \tffffffff821eb0e7 clear_page_erms\n\
                      \tffffffff81000c82 asm_exc_page_fault\n\
                      \t          5cd89d palloc0\n\
                      \n\
                      postgres \n\
                      \t          58b621 ip_checksum_of_the_app\n\
                      \n\
                      kworker/1:2-eve \n\
                      \tffffffff821eb0e7 memcpy\n\
                      \tffffffff8165add6 net_rx_action\n\
                      \n\
                      swapper \n\
                      \tffffffff821eb0e7 pv_native_safe_halt\n\
                      \tffffffff8165add6 tcp_v4_rcv\n\
                      \n\
                      postgres \n";
        assert_eq!(busy_and_network(script.as_bytes()).unwrap(), (5, 2));
    }
}
