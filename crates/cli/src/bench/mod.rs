//! `pronghorn bench WORKLOAD`: the kernel and pronghorn side by side, in one invocation.
//!
//! It brings up (or reuses) a lab whose side a has two paths to the client namespace b: the
//! DPDK-driven veth (pronghorn, 10.99.0.1) and a plain kernel veth (the kernel, 10.98.0.1). Each
//! round starts the same server binary with the same flags on each path in turn (kernel first,
//! then pronghorn under `pronghorn run`), pinned to the same core, runs the same real clients from
//! side b pinned to another core, checks their output, and stops the server (a workload with a
//! setup, such as a database to fill, gets it once per path before the first round, untimed).
//! Per-path medians and the median (min, max) of the per-round ratios go to stdout, and JSON +
//! markdown (+ a PNG through bench/chart.py) under the results directory. CPU time per core is
//! sampled around every client run, so that what saturates (the client's core, the server's) is
//! measured, not guessed.
//!
//! `--model` picks the lab model (model.rs): on which core each side's kernel receive work runs.
//! Each model's rounds get results files of their own (`<name>.*` for veth, `<name>-nic.*`,
//! `<name>-dma.*`), whose tables say which model they are.
//!
//! Owns: process orchestration and reporting. Must not: know a workload's details (workloads.rs).

mod counted;
pub(crate) mod model;
mod postgres;
mod report;
mod sampled;
mod workloads;

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use model::{Applied, LabDevices, ModelArg};
pub use workloads::Name;
use workloads::{Plan, Sample, Setup};

/// The lab addresses of the two paths (the lab's defaults).
const KERNEL_ADDR: &str = "10.98.0.1";
const PRONGHORN_ADDR: &str = "10.99.0.1";

#[derive(Args)]
pub struct BenchArgs {
    /// What to measure.
    #[arg(value_enum)]
    workload: Name,
    /// A smoke run: small counts and the short cases only (about a minute).
    #[arg(long)]
    quick: bool,
    /// Rounds per path (each round runs the kernel path, then pronghorn's).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    rounds: u32,
    /// The DPDK driver under pronghorn: af_xdp, af_packet, or tap (the lab's path with checksum
    /// and segmentation offloads, `pronghorn lab up --pmd tap`).
    #[arg(long, default_value = "af_xdp", value_parser = ["af_xdp", "af_packet", "tap"])]
    pmd: String,
    /// The lab to use (brought up if it is not, and then taken down again).
    #[arg(long, default_value = "bench")]
    prefix: String,
    /// Where the JSON, markdown and PNG go.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// The core the server runs on (both paths).
    #[arg(long, default_value_t = 1)]
    server_cpu: usize,
    /// The core the client runs on (both paths).
    #[arg(long, default_value_t = 0)]
    client_cpu: usize,
    /// pronghorn's path with busy polling: `runtime.busy_poll_us` set to this in the server's
    /// config (its CPU cost shows in the per-core table). Use with --out to keep the defaults'
    /// results.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    busy_poll_us: Option<u32>,
    /// pronghorn's path under this profile (`pronghorn run --profile`; profiles/): the results
    /// are written as `<workload>-profile-<NAME>` beside the defaults'.
    #[arg(long)]
    profile: Option<String>,
    /// http only: nginx with its master and this many worker processes on both paths (the
    /// lab's veth gets a queue per worker). Server and client then share every core: the
    /// figures compare the two paths on the whole machine, not one core.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    workers: u16,
    /// The lab model: veth (each side's receive runs inside the peer's send, on the peer's
    /// core), nic (each side's receive on its own core: RPS, threaded NAPI pinned), dma (as nic,
    /// with pronghorn's receive copy off the server's core, as a NIC's DMA does it), or both
    /// (veth then nic, each with its own results files).
    #[arg(long, value_enum, default_value = "veth")]
    model: ModelArg,
    /// pronghorn's path on an interface it shares with the kernel (`nic.share = true`, issue
    /// 23): side a's DPDK veth gets the kernel address 10.99.0.1/24 for the run (removed after)
    /// and pronghorn's XDP program hands it only its own flows. af_xdp only. The results are
    /// written as `<workload>-share` beside the dedicated mode's.
    #[arg(long)]
    share: bool,
    /// Sample the server's cores with perf during each client run (every 100 us of CPU) and
    /// report `server_core_per_app`: their busy time per unit of the application's own code.
    /// The host's speed differs between runs; the application's work per request does not,
    /// so this compares the two paths' cost where the microseconds do not (see
    /// crates/cli/src/bench/sampled.rs). mariadb, tpcc, redis, redis-cps, http, latency and
    /// pgbench; needs perf.
    #[arg(long)]
    sample_server: bool,
    /// Count the server cores' system calls and context switches with perf stat during each
    /// client run (every task on them), reported per transaction on both paths:
    /// `server_syscalls_per_tx`, `server_switches_per_tx`. Exact counts, where the host's
    /// speed is not: a call added to the data path shows in one run. pgbench and mariadb (the
    /// workloads whose clients count their transactions); needs perf.
    #[arg(long)]
    count_server: bool,
    /// mariadb and tpcc only: mariadbd with its thread pool (`--thread-handling=pool-of-threads`:
    /// a few threads serve every connection from epoll) on both paths, instead of a thread per
    /// connection. The results are written as `<workload>-threadpool` beside the defaults'.
    #[arg(long)]
    thread_pool: bool,
}

