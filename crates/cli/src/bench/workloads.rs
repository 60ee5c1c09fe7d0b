//! The workloads of BENCHMARKS.md that run today: what server to start, which real clients to run
//! against it, and how to read (and check) each client's output.
//!
//! A workload knows nothing of namespaces, pinning or rounds (mod.rs owns those): it turns the
//! server's address into argument vectors and client output into samples, and it fails on output
//! that shows an error, because a faster wrong answer is not a result.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// The workloads `pronghorn bench` knows.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Name {
    /// redis-benchmark SET/GET, -d 3, -c 50 and -c 1000, plain and -P 16.
    Redis,
    /// redis-benchmark with keep-alive off (-k 0): a connection per request.
    RedisCps,
    /// sockperf ping-pong, 64-byte messages.
    Latency,
    /// iperf3, 1 and 4 streams, both directions.
    Bulk,
    /// wrk against nginx, keep-alive and Connection: close.
    Http,
    /// Stack-level: N idle + 1 active connection over the in-memory NIC (no kernel path).
    Scale,
}

impl Name {
    pub fn as_str(self) -> &'static str {
        match self {
            Name::Redis => "redis",
            Name::RedisCps => "redis-cps",
            Name::Latency => "latency",
            Name::Bulk => "bulk",
            Name::Http => "http",
            Name::Scale => "scale",
        }
    }
}

/// One measured value: `case` names what was measured (e.g. "SET -c 50"), `metric` which figure.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    pub case: String,
    pub metric: &'static str,
    pub value: f64,
}

/// A metric's unit and which direction is better.
pub fn metric_info(metric: &str) -> (&'static str, bool) {
    match metric {
        "rps" => ("requests/s", true),
        "gbps" => ("Gbit/s", true),
        "p50_ms" | "p99_ms" => ("ms", false),
        "p50_us" | "p99_us" | "p999_us" => ("us", false),
        _ => ("", true),
    }
}

/// The server to start, on the address of the path under test.
pub struct Server {
    pub argv: Vec<String>,
    pub port: u16,
}

/// One client invocation; its output gives one or more samples.
pub struct Client {
    /// Short label for tables ("-c 50 -P 16").
    pub label: String,
    pub argv: Vec<String>,
    parse: fn(&Client, &str) -> Result<Vec<Sample>>,
}

impl Client {
    pub fn parse(&self, output: &str) -> Result<Vec<Sample>> {
        (self.parse)(self, output).with_context(|| format!("client `{}` gave unusable output", self.argv.join(" ")))
    }
}

/// A command run from the client side once the clients are done, and what its stdout must satisfy.
pub struct AfterCheck {
    pub argv: Vec<String>,
    pub check: fn(&str) -> Result<()>,
}

