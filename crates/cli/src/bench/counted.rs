//! `--count-server`: the server cores' system calls and context switches during each client
//! run, counted by `perf stat` (the kernel's counters of the `raw_syscalls:sys_enter`
//! tracepoint and the context-switches event, for every task on those cores: the server's
//! processes and threads, pronghorn's stack thread, and what the kernel runs in them), then
//! reported per transaction. Counting, not sampling: the counts are exact, and they move far
//! less between runs than this host's speed does, so a system call added to the data path
//! shows in one run (stop 45 found 17.8 getpid calls per pgbench transaction this way).
//!
//! Owns the perf process and the reading of its output; knows nothing of the workloads.

use std::path::{Path, PathBuf};
use std::process::Child;

use anyhow::{Context, Result};

use super::sampled::{start_perf, stop_perf};

/// The events counted, as perf names them in its output.
const SYSCALLS: &str = "raw_syscalls:sys_enter";
const SWITCHES: &str = "context-switches";

/// A perf stat counting on the server's cores, from `start` to `finish`.
pub struct Counter {
    perf: Child,
    out: PathBuf,
}

impl Counter {
    /// Starts counting on `cpus` (a taskset list), writing perf's CSV to `out` at the end.
    pub fn start(cpus: &str, out: &Path) -> Result<Counter> {
        let events = format!("{SYSCALLS},{SWITCHES}");
        let perf = start_perf(&["stat", "-x,", "-a", "-C", cpus, "-e", &events, "-o"], out, "--count-server")?;
        Ok(Counter { perf, out: out.to_path_buf() })
    }

    /// Stops counting and returns the counts.
    pub fn finish(mut self) -> Result<Counted> {
        stop_perf(&mut self.perf, "--count-server: perf stat")?;
        let text = std::fs::read_to_string(&self.out)
            .with_context(|| format!("--count-server: perf stat wrote no {}", self.out.display()));
        let _ = std::fs::remove_file(&self.out);
        parse(&text?)
    }
}

/// What one counting of the server's cores saw.
#[derive(Debug, PartialEq)]
pub struct Counted {
    pub syscalls: f64,
    pub switches: f64,
}

impl Counted {
    /// Per transaction, as samples of `case`.
    pub fn per_transaction(&self, case: &str, transactions: f64) -> [super::workloads::Sample; 2] {
        use super::workloads::Sample;
        [
            Sample { case: case.to_string(), metric: "server_syscalls_per_tx", value: self.syscalls / transactions },
            Sample { case: case.to_string(), metric: "server_switches_per_tx", value: self.switches / transactions },
        ]
    }
}

/// perf stat's CSV (`-x,`): `value,unit,event,...` per event, comments and blank lines
/// around. An event perf could not count (`<not counted>`, `<not supported>`: no tracefs, no
/// permission) rejects the run rather than report zero.
fn parse(text: &str) -> Result<Counted> {
    let value = |event: &str| -> Result<f64> {
        let line = text
            .lines()
            .find(|l| l.split(',').nth(2) == Some(event))
            .with_context(|| format!("--count-server: perf stat counted no {event}"))?;
        let v = line.split(',').next().unwrap_or("");
        v.parse().with_context(|| {
            format!("--count-server: perf stat could not count {event}: {v:?} (root and tracefs needed)")
        })
    };
    Ok(Counted { syscalls: value(SYSCALLS)?, switches: value(SWITCHES)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_stats_csv_gives_both_counts_and_a_missing_count_is_an_error() {
        let out = "# started on Sat Nov 28 15:46:43 2026\n\n\
                   517690,,raw_syscalls:sys_enter,5002103619,100.00,,\n\
                   227855,,context-switches,5002103619,100.00,,\n";
        assert_eq!(parse(out).unwrap(), Counted { syscalls: 517_690.0, switches: 227_855.0 });
        let samples = parse(out).unwrap().per_transaction("-c 4", 10_000.0);
        assert_eq!((samples[0].metric, samples[0].value), ("server_syscalls_per_tx", 51.769));
        assert_eq!((samples[1].metric, samples[1].value), ("server_switches_per_tx", 22.7855));
        assert!(samples.iter().all(|s| s.case == "-c 4"));
        let unsupported =
            "<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n227855,,context-switches,5002103619,100.00,,\n";
        let err = parse(unsupported).unwrap_err().to_string();
        assert!(err.contains("raw_syscalls:sys_enter") && err.contains("not supported"), "{err}");
        let err = parse("227855,,context-switches,5002103619,100.00,,\n").unwrap_err().to_string();
        assert!(err.contains("counted no raw_syscalls:sys_enter"), "{err}");
    }
}