impl BenchArgs {
    /// The cores the server runs on (taskset): its own, or every core with worker processes.
    fn server_cpus(&self) -> String {
        if self.workers > 1 {
            all_cores()
        } else {
            self.server_cpu.to_string()
        }
    }

    fn client_cpus(&self) -> String {
        if self.workers > 1 {
            all_cores()
        } else {
            self.client_cpu.to_string()
        }
    }
}

fn all_cores() -> String {
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("0-{}", n - 1)
}

/// The stack under the server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StackPath {
    Kernel,
    Pronghorn,
}

impl StackPath {
    pub fn as_str(self) -> &'static str {
        match self {
            StackPath::Kernel => "kernel",
            StackPath::Pronghorn => "pronghorn",
        }
    }
    fn addr(self) -> &'static str {
        match self {
            StackPath::Kernel => KERNEL_ADDR,
            StackPath::Pronghorn => PRONGHORN_ADDR,
        }
    }
}

/// CPU time of one core over an interval, as fractions of the interval.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct CoreUse {
    pub busy: f64,
    pub user: f64,
    pub system: f64,
    pub softirq: f64,
}

/// One client run of one round on one path.
#[derive(Debug, serde::Serialize)]
pub struct Run {
    pub round: u32,
    pub path: &'static str,
    pub client: String,
    pub samples: Vec<Sample>,
    pub server_core: CoreUse,
    pub client_core: CoreUse,
    pub seconds: f64,
}