/// What a workload runs, for one path.
pub struct Plan {
    pub server: Server,
    pub clients: Vec<Client>,
    /// A check run from the client side after the clients.
    pub after: Option<AfterCheck>,
    /// One paragraph for the markdown summary: what runs and what the figures mean.
    pub about: &'static str,
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// The plan of `name` against a server at `addr`. `quick` shrinks counts for a smoke run; `dir`
/// is a scratch directory for files the server needs (nginx's config and pages).
pub fn plan(name: Name, addr: &str, quick: bool, dir: &Path) -> Result<Plan> {
    Ok(match name {
        Name::Redis => {
            let mut clients = Vec::new();
            for (conns, pipeline) in [(50, 1), (1000, 1), (50, 16), (1000, 16)] {
                if quick && pipeline > 1 {
                    continue;
                }
                // About 1.5-3 s per test at the rates seen here (quick: under one second).
                let n = match (quick, pipeline) {
                    (true, _) => 100_000,
                    (false, 1) => 300_000,
                    (false, _) => 2_000_000,
                };
                let mut a = argv(&["redis-benchmark", "-h", addr, "-p", "6379", "-t", "set,get", "-d", "3"]);
                a.extend(argv(&["-c", &conns.to_string(), "-n", &n.to_string(), "--csv"]));
                let mut label = format!("-c {conns}");
                if pipeline > 1 {
                    a.extend(argv(&["-P", &pipeline.to_string()]));
                    label += &format!(" -P {pipeline}");
                }
                clients.push(Client { label, argv: a, parse: parse_redis_csv });
            }
            Plan {
                server: redis_server(addr),
                clients,
                after: Some(AfterCheck {
                    argv: argv(&["redis-cli", "-h", addr, "-p", "6379", "GET", "key:__rand_int__"]),
                    check: check_redis_value,
                }),
                about: "redis-benchmark (one client process, single-threaded) runs SET and GET with 3-byte values \
                        against one redis-server; rps is requests per second, p50/p99 are redis-benchmark's \
                        per-request latency percentiles. After the runs, GET of the benchmark's key must return a \
                        3-byte value.",
            }
        }
        Name::RedisCps => {
            let n = if quick { 5_000 } else { 60_000 };
            let clients = [50, 500]
                .into_iter()
                .filter(|&c| !quick || c == 50)
                .map(|conns| {
                    let mut a = argv(&["redis-benchmark", "-h", addr, "-p", "6379", "-t", "get", "-d", "3", "-k", "0"]);
                    a.extend(argv(&["-c", &conns.to_string(), "-n", &n.to_string(), "--csv"]));
                    Client { label: format!("-k 0 -c {conns}"), argv: a, parse: parse_redis_csv }
                })
                .collect();
            Plan {
                server: redis_server(addr),
                clients,
                after: None,
                about: "redis-benchmark with keep-alive off (-k 0): every GET opens a TCP connection, sends one \
                        request, reads the reply and closes, so rps counts connections (plus one request each) per \
                        second.",
            }
        }
        Name::Latency => {
            let secs = if quick { "2" } else { "10" };
            let a = argv(&["sockperf", "ping-pong", "-i", addr, "-p", "11111", "--tcp", "-m", "64", "-t", secs]);
            Plan {
                server: Server { argv: argv(&["sockperf", "server", "-i", addr, "-p", "11111", "--tcp"]), port: 11111 },
                clients: vec![Client { label: "ping-pong 64 B".into(), argv: a, parse: parse_sockperf }],
                after: None,
                about: "sockperf ping-pong over TCP, 64-byte messages, one outstanding at a time. Figures are \
                        sockperf's: half the round trip, in microseconds. Runs with dropped, duplicated or \
                        out-of-order messages are rejected.",
            }
        }
        Name::Bulk => {
            let secs = if quick { "2" } else { "10" };
            let mut clients = Vec::new();
            for streams in ["1", "4"] {
                for reverse in [false, true] {
                    let mut a = argv(&["iperf3", "-c", addr, "-p", "5201", "-t", secs, "-J", "-P", streams]);
                    if reverse {
                        a.push("-R".into());
                    }
                    let dir = if reverse { "from server" } else { "to server" };
                    clients.push(Client { label: format!("-P {streams} {dir}"), argv: a, parse: parse_iperf3 });
                }
            }
            Plan {
                server: Server { argv: argv(&["iperf3", "-s", "-B", addr, "-p", "5201"]), port: 5201 },
                clients,
                after: None,
                about: "iperf3 TCP, 1 and 4 parallel streams, client to server and server to client (-R); the \
                        figure is the receiver's goodput.",
            }
        }
        Name::Http => {
            let www = dir.join("www");
            std::fs::create_dir_all(&www)?;
            std::fs::write(www.join("index.html"), PAGE)?;
            let d = dir.display();
            let conf = dir.join("nginx.conf");
            std::fs::write(
                &conf,
                format!(
                    "daemon off; master_process off; worker_processes 1; user root;\n\
                     error_log {d}/error.log; pid {d}/nginx.pid; worker_rlimit_nofile 8192;\n\
                     events {{ worker_connections 4096; }}\n\
                     http {{ access_log off; sendfile on; keepalive_requests 1000000; client_body_temp_path {d};\n\
                     proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
                     server {{ listen {addr}:8080; root {d}/www; }} }}\n"
                ),
            )?;
            let secs = if quick { "2s" } else { "10s" };
            let url = format!("http://{addr}:8080/index.html");
            let clients = vec![
                Client {
                    label: "keep-alive -c 50".into(),
                    argv: argv(&["wrk", "-t1", "-c50", "-d", secs, "--latency", &url]),
                    parse: parse_wrk,
                },
                Client {
                    label: "close -c 50".into(),
                    argv: argv(&["wrk", "-t1", "-c50", "-d", secs, "--latency", "-H", "Connection: close", &url]),
                    parse: parse_wrk,
                },
            ];
            Plan {
                server: Server { argv: vec!["nginx".into(), "-c".into(), conf.display().to_string()], port: 8080 },
                clients,
                after: Some(AfterCheck { argv: argv(&["curl", "-sf", &url]), check: check_page }),
                about: "wrk (one thread, 50 connections) fetches a 1 KiB static page from nginx (one process: \
                        master_process off, one worker), with keep-alive and with Connection: close. Any non-2xx \
                        response or socket error rejects the run; afterwards the page fetched with curl must be \
                        byte-identical.",
            }
        }
        Name::Scale => bail!("scale has no server: it runs bench/stack_scale.sh"),
    })
}

const PAGE: &str = concat!(
    "<!DOCTYPE html><html><head><title>pronghorn bench</title></head><body>\n",
    "<p>This page is served by nginx for pronghorn's http benchmark. Its size is a little over one\n",
    "kibibyte so that the response fits in one segment with its headers, like a small dynamic page.</p>\n",
    "<p>0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab</p>\n",
    "<p>0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab</p>\n",
    "<p>0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab</p>\n",
    "<p>0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab</p>\n",
    "<p>0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab</p>\n",
    "<p>0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab</p>\n",
    "<p>0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab</p>\n",
    "</body></html>\n"
);

