//! The `pronghorn` command. Each subcommand lives in its own module; this file only parses the
//! command line and turns errors into one line on stderr and a non-zero exit.

mod bench;
mod config_cmd;
mod doctor;
mod echo;
mod inspect;
mod lab;
mod man;
mod reap;
mod run;
mod topo;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "pronghorn", version, about = "A user-space TCP/IP stack over DPDK for unmodified servers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The lab network: two network namespaces joined by a veth pair, one end driven by DPDK.
    Lab(lab::LabArgs),
    /// A standalone stack on the configured interface that answers ARP, NDP and ping (a NIC-path check).
    Echo(echo::EchoArgs),
    /// Run a program with its sockets on pronghorn (LD_PRELOAD of libpronghorn.so).
    Run(run::RunArgs),
    /// Measure a workload on the kernel and on pronghorn side by side (in the lab).
    Bench(bench::BenchArgs),
    /// Check a config file (every key: docs/config.md).
    Config(config_cmd::ConfigArgs),
    /// The accelerated processes on this host.
    Ps(inspect::PsArgs),
    /// A process's counters per shard, the TCP/UDP MIB, routing and fallbacks (rates with --interval).
    Stat(inspect::StatArgs),
    /// A process's sockets, like `ss -tanei`.
    Conns(inspect::ConnsArgs),
    /// A process's latency per stage (p50, p99, p99.9).
    Lat(inspect::LatArgs),
    /// Capture a process's frames into a pcapng file.
    Pcap(inspect::PcapArgs),
    /// The host's NUMA layout as a stack sees it, or where a process's threads and memory are, with advice.
    Topo(topo::TopoArgs),
    /// Check this host before running pronghorn on it: each need a line, ok, warn or fail, with the fix.
    Doctor(doctor::DoctorArgs),
    /// The completion script of a shell, on stdout (e.g. `pronghorn completions bash > /etc/bash_completion.d/pronghorn`).
    Completions(man::CompletionsArgs),
    /// Writes the man pages (pronghorn.1 and one per command) into a directory (the package build).
    #[command(hide = true)]
    Man(man::ManArgs),
    /// Cleans up after an accelerated process that gave up root (started by the runtime).
    #[command(hide = true)]
    Reap(reap::ReapArgs),
}

fn main() {
    // A Unix tool ends quietly when the reader of its output goes away (`| head`); Rust's
    // runtime ignores SIGPIPE and println! would panic instead.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lab(args) => lab::run(args),
        Command::Echo(args) => echo::run(args),
        Command::Run(args) => run::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Config(args) => config_cmd::run(args),
        Command::Ps(args) => inspect::ps(args),
        Command::Stat(args) => inspect::stat(args),
        Command::Conns(args) => inspect::conns(args),
        Command::Lat(args) => inspect::lat(args),
        Command::Pcap(args) => inspect::pcap(args),
        Command::Topo(args) => topo::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Completions(args) => man::completions(args),
        Command::Man(args) => man::man(args),
        Command::Reap(args) => reap::run(args),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("pronghorn: {e:#}");
            std::process::exit(1);
        }
    }
}