pub fn run(args: BenchArgs) -> Result<i32> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("pronghorn bench needs root (it runs servers in the lab's network namespaces): run it as root");
    }
    let ncpu = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    for (what, cpu) in [("--server-cpu", args.server_cpu), ("--client-cpu", args.client_cpu)] {
        if cpu >= ncpu {
            bail!("{what} {cpu}: this machine has cores 0-{}", ncpu - 1);
        }
    }
    if args.workers > 1 && args.workload != Name::Http {
        bail!("--workers is for http (nginx worker processes); {} has one server process", args.workload.as_str());
    }
    if args.server_cpu == args.client_cpu && args.workers == 1 {
        eprintln!("note: server and client share core {}: the figures measure both together", args.server_cpu);
    }
    if let Some(name) = &args.profile {
        config::profile::Profile::named(name).map_err(anyhow::Error::msg)?;
    }
    check_sampling(&args)?;
    check_counting(&args)?;
    check_thread_pool(&args)?;
    if args.share && args.pmd != "af_xdp" {
        bail!("--share needs --pmd af_xdp: sharing the interface with the kernel is pronghorn's XDP program's job");
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let exe = std::env::current_exe().context("cannot find the pronghorn binary's own path")?;
    if args.workload == Name::Scale {
        if args.model != ModelArg::Veth {
            bail!("--model is for the lab's workloads: scale runs over the in-memory NIC, without a lab");
        }
        return scale(&args);
    }
    if !exe.with_file_name("libpronghorn.so").exists() {
        bail!("libpronghorn.so is not next to {}: build with `cargo build --release --workspace`", exe.display());
    }
    // A plan that cannot be made (a client not installed) fails here, before the lab comes up.
    let result = plan_for(&args, StackPath::Kernel).map(|p| p.about).and_then(|about| {
        let queues = lab_queues(args.workers, shares_a_family(&args)?);
        let mut lab = Lab::up(&exe, &args.prefix, &args.pmd, args.busy_poll_us, queues, args.share)?;
        lab.profile = effective_profile(&args).map(String::from);
        let runs = measure(&args, &exe, &lab);
        lab.down();
        Ok((runs?, about))
    });
    for path in [StackPath::Kernel, StackPath::Pronghorn] {
        let _ = std::fs::remove_dir_all(scratch_dir(path));
    }
    let (measured, about) = result?;
    let mut facts = report::facts(&args.pmd, args.server_cpu, args.client_cpu, args.workload);
    if args.workers > 1 {
        let pinning =
            format!("nginx with {} worker processes and the client share cores {}", args.workers, all_cores());
        facts.insert("pinning", pinning);
    }
    let workers = if args.workers > 1 { format!("-workers{}", args.workers) } else { String::new() };
    let profile = match &args.profile {
        Some(p) => {
            facts.insert("profile", format!("pronghorn's path under `--profile {p}` (profiles/{p}.toml)"));
            format!("-profile-{p}")
        }
        None => {
            if let Some(p) = args.workload.profile() {
                facts.insert(
                    "profile",
                    format!("pronghorn's path under the workload's `--profile {p}` (profiles/{p}.toml)"),
                );
            }
            String::new()
        }
    };
    let share = if args.share {
        facts.insert(
            "interface",
            "shared: the kernel's address 10.99.0.1/24 on pronghorn's veth, `nic.share = true`".into(),
        );
        "-share"
    } else {
        ""
    };
    if args.sample_server {
        facts.insert(
            "sampling",
            "the server's cores sampled by perf during each client run (cpu-clock every 100 us of CPU, with call \
             graphs): \
             server_core_per_app is their busy time per unit of the application's own code; \
             kernel_net_percent the share of it in the kernel's network code (socket calls, TCP/IP, a \
             packet's receive and transmit, epoll and poll waits)"
                .into(),
        );
    }
    if args.count_server {
        facts.insert(
            "counting",
            "the server's cores counted by perf stat during each client run (every task on them): \
             server_syscalls_per_tx is the raw_syscalls:sys_enter count per transaction, \
             server_switches_per_tx the context switches"
                .into(),
        );
    }
    let thread_pool = if args.thread_pool {
        facts.insert("thread_pool", format!("mariadbd with its thread pool on both paths: `{THREAD_POOL}`"));
        "-threadpool"
    } else {
        ""
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    for (model, runs) in &measured {
        let name = format!(
            "{}{thread_pool}{workers}{profile}{share}{}{}",
            args.workload.as_str(),
            model.model.file_suffix(),
            if args.quick { "-quick" } else { "" }
        );
        report::write(&args.out, &name, &command, &about, &facts, model, runs)?;
    }
    Ok(0)
}

/// `--sample-server` needs a workload whose server's own code is in a binary of its own.
fn check_sampling(args: &BenchArgs) -> Result<()> {
    if args.sample_server && args.workload.app_binary().is_none() {
        bail!(
            "--sample-server: {} has no server binary of its own code to sample (mariadb, tpcc, redis, \
             redis-cps, http, latency and pgbench have)",
            args.workload.as_str()
        );
    }
    Ok(())
}

/// `--thread-pool` is mariadbd's.
fn check_thread_pool(args: &BenchArgs) -> Result<()> {
    if args.thread_pool && !matches!(args.workload, Name::Mariadb | Name::Tpcc) {
        bail!("--thread-pool is mariadbd's (mariadb, tpcc): {} has no thread pool to choose", args.workload.as_str());
    }
    Ok(())
}

/// `--count-server` needs a workload that counts its transactions.
fn check_counting(args: &BenchArgs) -> Result<()> {
    if args.count_server && !args.workload.counts_transactions() {
        bail!(
            "--count-server: {} does not count its transactions (pgbench and mariadb do): its system \
             calls and context switches would have nothing to be per",
            args.workload.as_str()
        );
    }
    Ok(())
}

/// Scratch files of a path's server (nginx's config and page, mariadb's datadir); removed when
/// the run ends.
fn scratch_dir(path: StackPath) -> PathBuf {
    std::env::temp_dir().join(format!("pronghorn-bench-{}-{}", std::process::id(), path.as_str()))
}

fn plan_for(args: &BenchArgs, path: StackPath) -> Result<Plan> {
    let dir = scratch_dir(path);
    std::fs::create_dir_all(&dir)?;
    let workers = workloads::Workers { count: args.workers, family: shares_a_family(args)? };
    let mut plan = workloads::plan(args.workload, path.addr(), args.quick, &dir, workers)?;
    if args.thread_pool {
        plan.server.argv.push(THREAD_POOL.into());
    }
    Ok(plan)
}

/// mariadbd's option for its thread pool (`--thread-pool`).
const THREAD_POOL: &str = "--thread-handling=pool-of-threads";

/// The profile pronghorn's path runs under: the one asked for, else the workload's own.
fn effective_profile(args: &BenchArgs) -> Option<&str> {
    args.profile.as_deref().or_else(|| args.workload.profile())
}

/// Whether pronghorn's path runs as a fork family (its profile sets `runtime.share =
/// "family"`, as `nginx-reload` does): nginx's master then drives the NIC and its workers
/// serve on the master's stack.
fn shares_a_family(args: &BenchArgs) -> Result<bool> {
    let Some(name) = effective_profile(args) else { return Ok(false) };
    let profile = config::profile::Profile::named(name).map_err(anyhow::Error::msg)?;
    let keys: toml::Table = profile.text.parse().with_context(|| format!("profile {name}"))?;
    let share = keys.get("runtime").and_then(|r| r.get("share")).and_then(|s| s.as_str());
    Ok(share.is_some_and(|s| config::Share::try_from(s.to_string()) == Ok(config::Share::Family)))
}

/// The lab's veth queues for `workers` server processes: one each, so that each per-process
/// worker drives a queue of its own; one for a family, whose master serves one queue (a queue
/// nobody serves drops what the client's flow hash puts there).
fn lab_queues(workers: u16, family: bool) -> u16 {
    if family {
        1
    } else {
        workers
    }
}

/// A file of the repository: under the current directory, or two levels above the binary
/// (target/release/pronghorn).
pub fn repo_file(rel: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    [PathBuf::from(rel), exe.with_file_name("../..").join(rel)].into_iter().find(|p| p.exists())
}

/// The setups (once), then each model's rounds with the model in force; the model's settings
/// are restored before the next model's rounds and stay on record with its runs.
fn measure(args: &BenchArgs, exe: &Path, lab: &Lab) -> Result<Vec<(Applied, Vec<Run>)>> {
    for path in [StackPath::Kernel, StackPath::Pronghorn] {
        let plan = plan_for(args, path)?;
        if let Some(setup) = &plan.setup {
            prepare(args, exe, lab, path, &plan, setup)?;
        }
    }
    let mut measured = Vec::new();
    for &model in args.model.models() {
        let mut applied = model::apply(model, &lab.devices(), &args.server_cpus(), &args.client_cpus())?;
        eprintln!("lab model: {}", applied.description);
        let runs = rounds(args, exe, lab)?;
        applied.restore();
        measured.push((applied, runs));
    }
    Ok(measured)
}

fn rounds(args: &BenchArgs, exe: &Path, lab: &Lab) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    for round in 0..args.rounds {
        for path in [StackPath::Kernel, StackPath::Pronghorn] {
            let plan = plan_for(args, path)?;
            eprintln!("round {}/{} {}: {}", round + 1, args.rounds, path.as_str(), plan.server.argv.join(" "));
            let mut server = lab.start_server(exe, path, &plan, &args.server_cpus())?;
            let r = run_clients(args, lab, path, round, &plan, &mut server);
            let stopped = server.stop();
            runs.extend(r?);
            stopped?;
        }
    }
    Ok(runs)
}