fn redis_server(addr: &str) -> Server {
    Server {
        argv: argv(&[
            "redis-server",
            "--bind",
            addr,
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            "--maxclients",
            "10000",
        ]),
        port: 6379,
    }
}

/// redis-benchmark --csv: a header line, then `"SET","rps","avg","min","p50","p95","p99","max"`.
fn parse_redis_csv(client: &Client, out: &str) -> Result<Vec<Sample>> {
    if out.contains("ERR") || out.contains("Error") || out.contains("error") {
        bail!("redis-benchmark reported an error: {}", first_line_with(out, &["ERR", "rror"]));
    }
    let mut samples = Vec::new();
    for line in out.lines().filter(|l| l.starts_with('"') && !l.starts_with("\"test\"")) {
        let f: Vec<&str> = line.split(',').map(|s| s.trim_matches('"')).collect();
        if f.len() < 8 {
            bail!("short CSV row {line:?}");
        }
        let num = |i: usize| f[i].parse::<f64>().with_context(|| format!("field {i} of {line:?} is not a number"));
        let case = format!("{} {}", f[0], client.label);
        samples.push(Sample { case: case.clone(), metric: "rps", value: num(1)? });
        samples.push(Sample { case: case.clone(), metric: "p50_ms", value: num(4)? });
        samples.push(Sample { case, metric: "p99_ms", value: num(6)? });
    }
    if samples.is_empty() {
        bail!("no CSV rows in {out:?}");
    }
    Ok(samples)
}

fn check_redis_value(out: &str) -> Result<()> {
    let v = out.trim_end_matches('\n');
    if v.len() != 3 {
        bail!("GET key:__rand_int__ returned {v:?}, not the 3-byte value redis-benchmark -d 3 set");
    }
    Ok(())
}

fn check_page(out: &str) -> Result<()> {
    if out != PAGE {
        bail!(
            "the page fetched after the run differs from the one served ({} bytes, expected {})",
            out.len(),
            PAGE.len()
        );
    }
    Ok(())
}

fn first_line_with<'a>(out: &'a str, needles: &[&str]) -> &'a str {
    out.lines().find(|l| needles.iter().any(|n| l.contains(n))).unwrap_or("").trim()
}

/// sockperf ping-pong: `# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0`
/// and `---> percentile 99.000 =   88.785` lines (microseconds, half round trip).
fn parse_sockperf(client: &Client, out: &str) -> Result<Vec<Sample>> {
    let health = out.lines().find(|l| l.contains("# dropped messages")).context("no message accounting line")?;
    let bad: Vec<&str> = health.split(';').filter(|part| part.rsplit('=').next().map(str::trim) != Some("0")).collect();
    if !bad.is_empty() {
        bail!("sockperf saw lost or misordered messages: {}", health.trim());
    }
    let pct = |p: &str| -> Result<f64> {
        let line = out
            .lines()
            .find(|l| l.contains(&format!("percentile {p} =")))
            .with_context(|| format!("no percentile {p} line"))?;
        let v = line.rsplit('=').next().unwrap_or("").trim();
        v.parse().with_context(|| format!("percentile {p} is {v:?}"))
    };
    let case = client.label.clone();
    Ok(vec![
        Sample { case: case.clone(), metric: "p50_us", value: pct("50.000")? },
        Sample { case: case.clone(), metric: "p99_us", value: pct("99.000")? },
        Sample { case, metric: "p999_us", value: pct("99.900")? },
    ])
}

/// iperf3 -J: `end.sum_received.bits_per_second`; an `error` key rejects the run.
fn parse_iperf3(client: &Client, out: &str) -> Result<Vec<Sample>> {
    let v: serde_json::Value = serde_json::from_str(out).context("iperf3 -J output is not JSON")?;
    if let Some(e) = v.get("error") {
        bail!("iperf3 reported an error: {e}");
    }
    let bps = v["end"]["sum_received"]["bits_per_second"].as_f64().context("no end.sum_received.bits_per_second")?;
    if bps <= 0.0 {
        bail!("iperf3 moved no data");
    }
    Ok(vec![Sample { case: client.label.clone(), metric: "gbps", value: bps / 1e9 }])
}

