//! `pronghorn lat`: a process's latency histograms per stage, with p50, p99 and p99.9.

use anyhow::Result;
use clap::Args;
use runtime::observe::region::{quantile, STAGES};

use super::{control_lines, pick};

#[derive(Args)]
pub struct LatArgs {
    /// The accelerated process (the only one, if not given).
    #[arg(value_parser = super::parse_pid)]
    pid: Option<u32>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

fn us(ns: Option<u64>) -> String {
    ns.map_or("-".into(), |ns| format!("{:.2}", ns as f64 / 1000.0))
}

pub fn run(args: LatArgs) -> Result<i32> {
    let mut p = pick(args.pid)?;
    // Asking for fresh figures also starts the timing of the lock's holds (stage lock-hold).
    control_lines(p.pid, "stat")?;
    p.re_read()?;
    let l = &p.snapshot.layout;
    let rows: Vec<_> = STAGES
        .iter()
        .enumerate()
        .map(|(i, (name, what))| {
            let h = &l.latency[i];
            let n: u64 = h.iter().sum();
            (*name, *what, n, quantile(h, 0.5), quantile(h, 0.99), quantile(h, 0.999))
        })
        .collect();
    if args.json {
        let stages: Vec<_> = rows
            .iter()
            .map(|(name, what, n, p50, p99, p999)| {
                serde_json::json!({"stage": name, "measures": what, "samples": n, "p50_ns": p50, "p99_ns": p99, "p999_ns": p999})
            })
            .collect();
        println!("{}", serde_json::json!({"pid": p.pid, "stages": stages}));
        return Ok(0);
    }
    println!(
        "pid {} ({}): latency since it started, in microseconds (upper bounds of 1/4-octave buckets)",
        p.pid,
        p.command()
    );
    println!("{:<14} {:>12} {:>10} {:>10} {:>10}  measures", "stage", "samples", "p50", "p99", "p99.9");
    for (name, what, n, p50, p99, p999) in rows {
        println!("{name:<14} {n:>12} {:>10} {:>10} {:>10}  {what}", us(p50), us(p99), us(p999));
    }
    Ok(0)
}