/// A plan's setup on one path, untimed: its local commands, then its prepare clients against
/// the server (started and stopped as in a round).
fn prepare(args: &BenchArgs, exe: &Path, lab: &Lab, path: StackPath, plan: &Plan, setup: &Setup) -> Result<()> {
    for argv in &setup.local {
        let out = Command::new(&argv[0]).args(&argv[1..]).stdin(Stdio::null()).output();
        succeeded(path, argv, &out.with_context(|| format!("cannot run {}", argv[0]))?)?;
    }
    let mut server = lab.start_server(exe, path, plan, &args.server_cpus())?;
    let prepared = (|| -> Result<()> {
        server.wait_listening(&lab.ns_b, path.addr(), plan.server.port)?;
        for argv in &setup.prepare {
            eprintln!("prepare {} (untimed): {}", path.as_str(), argv.join(" "));
            let out = lab.client(&args.client_cpus(), argv).output().context("cannot start the prepare client")?;
            server.check_alive()?;
            succeeded(path, argv, &out)?;
        }
        Ok(())
    })();
    let stopped = server.stop();
    prepared?;
    stopped
}

fn run_clients(
    args: &BenchArgs,
    lab: &Lab,
    path: StackPath,
    round: u32,
    plan: &Plan,
    server: &mut Server,
) -> Result<Vec<Run>> {
    server.wait_listening(&lab.ns_b, path.addr(), plan.server.port)?;
    let mut runs = Vec::new();
    let counters = workloads::server_counters(args.workload);
    for client in &plan.clients {
        let counted = lab.server_counters(path, server, counters)?;
        let app = args.workload.app_binary().filter(|_| args.sample_server);
        let sampler = match app {
            Some(_) => Some(sampled::Sampler::start(&args.server_cpus(), &scratch_dir(path).join("server.perf"))?),
            None => None,
        };
        let counter = match args.count_server {
            true => Some(counted::Counter::start(&args.server_cpus(), &scratch_dir(path).join("server.stat"))?),
            false => None,
        };
        let before = (cpu_times(&args.server_cpus())?, cpu_times(&args.client_cpus())?);
        let t0 = Instant::now();
        let out = lab.client(&args.client_cpus(), &client.argv).output().context("cannot start the client")?;
        let seconds = t0.elapsed().as_secs_f64();
        let after = (cpu_times(&args.server_cpus())?, cpu_times(&args.client_cpus())?);
        let sampled = match (sampler, app) {
            (Some(s), Some(app)) => Some(s.finish(app)?),
            _ => None,
        };
        let census = counter.map(counted::Counter::finish).transpose()?;
        server.check_alive()?;
        let text = succeeded(path, &client.argv, &out)?;
        let mut samples = client.parse(&text).with_context(|| format!("{} path", path.as_str()))?;
        if let Some(census) = census {
            let done = samples.iter().find(|s| s.metric == "transactions").map(|s| (s.case.clone(), s.value));
            let (case, transactions) = done.context("--count-server: the client counted no transactions")?;
            samples.extend(census.per_transaction(&case, transactions));
        }
        let server_core = core_use(before.0, after.0);
        per_transaction(&mut samples, server_core.busy * seconds * core_count(&args.server_cpus()) as f64);
        let grown = lab.server_counters(path, server, counters)?.into_iter().zip(counted).map(|(a, b)| a - b);
        samples.extend(counters.iter().zip(grown).map(|(&metric, value)| Sample {
            case: format!("server {}", client.label),
            metric,
            value,
        }));
        if let Some(sampled) = sampled {
            let case = format!("server {}", client.label);
            samples.push(Sample { case: case.clone(), metric: "server_core_per_app", value: sampled.per_app });
            samples.push(Sample { case, metric: "kernel_net_percent", value: sampled.kernel_net_percent });
        }
        eprintln!(
            "  {:<22} {}",
            client.label,
            samples.iter().map(|s| format!("{} {} {:.3}", s.case, s.metric, s.value)).collect::<Vec<_>>().join(", ")
        );
        runs.push(Run {
            round,
            path: path.as_str(),
            client: client.label.clone(),
            samples,
            server_core,
            client_core: core_use(before.1, after.1),
            seconds,
        });
    }
    if let Some(after) = &plan.after {
        let out = lab.client(&args.client_cpus(), &after.argv).output()?;
        (after.check)(&String::from_utf8_lossy(&out.stdout))
            .with_context(|| format!("{} path, after the run", path.as_str()))?;
    }
    Ok(runs)
}