/// wrk --latency: `Requests/sec:  63430.13` and the latency distribution (`50%  626.00us`).
fn parse_wrk(client: &Client, out: &str) -> Result<Vec<Sample>> {
    for bad in ["Non-2xx", "Socket errors"] {
        if out.contains(bad) {
            bail!("wrk reported errors: {}", first_line_with(out, &[bad]));
        }
    }
    let rps = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .context("no Requests/sec line")?
        .trim()
        .parse::<f64>()?;
    let pct = |p: &str| -> Result<f64> {
        let line = out
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with(&format!("{p}%")))
            .with_context(|| format!("no {p}% latency line"))?;
        parse_duration_ms(line.split_whitespace().nth(1).unwrap_or(""))
    };
    let case = client.label.clone();
    Ok(vec![
        Sample { case: case.clone(), metric: "rps", value: rps },
        Sample { case: case.clone(), metric: "p50_ms", value: pct("50")? },
        Sample { case, metric: "p99_ms", value: pct("99")? },
    ])
}

/// wrk's durations: `626.00us`, `1.10ms`, `2.01s`.
fn parse_duration_ms(s: &str) -> Result<f64> {
    let (num, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else {
        bail!("{s:?} is not a wrk duration")
    };
    Ok(num.parse::<f64>().with_context(|| format!("{s:?} is not a wrk duration"))? * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(label: &str) -> Client {
        Client { label: label.into(), argv: vec![], parse: parse_redis_csv }
    }

    #[test]
    fn redis_csv_gives_rps_and_percentiles_per_test() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"SET\",\"121065.38\",\"0.219\",\"0.064\",\"0.223\",\"0.263\",\"0.311\",\"1.047\"\n\
                   \"GET\",\"119904.08\",\"0.220\",\"0.048\",\"0.223\",\"0.263\",\"0.303\",\"1.031\"\n";
        let s = parse_redis_csv(&client("-c 50"), out).unwrap();
        assert_eq!(s.len(), 6);
        assert_eq!(s[0].case, "SET -c 50");
        assert_eq!((s[0].metric, s[0].value), ("rps", 121065.38));
        assert_eq!((s[5].case.as_str(), s[5].metric, s[5].value), ("GET -c 50", "p99_ms", 0.303));
        assert!(parse_redis_csv(&client("x"), "Error: Connection reset by peer\n").is_err());
        assert!(parse_redis_csv(&client("x"), "").is_err());
    }

    #[test]
    fn sockperf_rejects_lost_messages() {
        let good = "sockperf: # dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0\n\
                    sockperf: ---> percentile 99.900 =  686.897\n\
                    sockperf: ---> percentile 99.000 =   88.785\n\
                    sockperf: ---> percentile 50.000 =   45.874\n";
        let s = parse_sockperf(&client("pp"), good).unwrap();
        assert_eq!(s.iter().map(|s| s.value).collect::<Vec<_>>(), [45.874, 88.785, 686.897]);
        let bad = good.replace("duplicated messages = 0", "duplicated messages = 3");
        assert!(parse_sockperf(&client("pp"), &bad).unwrap_err().to_string().contains("duplicated messages = 3"));
    }

    #[test]
    fn iperf3_json_gives_gbps_and_rejects_errors() {
        let s = parse_iperf3(&client("-P 1"), r#"{"end":{"sum_received":{"bits_per_second":6.5e9}}}"#).unwrap();
        assert_eq!(s[0].value, 6.5);
        assert!(parse_iperf3(&client("-P 1"), r#"{"error":"unable to connect"}"#).is_err());
    }

    #[test]
    fn wrk_output_gives_rps_and_latency_in_ms() {
        let out = "  Latency Distribution\n     50%  626.00us\n     75%    1.00ms\n     99%    1.10ms\n\
                   634500 requests in 10.00s, 514.07MB read\nRequests/sec:  63430.13\n";
        let s = parse_wrk(&client("ka"), out).unwrap();
        assert_eq!(s[0].value, 63430.13);
        assert!((s[1].value - 0.626).abs() < 1e-9 && (s[2].value - 1.10).abs() < 1e-9);
        let errs = format!("{out}  Socket errors: connect 0, read 12, write 0, timeout 0\n");
        assert!(parse_wrk(&client("ka"), &errs).is_err());
        assert!((parse_duration_ms("2.01s").unwrap() - 2010.0).abs() < 1e-9);
        assert!(parse_duration_ms("12").is_err());
    }

    #[test]
    fn plans_point_clients_at_the_address_under_test() {
        let dir = std::env::temp_dir().join(format!("ph-plan-{}", std::process::id()));
        for name in [Name::Redis, Name::RedisCps, Name::Latency, Name::Bulk, Name::Http] {
            let p = plan(name, "10.98.0.1", true, &dir).unwrap();
            assert!(p.server.argv.join(" ").contains("10.98.0.1") || name == Name::Http, "{name:?}");
            assert!(p.clients.iter().all(|c| c.argv.join(" ").contains("10.98.0.1")), "{name:?}");
        }
        let conf = std::fs::read_to_string(dir.join("nginx.conf")).unwrap();
        assert!(conf.contains("listen 10.98.0.1:8080"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
