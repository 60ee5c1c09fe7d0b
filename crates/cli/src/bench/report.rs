//! Turning runs into figures: per-path medians, the median (min, max) of the per-round ratios
//! pronghorn/kernel, CPU use per core, and the files under the results directory.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use super::model::Applied;
use super::workloads::{metric_info, Name};
use super::Run;

/// One (case, metric) over all rounds.
#[derive(Debug, serde::Serialize)]
pub struct Summary {
    pub case: String,
    pub metric: String,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub kernel: Vec<f64>,
    pub pronghorn: Vec<f64>,
    pub kernel_median: f64,
    pub pronghorn_median: f64,
    /// Medians, min and max of pronghorn/kernel per round.
    pub ratio_median: f64,
    pub ratio_min: f64,
    pub ratio_max: f64,
}

/// CPU use per client run label and path: medians over rounds of the busy fraction per core.
#[derive(Debug, serde::Serialize)]
pub struct CpuSummary {
    pub client: String,
    pub path: &'static str,
    pub server_core_busy: f64,
    pub server_core_user: f64,
    pub server_core_system: f64,
    pub server_core_softirq: f64,
    pub client_core_busy: f64,
    pub client_core_softirq: f64,
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

pub fn summarize(runs: &[Run]) -> Vec<Summary> {
    // Keyed by first appearance so that tables keep the clients' order.
    let mut order: Vec<(String, String)> = Vec::new();
    let mut values: BTreeMap<(String, String, &str, u32), f64> = BTreeMap::new();
    for r in runs {
        for s in &r.samples {
            let key = (s.case.clone(), s.metric.to_string());
            if !order.contains(&key) {
                order.push(key);
            }
            values.insert((s.case.clone(), s.metric.to_string(), r.path, r.round), s.value);
        }
    }
    let rounds: Vec<u32> = {
        let mut v: Vec<u32> = runs.iter().map(|r| r.round).collect();
        v.sort();
        v.dedup();
        v
    };
    order
        .into_iter()
        .map(|(case, metric)| {
            let get = |path: &str, round: u32| values.get(&(case.clone(), metric.clone(), path, round)).copied();
            let kernel: Vec<f64> = rounds.iter().filter_map(|&r| get("kernel", r)).collect();
            let pronghorn: Vec<f64> = rounds.iter().filter_map(|&r| get("pronghorn", r)).collect();
            let ratios: Vec<f64> =
                rounds.iter().filter_map(|&r| Some(get("pronghorn", r)? / get("kernel", r)?)).collect();
            let (unit, higher_is_better) = metric_info(&metric);
            Summary {
                kernel_median: median(&kernel),
                pronghorn_median: median(&pronghorn),
                ratio_median: median(&ratios),
                ratio_min: ratios.iter().copied().fold(f64::NAN, f64::min),
                ratio_max: ratios.iter().copied().fold(f64::NAN, f64::max),
                case,
                metric,
                unit,
                higher_is_better,
                kernel,
                pronghorn,
            }
        })
        .collect()
}

pub fn cpu_summary(runs: &[Run]) -> Vec<CpuSummary> {
    let mut out = Vec::new();
    let mut labels: Vec<&str> = Vec::new();
    for r in runs {
        if !labels.contains(&r.client.as_str()) {
            labels.push(&r.client);
        }
    }
    for label in labels {
        for path in ["kernel", "pronghorn"] {
            let mine: Vec<&Run> = runs.iter().filter(|r| r.client == label && r.path == path).collect();
            let m = |f: &dyn Fn(&Run) -> f64| median(&mine.iter().map(|r| f(r)).collect::<Vec<_>>());
            out.push(CpuSummary {
                client: label.to_string(),
                path,
                server_core_busy: m(&|r| r.server_core.busy),
                server_core_user: m(&|r| r.server_core.user),
                server_core_system: m(&|r| r.server_core.system),
                server_core_softirq: m(&|r| r.server_core.softirq),
                client_core_busy: m(&|r| r.client_core.busy),
                client_core_softirq: m(&|r| r.client_core.softirq),
            });
        }
    }
    out
}

/// Machine facts recorded with every result.
pub fn facts(pmd: &str, server_cpu: usize, client_cpu: usize, workload: Name) -> BTreeMap<&'static str, String> {
    let run = |cmd: &str, args: &[&str]| -> String {
        Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .map(|o| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
            .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
            .unwrap_or_else(|| "?".into())
    };
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let mut f = BTreeMap::new();
    f.insert("cores", std::thread::available_parallelism().map(|n| n.get().to_string()).unwrap_or_default());
    f.insert(
        "cpu",
        cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("?")
            .trim()
            .into(),
    );
    f.insert("kernel", run("uname", &["-r"]));
    f.insert("dpdk", run("pkg-config", &["--modversion", "libdpdk"]));
    let on = match pmd {
        "tap" => "a tap joined to a veth by tc mirred (checksums and TSO offloaded, done in the PMD)",
        _ => "a veth (native XDP for af_xdp)",
    };
    f.insert("pmd", format!("net_{pmd} on {on}"));
    f.insert("pinning", format!("server on core {server_cpu}, client on core {client_cpu} (taskset)"));
    let status = run("git", &["status", "--porcelain", "--untracked-files=no"]);
    let dirty = !status.is_empty() && status != "?";
    f.insert(
        "git",
        format!("{}{}", run("git", &["rev-parse", "--short", "HEAD"]), if dirty { " (modified)" } else { "" }),
    );
    f.insert("date", run("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]));
    if let Ok(exe) = std::env::current_exe() {
        f.insert("build", build_fact(option_env!("PRONGHORN_BUILD"), &exe.with_file_name("libpronghorn.so")));
    }
    let versions = match workload {
        Name::Redis | Name::RedisCps | Name::SynFlood | Name::Resync => {
            [run("redis-server", &["--version"]), run("redis-benchmark", &["--version"])]
        }
        Name::Latency => [run("sockperf", &["--version"]), String::new()],
        Name::Bulk => [run("iperf3", &["--version"]), String::new()],
        Name::Http => [run("nginx", &["-v"]), run("wrk", &["-v"])],
        Name::Mariadb => [run("mariadbd", &["--version"]), run("sysbench", &["--version"])],
        Name::Tpcc => [run("mariadbd", &["--version"]), go_tpc_version()],
        Name::Pgbench => {
            [run(&format!("{}/postgres", super::postgres::BIN), &["--version"]), run("pgbench", &["--version"])]
        }
        Name::Scale => [String::new(), String::new()],
    };
    f.insert("software", versions.iter().filter(|s| !s.is_empty()).cloned().collect::<Vec<_>>().join("; "));
    f
}

/// Which build of the library a run measured: `scripts/build-pgo.sh` sets `PRONGHORN_BUILD` while
/// it compiles (the instrumented build, then the profile-guided one); a plain `cargo build` does
/// not. The two differ by more than most changes do (docs/design-notes.md, "Which build a result
/// measured"), so every result says which it was.
fn build_fact(kind: Option<&str>, library: &std::path::Path) -> String {
    let kind = kind.unwrap_or("plain release (scripts/build-pgo.sh builds the profile-guided one, which the demo and `package-deb.sh --pgo` use)");
    format!("{kind}: {}", library.display())
}

/// go-tpc built by bench/go-tpc.sh knows no version of its own; the script records it.
fn go_tpc_version() -> String {
    let Ok(bin) = super::workloads::go_tpc() else { return "go-tpc ?".into() };
    let version = std::fs::read_to_string(bin.with_file_name("VERSION")).unwrap_or_else(|_| "?".into());
    format!("go-tpc {} ({})", version.trim(), bin.display())
}

fn fmt_value(v: f64, unit: &str) -> String {
    if v.is_nan() {
        return "-".into();
    }
    match unit {
        "requests/s" | "transactions/s" | "queries/s" | "new orders/min" => {
            let digits = (v.round() as u64).to_string();
            let mut groups: Vec<&str> = Vec::new();
            let mut end = digits.len();
            while end > 3 {
                groups.push(&digits[end - 3..end]);
                end -= 3;
            }
            groups.push(&digits[..end]);
            groups.reverse();
            groups.join(",")
        }
        "Gbit/s" | super::workloads::PER_APP_UNIT => format!("{v:.2}"),
        "ms" => format!("{v:.3}"),
        _ => format!("{v:.1}"),
    }
}

fn ratio_cell(s: &Summary) -> String {
    if s.ratio_median.is_nan() {
        return "-".into();
    }
    format!("{:.2}x ({:.2}-{:.2})", s.ratio_median, s.ratio_min, s.ratio_max)
}

/// What the kernel path's `kernel_net_percent` (`--sample-server`) says each case could give at
/// most: were a stack's own cost nothing and the rest of the server's work unchanged, its
/// saturated cores would do 100 / (100 - that) times the kernel path's work. None without it.
fn ceilings(summaries: &[Summary]) -> Option<String> {
    let lines: Vec<String> = summaries
        .iter()
        .filter(|s| s.metric == "kernel_net_percent" && s.kernel_median.is_finite() && s.kernel_median < 100.0)
        .map(|s| {
            let case = s.case.strip_prefix("server ").unwrap_or(&s.case);
            format!(
                "- {case}: {:.1}% on the kernel path, so at most {:.2}x",
                s.kernel_median,
                100.0 / (100.0 - s.kernel_median)
            )
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    Some(format!(
        "The most a user-space stack could give each case where the server's cores are saturated: the \
         kernel path's busy time over what is left of it without its network code (kernel_net_percent; \
         a stack that cost nothing, all else unchanged):\n{}\n",
        lines.join("\n")
    ))
}

/// The human table (stdout and markdown share it).
pub fn table(summaries: &[Summary], markdown: bool) -> String {
    let head = ["case", "metric", "kernel", "pronghorn", "pronghorn/kernel (min-max)", "better"];
    let rows: Vec<[String; 6]> = summaries
        .iter()
        .map(|s| {
            let better = match (s.higher_is_better, s.ratio_median) {
                (_, r) if r.is_nan() => "-",
                (true, r) if r > 1.0 => "pronghorn",
                (false, r) if r < 1.0 => "pronghorn",
                _ => "kernel",
            };
            [
                s.case.clone(),
                format!("{} ({})", s.metric, s.unit),
                fmt_value(s.kernel_median, s.unit),
                fmt_value(s.pronghorn_median, s.unit),
                ratio_cell(s),
                better.into(),
            ]
        })
        .collect();
    let mut out = String::new();
    if markdown {
        let _ = writeln!(out, "| {} |", head.join(" | "));
        let _ = writeln!(out, "|---|---|---:|---:|---:|---|");
        for r in rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
    } else {
        let mut w = head.map(str::len);
        for r in &rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.len());
            }
        }
        let line = |cells: &[String]| {
            cells.iter().enumerate().map(|(i, c)| format!("{c:<width$}", width = w[i])).collect::<Vec<_>>().join("  ")
        };
        let _ = writeln!(out, "{}", line(&head.map(String::from)));
        for r in rows {
            let _ = writeln!(out, "{}", line(&r));
        }
    }
    out
}

fn cpu_table(cpu: &[CpuSummary]) -> String {
    let mut out = String::from(
        "| client run | path | server core busy | user | sys | softirq | client core busy | of it softirq |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in cpu {
        let _ = writeln!(
            out,
            "| {} | {} | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {:.0}% |",
            c.client,
            c.path,
            c.server_core_busy * 100.0,
            c.server_core_user * 100.0,
            c.server_core_system * 100.0,
            c.server_core_softirq * 100.0,
            c.client_core_busy * 100.0,
            c.client_core_softirq * 100.0
        );
    }
    out
}

pub fn write(
    dir: &Path,
    name: &str,
    command: &str,
    about: &str,
    facts: &BTreeMap<&'static str, String>,
    model: &Applied,
    runs: &[Run],
) -> Result<()> {
    let summaries = summarize(runs);
    let cpu = cpu_summary(runs);
    let rounds = runs.iter().map(|r| r.round).max().map_or(0, |r| r + 1);
    let model_name = model.model.as_str();
    println!("\n{name}: kernel vs pronghorn, lab model {model_name}, medians of {rounds} alternating rounds each");
    println!("lab model: {}", model.description);
    print!("{}", table(&summaries, false));
    println!("(ratio = pronghorn/kernel per round, lab model {model_name}; for latency lower is better)");
    let ceilings = ceilings(&summaries);
    if let Some(text) = &ceilings {
        print!("{text}");
    }

    let json = serde_json::json!({
        "workload": name, "command": command, "machine": facts, "model": model, "rounds": rounds,
        "summary": summaries, "cpu": cpu, "runs": runs,
    });
    let base = dir.join(name);
    std::fs::write(base.with_extension("json"), serde_json::to_string_pretty(&json)? + "\n")?;

    let mut md = format!("# {name}: kernel vs pronghorn, lab model {model_name}\n\n{about}\n\n");
    let _ = writeln!(md, "Lab model: {}.\n", model.description);
    let shared = facts.get("pinning").is_some_and(|p| p.contains("share cores"));
    let (pinning, of) = if shared {
        ("server and client sharing every core", "of all cores")
    } else {
        ("pinned to the same core, and the same client in namespace b, pinned to the other core", "of one core")
    };
    let _ = writeln!(
        md,
        "Both paths run the same server binary with the same flags in lab namespace a, {pinning}. Kernel: the server binds \
         10.98.0.1 on a kernel veth. pronghorn: the server runs under `pronghorn run` and binds 10.99.0.1, \
         served by pronghorn over DPDK on a veth. Rounds alternate kernel, pronghorn; each figure is the \
         median over {rounds} rounds, the ratio is the median (min-max) of the per-round ratios.\n"
    );
    let _ = writeln!(md, "Ratios pronghorn/kernel in the {model_name} lab model:\n");
    md += &table(&summaries, true);
    if let Some(text) = &ceilings {
        let _ = write!(md, "\n{text}");
    }
    let _ = writeln!(
        md,
        "\nCPU use during the client runs, lab model {model_name} (median over rounds; busy = not idle, {of}; \
         softirq = the part of it in softirq, where a kernel receive runs unless its NAPI is threaded):\n"
    );
    md += &cpu_table(&cpu);
    let _ = writeln!(md, "\nCommand: `{command}`\n");
    md += "Machine: ";
    md += &facts.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("; ");
    md += "\n";
    if chart(&base)? {
        let png = base.with_extension("png");
        let _ = writeln!(md, "\n![{name}]({})", png.file_name().unwrap().to_string_lossy());
    }
    std::fs::write(base.with_extension("md"), md)?;
    println!("results: {}.{{json,md,png}}", base.display());
    Ok(())
}

/// Draws the PNG with bench/chart.py (matplotlib); returns whether it did.
fn chart(base: &Path) -> Result<bool> {
    let Some(script) = super::repo_file("bench/chart.py") else {
        eprintln!("note: bench/chart.py not found (run from the repository root): no PNG");
        return Ok(false);
    };
    let out = Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(base.with_extension("json"))
        .arg(base.with_extension("png"))
        .output()
        .context("cannot run /usr/bin/python3 for the chart")?;
    if !out.status.success() {
        eprintln!("note: no PNG: {}", String::from_utf8_lossy(&out.stderr).trim());
        return Ok(false);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::workloads::Sample;
    use super::super::CoreUse;
    use super::*;

    fn run(round: u32, path: &'static str, v: f64) -> Run {
        Run {
            round,
            path,
            client: "-c 50".into(),
            samples: vec![Sample { case: "SET -c 50".into(), metric: "rps", value: v }],
            server_core: CoreUse::default(),
            client_core: CoreUse::default(),
            seconds: 1.0,
        }
    }

    #[test]
    fn ratios_are_taken_per_round_then_the_median() {
        // Per-round ratios 2.0, 1.5, 3.0: median 2.0 (not the ratio of medians, 150/100 = 1.5).
        let runs = [
            run(0, "kernel", 100.0),
            run(0, "pronghorn", 200.0),
            run(1, "kernel", 100.0),
            run(1, "pronghorn", 150.0),
            run(2, "kernel", 50.0),
            run(2, "pronghorn", 150.0),
        ];
        let s = &summarize(&runs)[0];
        assert_eq!((s.kernel_median, s.pronghorn_median), (100.0, 150.0));
        assert_eq!((s.ratio_median, s.ratio_min, s.ratio_max), (2.0, 1.5, 3.0));
        let t = table(&summarize(&runs), false);
        assert!(t.contains("2.00x (1.50-3.00)") && t.contains("pronghorn"), "{t}");
    }

    #[test]
    fn the_kernel_paths_network_share_says_what_a_stack_could_give_at_most() {
        let net = |round, path, value| Run {
            samples: vec![Sample { case: "server -S -C -c 16".into(), metric: "kernel_net_percent", value }],
            ..run(round, path, 0.0)
        };
        // Kernel path medians 5.0 (of 4, 5, 6): at most 100/95; pronghorn's own share is not it.
        let runs = [
            net(0, "kernel", 4.0),
            net(0, "pronghorn", 1.0),
            net(1, "kernel", 6.0),
            net(1, "pronghorn", 90.0),
            net(2, "kernel", 5.0),
            net(2, "pronghorn", 1.0),
        ];
        let text = ceilings(&summarize(&runs)).unwrap();
        assert!(text.contains("- -S -C -c 16: 5.0% on the kernel path, so at most 1.05x"), "{text}");
        assert_eq!(ceilings(&summarize(&[run(0, "kernel", 1.0), run(0, "pronghorn", 2.0)])), None);
    }

    #[test]
    fn a_result_says_which_build_of_the_library_it_measured() {
        let lib = std::path::Path::new("/x/target/pgo/libpronghorn.so");
        assert_eq!(build_fact(Some("profile-guided"), lib), "profile-guided: /x/target/pgo/libpronghorn.so");
        let plain = build_fact(None, std::path::Path::new("/x/target/release/libpronghorn.so"));
        assert!(
            plain.starts_with("plain release (scripts/build-pgo.sh builds the profile-guided one")
                && plain.ends_with("/x/target/release/libpronghorn.so"),
            "{plain}"
        );
    }

    #[test]
    fn medians_of_even_counts_average_the_middle() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(fmt_value(1234567.4, "requests/s"), "1,234,567");
        assert_eq!(fmt_value(2.567, super::super::workloads::PER_APP_UNIT), "2.57");
        assert_eq!(fmt_value(4.64, super::super::workloads::NET_PERCENT_UNIT), "4.6");
    }
}