/// A client's `transactions` sample (how many it completed) becomes the server cores' CPU time
/// per transaction, `server_cpu_us_per_tx`, from the CPU seconds they were busy during its run.
fn per_transaction(samples: &mut [Sample], server_cpu_seconds: f64) {
    for s in samples.iter_mut().filter(|s| s.metric == "transactions") {
        s.metric = "server_cpu_us_per_tx";
        s.value = server_cpu_seconds * 1e6 / s.value;
    }
}

/// How many cores a taskset list ("1", "0-3") names.
fn core_count(cpus: &str) -> usize {
    let (first, last) = core_range(cpus);
    last + 1 - first
}

/// The first and last core of a taskset list: "1" or "0-3".
fn core_range(cpus: &str) -> (usize, usize) {
    let range: Vec<usize> = cpus.split('-').filter_map(|c| c.parse().ok()).collect();
    (range[0], *range.last().unwrap())
}

/// A finished command's stdout and stderr as text, or an error naming it if it failed.
fn succeeded(path: StackPath, argv: &[String], out: &std::process::Output) -> Result<String> {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("{} path: `{}` failed ({}): {}", path.as_str(), argv.join(" "), out.status, tail(&text, 6));
    }
    Ok(text)
}

fn tail(text: &str, lines: usize) -> String {
    let v: Vec<&str> = text.lines().collect();
    v[v.len().saturating_sub(lines)..].join(" | ")
}

/// `scale` has no kernel path: it is the stack-level benchmark, bench/stack_scale.sh.
fn scale(args: &BenchArgs) -> Result<i32> {
    let script =
        repo_file("bench/stack_scale.sh").context("bench/stack_scale.sh not found: run from the repository root")?;
    eprintln!("scale is stack-level (in-memory NIC, no kernel path): running {}", script.display());
    let mut c = Command::new("bash");
    c.arg(script);
    if args.quick {
        c.arg("--quick");
    }
    let status = c.status()?;
    Ok(status.code().unwrap_or(1))
}

/// The lab the benchmark runs in; taken down at the end only if this run brought it up.
struct Lab {
    exe: PathBuf,
    prefix: String,
    ns_a: String,
    ns_b: String,
    xdp_veth: String,
    xdp_peer: String,
    kernel_veth: String,
    kernel_peer: String,
    config: PathBuf,
    /// The profile pronghorn's path runs under.
    profile: Option<String>,
    /// Shared mode: the kernel address this run put on `xdp_veth` (taken off again at `down`).
    shared_addr: Option<String>,
    ours: bool,
}

impl Lab {
    fn up(exe: &Path, prefix: &str, pmd: &str, busy_poll_us: Option<u32>, queues: u16, share: bool) -> Result<Lab> {
        let ns_a = format!("{prefix}-a");
        let ours = !Path::new("/run/netns").join(&ns_a).exists();
        let q = queues.to_string();
        let out = Command::new(exe).args(["lab", "up", "--prefix", prefix, "--pmd", pmd, "--queues", &q]).output()?;
        if !out.status.success() {
            bail!("lab up failed: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        let state = std::fs::read_to_string(format!("/run/pronghorn/lab/{prefix}/state.toml")).unwrap_or_default();
        if !state.contains(&format!("pmd = \"{pmd}\"")) {
            bail!("lab {prefix} is up with another pmd: take it down (`pronghorn lab down --prefix {prefix}`) or pass --pmd to match");
        }
        if !Path::new("/run/netns").join(&ns_a).exists() || !kernel_path_present(&ns_a, prefix) {
            bail!("lab {prefix} has no kernel path ({prefix}-k0): it predates it; take it down and run again");
        }
        let mut config = PathBuf::from(format!("/run/pronghorn/lab/{prefix}/a.toml"));
        if config::Config::load(&config).map(|c| c.nic.queues).unwrap_or(1) != queues {
            bail!("lab {prefix} is up with another number of queues: take it down (`pronghorn lab down --prefix {prefix}`)");
        }
        if busy_poll_us.is_some() || share {
            let mut cfg = config::Config::load(&config)?;
            let mut name = "a".to_string();
            if let Some(us) = busy_poll_us {
                cfg.runtime.busy_poll_us = us;
                name += "-busy-poll";
            }
            if share {
                cfg.nic.share = true;
                name += "-share";
            }
            config.set_file_name(format!("{name}.toml"));
            std::fs::write(&config, cfg.to_toml()).with_context(|| format!("cannot write {}", config.display()))?;
        }
        let xdp_veth = format!("{prefix}-a0");
        let shared_addr = share.then(|| format!("{PRONGHORN_ADDR}/24"));
        if !share {
            // A shared run that was killed may have left its kernel address: the dedicated
            // mode's interface has none (the kernel would answer pronghorn's peers).
            let _ = Command::new("ip")
                .args(["-n", &ns_a, "addr", "del", &format!("{PRONGHORN_ADDR}/24"), "dev", &xdp_veth])
                .stderr(Stdio::null())
                .status();
        }
        if let Some(addr) = &shared_addr {
            let out = Command::new("ip").args(["-n", &ns_a, "addr", "replace", addr, "dev", &xdp_veth]).output()?;
            if !out.status.success() {
                bail!(
                    "cannot give {xdp_veth} the kernel address {addr}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        Ok(Lab {
            exe: exe.to_path_buf(),
            prefix: prefix.to_string(),
            ns_a,
            ns_b: format!("{prefix}-b"),
            profile: None,
            shared_addr,
            xdp_veth,
            xdp_peer: format!("{prefix}-b0"),
            kernel_veth: format!("{prefix}-k0"),
            kernel_peer: format!("{prefix}-k1"),
            config,
            ours,
        })
    }

    /// The interfaces a lab model sets (the names `pronghorn lab up` gives them).
    fn devices(&self) -> LabDevices<'_> {
        LabDevices {
            ns_a: &self.ns_a,
            ns_b: &self.ns_b,
            xdp_veth: &self.xdp_veth,
            xdp_peer: &self.xdp_peer,
            kernel_veth: &self.kernel_veth,
            kernel_peer: &self.kernel_peer,
        }
    }

    fn down(&self) {
        if let Some(addr) = &self.shared_addr {
            let _ = Command::new("ip").args(["-n", &self.ns_a, "addr", "del", addr, "dev", &self.xdp_veth]).status();
        }
        if self.ours {
            let _ =
                Command::new(&self.exe).args(["lab", "down", "--prefix", &self.prefix]).stdout(Stdio::null()).status();
        }
    }

    fn client(&self, cpus: &str, argv: &[String]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns_b, "taskset", "-c", cpus]).args(argv).stdin(Stdio::null());
        c
    }

    /// The server's `names` counters: the namespace's own (nstat) on the kernel path, the
    /// process's (`pronghorn stat`) on pronghorn's.
    fn server_counters(&self, path: StackPath, server: &Server, names: &[&str]) -> Result<Vec<f64>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let out = match path {
            StackPath::Kernel => {
                Command::new("ip").args(["netns", "exec", &self.ns_a, "nstat", "-asz"]).args(names).output()
            }
            StackPath::Pronghorn => {
                Command::new(&self.exe).args(["stat", "--json", &server.child.id().to_string()]).output()
            }
        }
        .context("cannot read the server's counters")?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "cannot read the {} server's counters: {}",
                path.as_str(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let value = |name: &str| -> Option<f64> {
            match path {
                StackPath::Kernel => text
                    .lines()
                    .find_map(|l| {
                        l.split_whitespace()
                            .collect::<Vec<_>>()
                            .get(..2)
                            .filter(|w| w[0] == name)
                            .map(|w| w[1].to_string())
                    })
                    .and_then(|v| v.parse().ok()),
                StackPath::Pronghorn => {
                    serde_json::from_str::<serde_json::Value>(&text).ok()?.get("mib")?.get(name)?.as_f64()
                }
            }
        };
        names
            .iter()
            .map(|n| value(n).with_context(|| format!("the {} server has no counter {n}", path.as_str())))
            .collect()
    }

    fn start_server(&self, exe: &Path, path: StackPath, plan: &Plan, cpus: &str) -> Result<Server> {
        let log = tempfile_path(&format!("server-{}", path.as_str()));
        let f = File::create(&log)?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns_a, "taskset", "-c", cpus]);
        if path == StackPath::Pronghorn {
            c.arg(exe).arg("run").arg("--config").arg(&self.config);
            if let Some(p) = &self.profile {
                c.args(["--profile", p]);
            }
            c.arg("--");
        }
        c.args(&plan.server.argv).stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f);
        let child = c.spawn().with_context(|| format!("cannot start {}", plan.server.argv[0]))?;
        Ok(Server { child, log, path })
    }
}

fn kernel_path_present(ns_a: &str, prefix: &str) -> bool {
    Command::new("ip")
        .args(["-n", ns_a, "link", "show", &format!("{prefix}-k0")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn tempfile_path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("pronghorn-bench-{}-{what}.log", std::process::id()))
}

/// A server process on one path (the `ip netns exec` child execs into it, so its pid is the server's).
struct Server {
    child: Child,
    log: PathBuf,
    path: StackPath,
}

impl Server {
    fn log_tail(&self) -> String {
        let mut s = String::new();
        let _ = File::open(&self.log).and_then(|mut f| f.read_to_string(&mut s));
        tail(&s, 8)
    }

    fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the {} server exited ({status}): {}", self.path.as_str(), self.log_tail());
        }
        Ok(())
    }

    /// Waits until a TCP connection from namespace `ns` to addr:port succeeds (30 s at most).
    fn wait_listening(&mut self, ns: &str, addr: &str, port: u16) -> Result<()> {
        let target: SocketAddr = format!("{addr}:{port}").parse()?;
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let netns = File::open(format!("/run/netns/{ns}")).with_context(|| format!("namespace {ns} is gone"))?;
        let (d, s) = (done.clone(), stop.clone());
        let prober = std::thread::spawn(move || {
            // This thread alone moves into the client's namespace.
            if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return;
            }
            while !s.load(Ordering::Relaxed) {
                if TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_ok() {
                    d.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let result = loop {
            if done.load(Ordering::Relaxed) {
                break Ok(());
            }
            if let Err(e) = self.check_alive() {
                break Err(e);
            }
            if Instant::now() > deadline {
                break Err(anyhow::anyhow!(
                    "the {} server did not accept connections on {target} within 30 s: {}",
                    self.path.as_str(),
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        stop.store(true, Ordering::Relaxed);
        let _ = prober.join();
        result
    }

    /// SIGTERM, then SIGKILL after 10 s; an exit by any signal other than ours is an error. On
    /// pronghorn's path it then waits (10 s at most) for the process's DPDK directory to go: a
    /// server that dropped root (mariadbd --user=mysql) leaves it and its XDP program to a
    /// helper (`pronghorn reap`), which must be done before the next server or `lab down`.
    fn stop(mut self) -> Result<()> {
        let pid = self.child.id() as libc::pid_t;
        if self.child.try_wait()?.is_some() {
            self.check_alive()?;
        }
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                unsafe { libc::kill(pid, libc::SIGKILL) };
                self.child.wait()?;
                bail!("the {} server did not exit within 10 s of SIGTERM (killed)", self.path.as_str());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.path == StackPath::Pronghorn {
            let dir = nic::dpdk::runtime_dir_of(pid as u32);
            let deadline = Instant::now() + Duration::from_secs(10);
            while Path::new(&dir).exists() {
                if Instant::now() > deadline {
                    bail!("{dir} is still there 10 s after the pronghorn server exited: nothing cleaned up after it");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// (busy, user, system, softirq, total) jiffies of one core from /proc/stat.
type Jiffies = [u64; 5];

/// The jiffies of the cores in `cpus` (a taskset list: "1" or "0-3"), summed.
fn cpu_times(cpus: &str) -> Result<Jiffies> {
    let (first, last) = core_range(cpus);
    let stat = std::fs::read_to_string("/proc/stat")?;
    let mut sum = [0u64; 5];
    for cpu in first..=last {
        let key = format!("cpu{cpu} ");
        let line = stat.lines().find(|l| l.starts_with(&key)).with_context(|| format!("no {key}line in /proc/stat"))?;
        let f: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal
        let total: u64 = f.iter().take(8).sum();
        let idle = f[3] + f.get(4).copied().unwrap_or(0);
        for (s, v) in sum.iter_mut().zip([total - idle, f[0] + f[1], f[2], f.get(6).copied().unwrap_or(0), total]) {
            *s += v;
        }
    }
    Ok(sum)
}

fn core_use(a: Jiffies, b: Jiffies) -> CoreUse {
    let total = (b[4] - a[4]).max(1) as f64;
    CoreUse {
        busy: (b[0] - a[0]) as f64 / total,
        user: (b[1] - a[1]) as f64 / total,
        system: (b[2] - a[2]) as f64 / total,
        softirq: (b[3] - a[3]) as f64 / total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        Cli::try_parse_from([&["bench"], args].concat()).map(|c| c.bench)
    }

    /// nginx's workers under `--profile nginx-reload` are a fork family on the master's one
    /// queue: a lab with a queue per worker dropped what the flow hash put on the others, and
    /// the pronghorn server never accepted within the bench's 30 s.
    #[test]
    fn a_family_profile_gets_a_lab_of_one_queue_and_per_process_workers_one_queue_each() {
        let family = parse(&["http", "--workers", "2", "--profile", "nginx-reload"]).unwrap();
        assert!(shares_a_family(&family).unwrap());
        assert_eq!(lab_queues(family.workers, true), 1);
        let own = parse(&["http", "--workers", "2"]).unwrap();
        assert!(!shares_a_family(&own).unwrap());
        assert_eq!(lab_queues(own.workers, false), 2);
        assert!(!shares_a_family(&parse(&["http", "--workers", "2", "--profile", "nginx"]).unwrap()).unwrap());
        assert!(shares_a_family(&parse(&["pgbench"]).unwrap()).unwrap(), "pgbench runs under its postgres profile");
    }

    #[test]
    fn server_sampling_is_asked_for_and_only_where_the_server_has_a_binary_of_its_own() {
        assert!(!parse(&["mariadb"]).unwrap().sample_server);
        for workload in ["mariadb", "tpcc", "redis", "redis-cps", "http", "latency", "pgbench"] {
            let args = parse(&[workload, "--sample-server"]).unwrap();
            assert!(args.sample_server && check_sampling(&args).is_ok(), "{workload}");
        }
        for workload in ["bulk", "syn-flood", "resync", "scale"] {
            let err = check_sampling(&parse(&[workload, "--sample-server"]).unwrap()).unwrap_err().to_string();
            assert!(err.contains("--sample-server") && err.contains(workload), "{err}");
        }
    }

    #[test]
    fn server_counting_is_asked_for_and_only_where_the_client_counts_transactions() {
        assert!(!parse(&["pgbench"]).unwrap().count_server);
        for workload in ["pgbench", "mariadb"] {
            let args = parse(&[workload, "--count-server"]).unwrap();
            assert!(args.count_server && check_counting(&args).is_ok(), "{workload}");
        }
        for workload in ["tpcc", "redis", "http", "bulk"] {
            let err = check_counting(&parse(&[workload, "--count-server"]).unwrap()).unwrap_err().to_string();
            assert!(err.contains("--count-server") && err.contains(workload) && err.contains("pgbench"), "{err}");
        }
    }

    #[test]
    fn the_thread_pool_is_for_mariadbd_only() {
        for workload in ["mariadb", "tpcc"] {
            let args = parse(&[workload, "--thread-pool"]).unwrap();
            assert!(args.thread_pool && check_thread_pool(&args).is_ok(), "{workload}");
            assert!(!parse(&[workload]).unwrap().thread_pool);
        }
        let err = check_thread_pool(&parse(&["redis", "--thread-pool"]).unwrap()).unwrap_err().to_string();
        assert!(err.contains("--thread-pool") && err.contains("redis"), "{err}");
    }

    #[test]
    fn shared_mode_is_asked_for_and_off_by_default() {
        assert!(!parse(&["redis"]).unwrap().share);
        assert!(parse(&["mariadb", "--share"]).unwrap().share);
    }

    #[test]
    fn the_lab_model_is_veth_unless_asked() {
        assert_eq!(parse(&["redis"]).unwrap().model, ModelArg::Veth);
        for workload in
            ["redis", "redis-cps", "latency", "http", "mariadb", "tpcc", "bulk", "syn-flood", "resync", "pgbench"]
        {
            assert_eq!(parse(&[workload, "--model", "nic"]).unwrap().model, ModelArg::Nic, "{workload}");
        }
        assert_eq!(parse(&["tpcc", "--quick", "--model", "both"]).unwrap().model, ModelArg::Both);
        assert_eq!(parse(&["mariadb", "--model", "dma"]).unwrap().model, ModelArg::Dma);
        assert_eq!(parse(&["http", "--workers", "2", "--model", "veth"]).unwrap().model, ModelArg::Veth);
        let err = parse(&["redis", "--model", "loopback"]).err().unwrap().to_string();
        assert!(err.contains("veth") && err.contains("nic") && err.contains("both"), "{err}");
    }

    #[test]
    fn completed_transactions_become_server_cpu_per_transaction() {
        let mut samples = vec![
            Sample { case: "-S -c 16".into(), metric: "tps", value: 5000.0 },
            Sample { case: "-S -c 16".into(), metric: "transactions", value: 25_000.0 },
        ];
        // The server core busy 80% of 5 s: 4 CPU seconds over 25,000 transactions.
        per_transaction(&mut samples, 0.8 * 5.0 * core_count("1") as f64);
        assert_eq!((samples[0].metric, samples[0].value), ("tps", 5000.0));
        assert_eq!(samples[1].metric, "server_cpu_us_per_tx");
        assert!((samples[1].value - 160.0).abs() < 1e-9, "{}", samples[1].value);
        assert_eq!((core_count("0-3"), core_count("2-3")), (4, 2));
    }

    #[test]
    fn pgbench_runs_under_the_postgres_profile_unless_told() {
        assert_eq!(Name::Pgbench.profile(), Some("postgres"));
        assert_eq!(Name::Redis.profile(), None);
        assert_eq!(parse(&["pgbench", "--quick"]).unwrap().profile, None, "the default is the workload's");
    }

    #[test]
    fn worker_processes_spread_the_model_over_every_core() {
        let one = parse(&["http", "--model", "nic", "--server-cpu", "1", "--client-cpu", "0"]).unwrap();
        assert_eq!((one.server_cpus(), one.client_cpus()), ("1".to_string(), "0".to_string()));
        let many = parse(&["http", "--model", "nic", "--workers", "2"]).unwrap();
        assert_eq!(many.server_cpus(), all_cores());
        assert_eq!(model::rps_mask(&many.server_cpus()).unwrap(), model::rps_mask(&many.client_cpus()).unwrap());
    }
}
