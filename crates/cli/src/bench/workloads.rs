//! The workloads of BENCHMARKS.md that run today: what server to start, which real clients to run
//! against it, and how to read (and check) each client's output.
//!
//! A workload knows nothing of namespaces, pinning or rounds (mod.rs owns those): it turns the
//! server's address into argument vectors and client output into samples, and it fails on output
//! that shows an error, because a faster wrong answer is not a result.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::postgres;

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
    /// sysbench OLTP (point select, read-only, read/write) against mariadbd, 16 and 128 threads.
    Mariadb,
    /// go-tpc TPC-C, 2 warehouses, 16 threads, against mariadbd.
    Tpcc,
    /// Stack-level: N idle + 1 active connection over the in-memory NIC (no kernel path).
    Scale,
    /// redis-benchmark GET (kept connections and a connection per request) with and without a
    /// bounded SYN flood from a second address of side b (bench/syn_flood.sh, hping3).
    SynFlood,
    /// Redis full resync of 1 GiB (--quick: 64 MiB) between the server and a kernel
    /// redis-server in side b, both ways: the server as master, then as replica
    /// (bench/resync.sh; diskless sync and load).
    Resync,
    /// pgbench against PostgreSQL 15 (pronghorn's path under the postgres profile): select-only
    /// at 16 and 64 clients, the TPC-B-like mix at 16, 64 and 4, select-only with a connection per
    /// transaction (-C) at 16.
    Pgbench,
}

impl Name {
    pub fn as_str(self) -> &'static str {
        match self {
            Name::Redis => "redis",
            Name::RedisCps => "redis-cps",
            Name::Latency => "latency",
            Name::Bulk => "bulk",
            Name::Http => "http",
            Name::Mariadb => "mariadb",
            Name::Tpcc => "tpcc",
            Name::Scale => "scale",
            Name::SynFlood => "syn-flood",
            Name::Resync => "resync",
            Name::Pgbench => "pgbench",
        }
    }

    /// The binary of the server's own code, as perf names it (`--sample-server`); None: the
    /// workload is not sampled (its server's code is in a library, or it has no server).
    pub fn app_binary(self) -> Option<&'static str> {
        match self {
            Name::Mariadb | Name::Tpcc => Some("mariadbd"),
            // Debian's redis-server is a link to redis-check-rdb.
            Name::Redis | Name::RedisCps => Some("redis-check-rdb"),
            Name::Http => Some("nginx"),
            Name::Latency => Some("sockperf"),
            Name::Pgbench => Some("postgres"),
            _ => None,
        }
    }

    /// Whether its client counts the transactions it completed (a `transactions` sample, which
    /// becomes the server's CPU per transaction; `--count-server` divides by it too).
    pub fn counts_transactions(self) -> bool {
        matches!(self, Name::Pgbench | Name::Mariadb)
    }

    /// The profile pronghorn's path runs under unless --profile names one: the server cannot be
    /// served without it.
    pub fn profile(self) -> Option<&'static str> {
        match self {
            // The postmaster's forked backends serve their connections on its stack.
            Name::Pgbench => Some("postgres"),
            _ => None,
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

/// The unit of `server_core_per_app` (`--sample-server`), a ratio shown with two decimals.
pub const PER_APP_UNIT: &str = "server-core busy time per unit of the application's own code";

/// The unit of `kernel_net_percent` (`--sample-server`).
pub const NET_PERCENT_UNIT: &str = "% of the server cores' busy time in the kernel's network code";

/// A metric's unit and which direction is better.
pub fn metric_info(metric: &str) -> (&'static str, bool) {
    match metric {
        "rps" => ("requests/s", true),
        "tps" => ("transactions/s", true),
        "qps" => ("queries/s", true),
        "tpmC" => ("new orders/min", true),
        "gbps" => ("Gbit/s", true),
        "p50_ms" | "p95_ms" | "p99_ms" => ("ms", false),
        "deadlocks" => ("retried", false),
        "p50_us" | "p99_us" | "p999_us" => ("us", false),
        "syns_per_s" => ("SYNs/s sent by the flood", true),
        "seconds" => ("s", false),
        "latency_avg_ms" => ("ms", false),
        "server_cpu_us_per_tx" => ("us of server-core CPU per transaction", false),
        "server_core_per_app" => (PER_APP_UNIT, false),
        "kernel_net_percent" => (NET_PERCENT_UNIT, false),
        "server_syscalls_per_tx" => ("system calls on the server cores per transaction", false),
        "server_switches_per_tx" => ("context switches on the server cores per transaction", false),
        "mb_per_s" => ("MB/s of values", true),
        "TcpOutSegs" | "TcpRetransSegs" => ("segments", false),
        m if m.starts_with("TcpExt") => ("count", true),
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

/// Work done once per path before its first round, not timed: `local` commands on this machine
/// (a fresh datadir), then, with the server started, `prepare` clients from the client side.
pub struct Setup {
    pub local: Vec<Vec<String>>,
    pub prepare: Vec<Vec<String>>,
}

/// What a workload runs, for one path.
pub struct Plan {
    pub server: Server,
    /// Once per path, before the rounds (a database to fill).
    pub setup: Option<Setup>,
    pub clients: Vec<Client>,
    /// A check run from the client side after the clients.
    pub after: Option<AfterCheck>,
    /// One paragraph for the markdown summary: what runs and what the figures mean.
    pub about: String,
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// The server's MIB counters (nstat's names, which `pronghorn stat` shares) that `name` reports:
/// their increase over each client run is a sample of that run.
pub fn server_counters(name: Name) -> &'static [&'static str] {
    match name {
        Name::SynFlood => {
            &["TcpExtSyncookiesSent", "TcpExtSyncookiesRecv", "TcpExtSyncookiesFailed", "TcpExtListenOverflows"]
        }
        Name::Resync => &["TcpOutSegs", "TcpRetransSegs"],
        _ => &[],
    }
}

/// The server's processes (http only): how many nginx workers, and whether pronghorn's path
/// runs them as a fork family on the master's stack (`runtime.share = "family"`) rather than
/// each on a queue of its own.
#[derive(Clone, Copy, Debug)]
pub struct Workers {
    pub count: u16,
    pub family: bool,
}

#[cfg(test)]
impl Workers {
    pub const ONE: Workers = Workers { count: 1, family: false };
}

/// The plan of `name` against a server at `addr`. `quick` shrinks counts for a smoke run; `dir`
/// is a scratch directory for files the server needs (nginx's config and pages); `workers`:
/// nginx's processes.
pub fn plan(name: Name, addr: &str, quick: bool, dir: &Path, workers: Workers) -> Result<Plan> {
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
                setup: None,
                clients,
                after: Some(AfterCheck {
                    argv: argv(&["redis-cli", "-h", addr, "-p", "6379", "GET", "key:__rand_int__"]),
                    check: check_redis_value,
                }),
                about: "redis-benchmark (one client process, single-threaded) runs SET and GET with 3-byte values \
                        against one redis-server; rps is requests per second, p50/p99 are redis-benchmark's \
                        per-request latency percentiles. After the runs, GET of the benchmark's key must return a \
                        3-byte value."
                    .into(),
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
                setup: None,
                clients,
                after: None,
                about: "redis-benchmark with keep-alive off (-k 0): every GET opens a TCP connection, sends one \
                        request, reads the reply and closes, so rps counts connections (plus one request each) per \
                        second."
                    .into(),
            }
        }
        Name::Latency => {
            let secs = if quick { "2" } else { "10" };
            let a = argv(&["sockperf", "ping-pong", "-i", addr, "-p", "11111", "--tcp", "-m", "64", "-t", secs]);
            Plan {
                server: Server { argv: argv(&["sockperf", "server", "-i", addr, "-p", "11111", "--tcp"]), port: 11111 },
                setup: None,
                clients: vec![Client { label: "ping-pong 64 B".into(), argv: a, parse: parse_sockperf }],
                after: None,
                about: "sockperf ping-pong over TCP, 64-byte messages, one outstanding at a time. Figures are \
                        sockperf's: half the round trip, in microseconds. Runs with dropped, duplicated or \
                        out-of-order messages are rejected."
                    .into(),
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
                setup: None,
                clients,
                after: None,
                about: "iperf3 TCP, 1 and 4 parallel streams, client to server and server to client (-R); the \
                        figure is the receiver's goodput."
                    .into(),
            }
        }
        Name::Http => {
            let www = dir.join("www");
            std::fs::create_dir_all(&www)?;
            std::fs::write(www.join("index.html"), PAGE)?;
            let d = dir.display();
            let conf = dir.join("nginx.conf");
            let processes = if workers.count > 1 {
                format!("master_process on; worker_processes {};", workers.count)
            } else {
                "master_process off; worker_processes 1;".into()
            };
            std::fs::write(
                &conf,
                format!(
                    "daemon off; {processes} user root;\n\
                     error_log {d}/error.log; pid {d}/nginx.pid; worker_rlimit_nofile 8192;\n\
                     events {{ worker_connections 4096; }}\n\
                     http {{ access_log off; sendfile on; keepalive_requests 1000000; client_body_temp_path {d};\n\
                     proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
                     server {{ listen {addr}:8080; root {d}/www; }} }}\n"
                ),
            )?;
            let secs = if quick { "2s" } else { "10s" };
            let url = format!("http://{addr}:8080/index.html");
            let server_is = if workers.count > 1 && workers.family {
                format!(
                    "a master and {} worker processes; under pronghorn a fork family (runtime.share = \"family\"): \
                     the master drives the NIC's one queue and the workers serve on its stack",
                    workers.count
                )
            } else if workers.count > 1 {
                format!(
                    "a master and {} worker processes, each on a NIC queue of its own under pronghorn",
                    workers.count
                )
            } else {
                "one process: master_process off, one worker".into()
            };
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
                setup: None,
                clients,
                after: Some(AfterCheck { argv: argv(&["curl", "-sf", &url]), check: check_page }),
                about: format!(
                    "wrk (one thread, 50 connections) fetches a 1 KiB static page from nginx ({server_is}), with \
                     keep-alive and with Connection: close. Any non-2xx response or socket error rejects the run; \
                     afterwards the page fetched with curl must be byte-identical."
                ),
            }
        }
        Name::Mariadb => {
            let (server, local) = mariadb(addr, dir, "sbtest")?;
            require("sysbench", "sysbench")?;
            let sysbench = |words: &[&str]| {
                let mut a = argv(&["sysbench", "--db-driver=mysql", "--mysql-port=3306", "--mysql-user=bench"]);
                a.extend([format!("--mysql-host={addr}"), "--mysql-db=sbtest".into()]);
                a.extend([format!("--tables={SB_TABLES}"), format!("--table-size={SB_TABLE_SIZE}")]);
                // A deadlock is retried (and counted); any other error ends sysbench with a failure.
                a.push("--mysql-ignore-errors=1213".into());
                a.extend(argv(words));
                a
            };
            let secs = if quick { "--time=5" } else { "--time=20" };
            let mut clients = Vec::new();
            for test in ["point_select", "read_only", "read_write"] {
                for threads in [16, 128] {
                    if quick && threads > 16 {
                        continue;
                    }
                    let t = format!("--threads={threads}");
                    clients.push(Client {
                        label: format!("{test} {threads} thr"),
                        argv: sysbench(&[&t, secs, &format!("oltp_{test}"), "run"]),
                        parse: parse_sysbench,
                    });
                }
            }
            let counts: Vec<String> = (1..=SB_TABLES)
                .map(|t| format!("SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM sbtest.sbtest{t}"))
                .collect();
            Plan {
                server,
                setup: Some(Setup {
                    local,
                    prepare: vec![sysbench(&["oltp_read_write", "prepare"]), analyze(addr, "sbtest")],
                }),
                clients,
                after: Some(AfterCheck {
                    argv: mariadb_query(addr, &counts.join(" UNION ALL ")),
                    check: check_sbtest_rows,
                }),
                about: "sysbench 1.0 OLTP against mariadbd (started as Debian starts it: as root with --user=mysql), \
                        4 tables of 100,000 rows prepared once per path before the rounds: oltp_point_select \
                        (one primary-key SELECT per transaction), oltp_read_only (14 SELECTs) and oltp_read_write \
                        (those plus 2 UPDATEs, a DELETE and an INSERT), at 16 and 128 client threads. tps and qps \
                        are sysbench's transactions and queries per second, p95 its 95th-percentile transaction \
                        latency; server_cpu_us_per_tx is the server core's busy time (/proc/stat, every task on \
                        it) over the transactions sysbench completed. Any error but a deadlock, or any reconnect, rejects the run; deadlocks (InnoDB \
                        picks a victim, sysbench retries it) are counted. After the runs every table must still \
                        hold ids 1 to 100,000 exactly once."
                    .into(),
            }
        }
        Name::Tpcc => {
            let go_tpc = go_tpc()?.display().to_string();
            let (server, local) = mariadb(addr, dir, "tpcc")?;
            let tpcc = |words: &[&str]| {
                let mut a = argv(&[&go_tpc, "tpcc", "--warehouses", "2", "-H", addr, "-P", "3306", "-U", "bench"]);
                a.extend(argv(&["-D", "tpcc"]));
                a.extend(argv(words));
                a
            };
            let secs = if quick { "10s" } else { "30s" };
            Plan {
                server,
                setup: Some(Setup {
                    local,
                    prepare: vec![tpcc(&["prepare", "-T", "4", "--no-check"]), analyze(addr, "tpcc")],
                }),
                clients: vec![Client {
                    label: "2 warehouses -T 16".into(),
                    argv: tpcc(&["run", "-T", "16", "--time", secs, "--interval", "1h"]),
                    parse: parse_go_tpc,
                }],
                after: Some(AfterCheck { argv: mariadb_query(addr, TPCC_CONSISTENCY), check: check_zero }),
                about: "go-tpc TPC-C (the mix of NEW_ORDER, PAYMENT, ORDER_STATUS, DELIVERY and STOCK_LEVEL, no \
                        keying or think time) with 2 warehouses, prepared once per path before the rounds, and 16 \
                        client threads, against mariadbd (started as Debian starts it: as root with --user=mysql). \
                        tpmC is NEW_ORDER transactions per minute; NEW_ORDER p99 is go-tpc's 99th-percentile \
                        latency of that transaction. Any failed transaction rejects the run. Afterwards TPC-C's \
                        consistency conditions 1-3 (warehouse and district year-to-date totals, order ids, new-order \
                        ids) must hold."
                    .into(),
            }
        }
        Name::SynFlood => {
            require("hping3", "hping3")?;
            let script = super::repo_file("bench/syn_flood.sh")
                .context("bench/syn_flood.sh not found: run from the repository root")?;
            let max_syns = if quick { "200000" } else { "1000000" };
            let mut clients = Vec::new();
            // The flood's half-open connections outlive it (SYN-ACKs are retransmitted for a
            // minute), so every case without flood runs first.
            for flood in [false, true] {
                for keepalive in [true, false] {
                    let (n, k, mode) = match (quick, keepalive) {
                        (true, true) => ("50000", "1", "-c 50"),
                        (false, true) => ("300000", "1", "-c 50"),
                        (true, false) => ("5000", "0", "-k 0 -c 50"),
                        (false, false) => ("30000", "0", "-k 0 -c 50"),
                    };
                    let bench = argv(&[
                        "redis-benchmark",
                        "-h",
                        addr,
                        "-p",
                        "6379",
                        "-t",
                        "get",
                        "-d",
                        "3",
                        "-c",
                        "50",
                        "-k",
                        k,
                        "-n",
                        n,
                        "--csv",
                    ]);
                    let mut a = Vec::new();
                    if flood {
                        a.extend(argv(&["bash", &script.display().to_string(), addr, "6379", max_syns, "--"]));
                    }
                    a.extend(bench);
                    let label = format!("{mode}{}", if flood { " SYN flood" } else { "" });
                    clients.push(Client { label, argv: a, parse: parse_redis_under_flood });
                }
            }
            Plan {
                server: redis_server(addr),
                setup: None,
                clients,
                after: None,
                about: "redis-benchmark GET (-d 3, 50 clients; kept connections, and -k 0: a new connection per \
                        request) against one redis-server, each case with no flood and then during a SYN flood: \
                        bench/syn_flood.sh sends at most 1,000,000 SYNs (quick: 200,000) with hping3 to the server's \
                        port from a second address of side b whose RSTs are dropped, for as long as the client runs, \
                        on the client's core. The figure that matters is each path's rps under flood over its rps \
                        without (the issue asks for at least half); syns_per_s is the flood's rate as hping3 counted \
                        it."
                .into(),
            }
        }
        Name::Resync => {
            require("redis-server", "redis-server")?;
            require("redis-cli", "redis-tools")?;
            let script = super::repo_file("bench/resync.sh")
                .context("bench/resync.sh not found: run from the repository root")?;
            resync(addr, quick, dir, &script)?
        }
        Name::Pgbench => pgbench(addr, quick, dir)?,
        Name::Scale => bail!("scale has no server: it runs bench/stack_scale.sh"),
    })
}

/// The resync plan, with bench/resync.sh at `script`: the server in side a is master to a
/// replica in side b, then replica of a master there.
fn resync(addr: &str, quick: bool, dir: &Path, script: &Path) -> Result<Plan> {
    let keys = if quick { RESYNC_QUICK_KEYS } else { RESYNC_KEYS };
    let peer = side_b_addr(addr)?;
    let side_b_dir = dir.join("side-b").display().to_string();
    let clients = [("a-to-b", "master a, replica b"), ("b-to-a", "master b, replica a")]
        .into_iter()
        .map(|(direction, label)| Client {
            label: label.into(),
            argv: argv(&[
                "bash",
                &script.display().to_string(),
                direction,
                addr,
                &peer,
                &keys.to_string(),
                &RESYNC_VALUE_BYTES.to_string(),
                &side_b_dir,
            ]),
            parse: parse_resync,
        })
        .collect();
    let mut server = redis_server(addr);
    server.argv.extend(argv(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--repl-diskless-load",
        "swapdb",
        "--rdbcompression",
        "no",
        "--enable-debug-command",
        "yes",
        "--dir",
        &dir.display().to_string(),
    ]));
    Ok(Plan {
        server,
        setup: None,
        clients,
        after: None,
        about: format!(
            "A Redis full resynchronisation of {} MiB of values (DEBUG POPULATE: {keys} keys of \
             {RESYNC_VALUE_BYTES} bytes) between the redis-server under test (side a) and a kernel \
             redis-server in side b (bench/resync.sh): `master a, replica b` fills the server and makes side \
             b's a replica of it (the server sends the dataset), `master b, replica a` fills side b's and makes \
             the server its replica (the server receives it). Both are started for both roles: diskless sync \
             (repl-diskless-sync-delay 0, rdbcompression no: the values go on the wire as they are), diskless \
             load (repl-diskless-load swapdb), nothing saved. seconds is from REPLICAOF to the replica \
             reporting master_link_status:up with loading:0 and every key (polled every 10 ms; filling is not \
             timed), MB/s the values' bytes over that time; afterwards the replica's DEBUG DIGEST must equal \
             the master's. The server's TcpOutSegs and TcpRetransSegs over each run (nstat of side a on the \
             kernel path, `pronghorn stat` on pronghorn's) are beside them.",
            (keys * RESYNC_VALUE_BYTES) >> 20
        ),
    })
}

/// The resync's dataset: 1 GiB of values (--quick: 64 MiB) in keys of RESYNC_VALUE_BYTES.
const RESYNC_VALUE_BYTES: u64 = 1024;
const RESYNC_KEYS: u64 = (1 << 30) / RESYNC_VALUE_BYTES;
const RESYNC_QUICK_KEYS: u64 = (64 << 20) / RESYNC_VALUE_BYTES;

/// Side b's end of the path whose side a is `addr` (the lab gives it host 2 of the same /24).
fn side_b_addr(addr: &str) -> Result<String> {
    let ip: std::net::Ipv4Addr = addr.parse().with_context(|| format!("{addr} is not an IPv4 address"))?;
    let [a, b, c, _] = ip.octets();
    Ok(format!("{a}.{b}.{c}.2"))
}

/// bench/resync.sh: `resync: KEYS keys of BYTES bytes in S s` once the replica has every key and
/// the same digest as its master (the script fails otherwise).
fn parse_resync(client: &Client, out: &str) -> Result<Vec<Sample>> {
    let line = out.lines().find_map(|l| l.strip_prefix("resync: ")).context("no `resync:` line")?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let (Some(keys), Some(bytes), Some(secs)) = (
        w.first().and_then(|n| n.parse::<f64>().ok()),
        w.get(3).and_then(|n| n.parse::<f64>().ok()),
        w.get(6).and_then(|n| n.parse::<f64>().ok()),
    ) else {
        bail!("unreadable resync line {line:?}");
    };
    if keys <= 0.0 || secs <= 0.0 {
        bail!("the resync moved nothing or took no time: {line:?}");
    }
    let case = client.label.clone();
    Ok(vec![
        Sample { case: case.clone(), metric: "seconds", value: secs },
        Sample { case, metric: "mb_per_s", value: keys * bytes / 1e6 / secs },
    ])
}

/// pgbench's scale factor: PGBENCH_SCALE * 100,000 accounts (about 120 MiB with its index, in
/// postgres's default 128 MiB of shared buffers and well within this machine's memory), and as
/// many branches, the rows every TPC-B-like transaction updates (fewer would make 16 clients
/// queue on their row locks rather than on the network).
const PGBENCH_SCALE: u32 = 8;

/// pgbench's cases: label, options, and whether --quick runs it. Issue 24 asks for each query
/// kind at 16 and 64 clients; the mix at 64 queues on the 8 branches' row locks as much as on the
/// network, which is the server's behaviour on both paths. The mix at 4 clients is the
/// family's weakest case: with few requests in flight the stack thread's passes batch little,
/// and each statement pays its hops to the stack thread and back (docs/design-notes.md, "The
/// TPC-B-like mix by clients").
const PGBENCH_CASES: [(&str, &[&str], bool); 6] = [
    ("select-only -c 16", &["-S", "-c", "16"], true),
    ("select-only -c 64", &["-S", "-c", "64"], false),
    ("TPC-B-like -c 16", &["-c", "16"], true),
    ("TPC-B-like -c 64", &["-c", "64"], false),
    ("TPC-B-like -c 4", &["-c", "4"], false),
    ("select-only -C -c 16", &["-S", "-C", "-c", "16"], true),
];

/// The pgbench plan: PostgreSQL 15 as Debian starts it (postgres.rs) on a datadir of its own
/// under `dir`, filled by `pgbench -i` from the client side once per path, then each case for 20
/// s (--quick: 5 s).
fn pgbench(addr: &str, quick: bool, dir: &Path) -> Result<Plan> {
    require("pgbench", "postgresql-client-15")?;
    require("psql", "postgresql-client-15")?;
    require("setpriv", "util-linux")?;
    require("runuser", "util-linux")?;
    if !Path::new(postgres::BIN).join("postgres").is_file() {
        bail!("{}/postgres is not installed: install the Debian package postgresql-15", postgres::BIN);
    }
    let home = dir.join("postgres");
    let data = home.join("data");
    // Side b's clients of both paths, without a password.
    let hba = dir.join("pg_hba.conf");
    let rules = ["10.98.0.0/24", "10.99.0.0/24"].map(postgres::trust_host).concat();
    std::fs::write(&hba, format!("local all all trust\n{rules}"))?;
    let hba_file = format!("hba_file={}", hba.display());
    // A commit does not wait for its WAL to reach the disk (both paths alike): the figures are
    // the network's and the server's, not this machine's disk's.
    let settings = [hba_file.as_str(), "synchronous_commit=off"];
    let server = Server { argv: postgres::server(&data, addr, &home, &settings), port: 5432 };
    let pgbench = |words: &[&str]| {
        let mut a = argv(&["pgbench", "-h", addr, "-U", "postgres"]);
        a.extend(argv(words));
        a.push("postgres".into());
        a
    };
    let secs = if quick { "5" } else { "20" };
    let clients = PGBENCH_CASES
        .iter()
        .filter(|(_, _, in_quick)| !quick || *in_quick)
        .map(|(label, options, _)| {
            // -n: no vacuum (it would truncate pgbench_history, which the check after the runs sums).
            let mut a = pgbench(&["-n", "-j", "4", "-T", secs]);
            a.splice(a.len() - 1..a.len() - 1, argv(options));
            Client { label: label.to_string(), argv: a, parse: parse_pgbench }
        })
        .collect();
    let home_dir = home.display().to_string();
    Ok(Plan {
        server,
        setup: Some(Setup {
            local: vec![
                argv(&["install", "-d", "-o", "postgres", "-g", "postgres", &home_dir]),
                postgres::initdb(&data),
            ],
            prepare: vec![pgbench(&["-i", "-s", &PGBENCH_SCALE.to_string(), "-q"])],
        }),
        clients,
        after: Some(AfterCheck {
            argv: argv(&["psql", "-h", addr, "-U", "postgres", "-Atc", PGBENCH_BALANCES, "postgres"]),
            check: check_pgbench_balances,
        }),
        about: format!(
            "pgbench (PostgreSQL 15's, 4 threads) against Debian's PostgreSQL 15 (started as Debian starts it, as \
             the postgres user, here through setpriv; synchronous_commit=off on both paths: commits do not wait \
             for the disk). pronghorn's path runs under `--profile postgres` (runtime.share = \"family\": the \
             postmaster drives the NIC, the backend it forks per connection serves it on the shared stack). \
             `pgbench -i -s {PGBENCH_SCALE}` ({} accounts) fills each path's datadir once, untimed. Cases: \
             select-only (-S, one primary-key SELECT per transaction) at 16 and 64 clients (--quick: 16), the \
             TPC-B-like mix (3 UPDATEs, a SELECT and an INSERT in a transaction) at 16, 64 and 4 clients \
             (--quick: 16), and select-only with a new connection, so a new backend, per transaction (-C) \
             at 16; {secs} s each, no vacuum between runs (-n). tps is pgbench's: without the initial \
             connection time, except for -C, where connecting is the work and is included. latency_avg_ms is \
             pgbench's average; server_cpu_us_per_tx is the server core's busy time (/proc/stat, every process \
             on it: postmaster, backends, pronghorn's threads, the kernel's work there) over the transactions \
             pgbench completed. \
             Any failed transaction or aborted client rejects the run. After the runs the TPC-B balances must \
             agree (accounts, tellers, branches and the history's deltas sum the same) and every account \
             must still be there.",
            PGBENCH_SCALE * 100_000
        ),
    })
}

/// TPC-B's invariant (every transaction adds the same delta to an account, its teller, its branch
/// and the history) and the number of accounts: `t|800000`.
const PGBENCH_BALANCES: &str = "SELECT \
    (SELECT sum(abalance) FROM pgbench_accounts) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history) \
    AND (SELECT sum(tbalance) FROM pgbench_tellers) = (SELECT sum(bbalance) FROM pgbench_branches) \
    AND (SELECT sum(abalance) FROM pgbench_accounts) = (SELECT sum(bbalance) FROM pgbench_branches), \
    (SELECT count(*) FROM pgbench_accounts)";

fn check_pgbench_balances(out: &str) -> Result<()> {
    let want = format!("t|{}", PGBENCH_SCALE * 100_000);
    if out.trim() != want {
        bail!("the pgbench tables disagree (balances equal, accounts; want {want:?}): {:?}", out.trim());
    }
    Ok(())
}

/// pgbench 15: `number of transactions actually processed: 24856`, `number of failed
/// transactions: 0 (0.000%)`, `latency average = 1.228 ms` and `tps = 13034.207979 (without
/// initial connection time)` (with -C: `(including reconnection times)`). A failed transaction
/// or an aborted client rejects the run. `transactions` (the count) is a sample for the caller
/// to turn into CPU per transaction.
fn parse_pgbench(client: &Client, out: &str) -> Result<Vec<Sample>> {
    if let Some(l) = out.lines().find(|l| l.contains("aborted")) {
        bail!("pgbench: {}", l.trim());
    }
    let value = |prefix: &str| -> Result<f64> {
        let rest =
            out.lines().find_map(|l| l.trim().strip_prefix(prefix)).with_context(|| format!("no `{prefix}` line"))?;
        let w = rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).find(|w| !w.is_empty()).unwrap_or("");
        w.parse().with_context(|| format!("`{prefix}` {rest:?}"))
    };
    let failed = value("number of failed transactions:")?;
    if failed > 0.0 {
        bail!("pgbench counted {failed} failed transactions");
    }
    let transactions = value("number of transactions actually processed:")?;
    if transactions == 0.0 {
        bail!("pgbench completed no transaction");
    }
    let case = client.label.clone();
    Ok(vec![
        Sample { case: case.clone(), metric: "tps", value: value("tps =")? },
        Sample { case: case.clone(), metric: "latency_avg_ms", value: value("latency average =")? },
        Sample { case, metric: "transactions", value: transactions },
    ])
}

/// The sysbench tables (prepared once per path; the same for --quick and full runs).
const SB_TABLES: u32 = 4;
const SB_TABLE_SIZE: u32 = 100_000;

/// TPC-C consistency conditions 1-3 (clause 3.3.2), as the number of warehouses and districts
/// that break one.
const TPCC_CONSISTENCY: &str = "SELECT \
    (SELECT COUNT(*) FROM tpcc.warehouse w WHERE w.w_ytd <> \
        (SELECT SUM(d.d_ytd) FROM tpcc.district d WHERE d.d_w_id = w.w_id)) + \
    (SELECT COUNT(*) FROM tpcc.district d WHERE d.d_next_o_id - 1 <> \
        (SELECT MAX(o.o_id) FROM tpcc.orders o WHERE o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id)) + \
    (SELECT COUNT(*) FROM tpcc.district d WHERE d.d_next_o_id - 1 <> \
        (SELECT MAX(n.no_o_id) FROM tpcc.new_order n WHERE n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id)) + \
    (SELECT COUNT(*) FROM tpcc.district d WHERE \
        (SELECT MAX(n.no_o_id) - MIN(n.no_o_id) + 1 - COUNT(*) FROM tpcc.new_order n \
         WHERE n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id) <> 0)";

/// Fails unless `tool` is on PATH, naming the Debian package that has it.
fn require(tool: &str, package: &str) -> Result<()> {
    if find_on_path(tool).is_none() {
        bail!("{tool} is not installed: install the Debian package {package} (bash scripts/setup.sh does)");
    }
    Ok(())
}

fn find_on_path(tool: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file())
}

/// go-tpc: on PATH, or where bench/go-tpc.sh builds it.
pub fn go_tpc() -> Result<std::path::PathBuf> {
    find_on_path("go-tpc").or_else(|| super::repo_file("target/go-tpc/bin/go-tpc")).context(
        "go-tpc is not available: build it with `bash bench/go-tpc.sh` (needs Go 1.21 or newer on PATH), \
         or put a go-tpc on PATH",
    )
}

/// mariadbd as Debian's package starts it (as root, becoming the mysql user through --user=mysql),
/// on a datadir of its own under `dir` with its socket and pid file beside it, and none of the
/// machine's option files (--no-defaults). The returned commands make that datadir (owned by
/// mysql); an init file, run at every start, creates the passwordless user `bench`@`%` and
/// `database`.
fn mariadb(addr: &str, dir: &Path, database: &str) -> Result<(Server, Vec<Vec<String>>)> {
    require("mariadbd", "mariadb-server")?;
    require("mariadb-install-db", "mariadb-server")?;
    require("mariadb", "mariadb-client")?;
    let home = dir.join("mariadb");
    let init = dir.join("init.sql");
    std::fs::write(
        &init,
        format!(
            "CREATE USER IF NOT EXISTS 'bench'@'%';\nGRANT ALL ON *.* TO 'bench'@'%';\n\
             CREATE DATABASE IF NOT EXISTS {database};\n"
        ),
    )?;
    let (h, i) = (home.display(), init.display());
    let server = Server {
        argv: [
            "mariadbd".to_string(),
            "--no-defaults".into(),
            "--user=mysql".into(),
            format!("--datadir={h}/data"),
            format!("--socket={h}/mysqld.sock"),
            format!("--pid-file={h}/mysqld.pid"),
            format!("--bind-address={addr}"),
            "--port=3306".into(),
            "--skip-log-bin".into(),
            "--skip-name-resolve".into(),
            "--max-connections=400".into(),
            "--innodb-buffer-pool-size=512M".into(),
            // Rounds restart the server: it reloads all the pages it had, not the default 25%.
            "--innodb-buffer-pool-dump-pct=100".into(),
            format!("--init-file={i}"),
        ]
        .into(),
        port: 3306,
    };
    let local = vec![
        argv(&["install", "-d", "-o", "mysql", "-g", "mysql", &h.to_string()]),
        argv(&[
            "mariadb-install-db",
            "--no-defaults",
            "--user=mysql",
            &format!("--datadir={h}/data"),
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]),
    ];
    Ok((server, local))
}

/// ANALYZE TABLE on every table of `database`. Without it the optimizer's statistics of freshly
/// loaded tables are whatever InnoDB's background recalculation had reached when the server
/// stopped, and plans (TPC-C's above all) and so the figures change from one path to the other.
fn analyze(addr: &str, database: &str) -> Vec<String> {
    argv(&["mariadb-check", "-h", addr, "-P", "3306", "-u", "bench", "--analyze", "--databases", database])
}

/// The mariadb client in batch mode (tab-separated, no column names) running one query.
fn mariadb_query(addr: &str, sql: &str) -> Vec<String> {
    argv(&["mariadb", "-h", addr, "-P", "3306", "-u", "bench", "-N", "-B", "-e", sql])
}

/// Every sysbench table holds ids 1..=SB_TABLE_SIZE, each once: `count distinct min max` rows.
fn check_sbtest_rows(out: &str) -> Result<()> {
    let want = format!("{n}\t{n}\t1\t{n}", n = SB_TABLE_SIZE);
    let rows: Vec<&str> = out.lines().collect();
    if rows.len() != SB_TABLES as usize || rows.iter().any(|r| *r != want) {
        bail!("the sysbench tables changed shape (count, distinct ids, min, max per table; want {want:?}): {rows:?}");
    }
    Ok(())
}

fn check_zero(out: &str) -> Result<()> {
    if out.trim() != "0" {
        bail!("TPC-C consistency conditions broken in {} warehouses or districts", out.trim());
    }
    Ok(())
}

/// sysbench 1.0: `transactions: 4225 (841.78 per sec.)`, `queries: 84500 (16835.68 per sec.)`,
/// `ignored errors: 1 (...)` (deadlocks: the only error it is told to ignore), `reconnects: 0
/// (...)` and `95th percentile: 25.28` (ms). A FATAL line or a reconnect rejects the run.
/// `transactions` (the count) is a sample for the caller to turn into CPU per transaction.
fn parse_sysbench(client: &Client, out: &str) -> Result<Vec<Sample>> {
    if let Some(l) = out.lines().find(|l| l.contains("FATAL") || l.contains("ALERT")) {
        bail!("sysbench reported an error: {}", l.trim());
    }
    // (count, per second) of a `key: N (X per sec.)` line, or the value of `key: X`.
    let field = |key: &str| -> Result<(f64, f64)> {
        let rest = out.lines().find_map(|l| l.trim().strip_prefix(key)).with_context(|| format!("no `{key}` line"))?;
        let mut nums = rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).filter(|w| !w.is_empty());
        let mut next = || -> Result<f64> {
            let w = nums.next().with_context(|| format!("no number after `{key}`"))?;
            w.parse().with_context(|| format!("`{key}` {w:?}"))
        };
        let first = next()?;
        Ok((first, next().unwrap_or(f64::NAN)))
    };
    let (reconnects, _) = field("reconnects:")?;
    if reconnects > 0.0 {
        bail!("sysbench reconnected {reconnects} times: connections were lost");
    }
    let (transactions, tps) = field("transactions:")?;
    if transactions == 0.0 {
        bail!("sysbench completed no transaction");
    }
    let case = client.label.clone();
    let mut samples = vec![
        Sample { case: case.clone(), metric: "tps", value: tps },
        Sample { case: case.clone(), metric: "qps", value: field("queries:")?.1 },
        Sample { case: case.clone(), metric: "p95_ms", value: field("95th percentile:")?.0 },
    ];
    if case.starts_with("read_write") {
        samples.push(Sample { case: case.clone(), metric: "deadlocks", value: field("ignored errors:")?.0 });
    }
    samples.push(Sample { case, metric: "transactions", value: transactions });
    Ok(samples)
}

/// go-tpc tpcc run: `[Summary] NEW_ORDER - Takes(s): 15.0, Count: 6914, TPM: 27569.4, ...,
/// 99th(ms): 46.1, ...` per transaction type and `tpmC: 27569.1, tpmTotal: ...`. A `_ERR`
/// summary (failed transactions of that type) or an error message rejects the run.
fn parse_go_tpc(client: &Client, out: &str) -> Result<Vec<Sample>> {
    if let Some(l) =
        out.lines().find(|l| l.contains("_ERR ") || l.contains("failed") || l.contains("Error") || l.contains("panic:"))
    {
        bail!("go-tpc reported failed transactions: {}", l.trim());
    }
    let tpmc = out
        .lines()
        .find_map(|l| l.strip_prefix("tpmC:"))
        .and_then(|r| r.split(',').next())
        .context("no tpmC line")?
        .trim()
        .parse::<f64>()?;
    let new_order =
        out.lines().find(|l| l.starts_with("[Summary] NEW_ORDER -")).context("no [Summary] NEW_ORDER line")?;
    let p99 = new_order
        .split(", ")
        .find_map(|f| f.strip_prefix("99th(ms): "))
        .context("no 99th(ms) in the NEW_ORDER summary")?
        .trim()
        .parse::<f64>()?;
    if tpmc <= 0.0 {
        bail!("go-tpc completed no NEW_ORDER transaction");
    }
    Ok(vec![
        Sample { case: client.label.clone(), metric: "tpmC", value: tpmc },
        Sample { case: format!("NEW_ORDER {}", client.label), metric: "p99_ms", value: p99 },
    ])
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

/// redis-benchmark's CSV, and the flood's rate when bench/syn_flood.sh ran it
/// (`flood: N SYNs in S s`).
fn parse_redis_under_flood(client: &Client, out: &str) -> Result<Vec<Sample>> {
    let mut samples = parse_redis_csv(client, out)?;
    if let Some(line) = out.lines().find(|l| l.starts_with("flood: ")) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(n), Some(s)) =
            (w.get(1).and_then(|n| n.parse::<f64>().ok()), w.get(4).and_then(|s| s.parse::<f64>().ok()))
        else {
            bail!("unreadable flood line {line:?}");
        };
        if n == 0.0 || s <= 0.0 {
            bail!("the flood sent nothing: {line:?}");
        }
        samples.push(Sample { case: format!("flood {}", client.label), metric: "syns_per_s", value: n / s });
    } else if client.argv.iter().any(|a| a.ends_with("syn_flood.sh")) {
        bail!("bench/syn_flood.sh printed no `flood:` line");
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
    fn a_flooded_run_reports_the_flood_rate_and_needs_its_line() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"GET\",\"40000.00\",\"0.219\",\"0.064\",\"0.223\",\"0.263\",\"0.311\",\"1.047\"\n";
        let flooded = Client {
            label: "-c 50 SYN flood".into(),
            argv: argv(&["bash", "bench/syn_flood.sh", "10.98.0.1", "6379", "10", "--", "redis-benchmark"]),
            parse: parse_redis_under_flood,
        };
        let s = flooded.parse(&format!("{csv}flood: 50000 SYNs in 2.50 s\n")).unwrap();
        let last = s.last().unwrap();
        assert_eq!((last.metric, last.value), ("syns_per_s", 20000.0));
        assert!(flooded.parse(csv).is_err(), "a flooded run without its flood line");
        assert!(flooded.parse(&format!("{csv}flood: 0 SYNs in 2.50 s\n")).is_err(), "a flood that sent nothing");
        let plain = Client { label: "-c 50".into(), argv: argv(&["redis-benchmark"]), parse: parse_redis_under_flood };
        assert_eq!(plain.parse(csv).unwrap().len(), 3);
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

    const SYSBENCH: &str = "SQL statistics:
    queries performed:
        read:                            128072
        write:                           36562
        other:                           18284
        total:                           182918
    transactions:                        9136   (906.12 per sec.)
    queries:                             182918 (18141.95 per sec.)
    ignored errors:                      12     (1.19 per sec.)
    reconnects:                          0      (0.00 per sec.)

Latency (ms):
         min:                                   22.48
         95th percentile:                      231.53
";

    #[test]
    fn sysbench_gives_tps_qps_p95_and_deadlocks_and_rejects_reconnects() {
        let c = Client { label: "read_write 128 thr".into(), argv: vec![], parse: parse_sysbench };
        let s = parse_sysbench(&c, SYSBENCH).unwrap();
        let got: Vec<(&str, f64)> = s.iter().map(|s| (s.metric, s.value)).collect();
        assert_eq!(
            got,
            [("tps", 906.12), ("qps", 18141.95), ("p95_ms", 231.53), ("deadlocks", 12.0), ("transactions", 9136.0)]
        );
        let ro = Client { label: "read_only 16 thr".into(), ..c };
        assert_eq!(parse_sysbench(&ro, SYSBENCH).unwrap().len(), 4, "deadlocks only where the test writes");
        let lost = SYSBENCH.replace("reconnects:                          0", "reconnects:                          2");
        assert!(parse_sysbench(&ro, &lost).unwrap_err().to_string().contains("reconnected 2"));
        let fatal = "FATAL: mysql_drv_query() returned error 2013 (Lost connection to server during query)\n";
        assert!(parse_sysbench(&ro, &format!("{fatal}{SYSBENCH}")).unwrap_err().to_string().contains("2013"));
        assert!(parse_sysbench(&ro, &SYSBENCH.replace("9136   (906.12", "0   (0.00")).is_err());
    }

    #[test]
    fn go_tpc_gives_tpmc_and_new_order_p99_and_rejects_failed_transactions() {
        let out = "Finished\n\
            [Summary] NEW_ORDER - Takes(s): 15.0, Count: 6914, TPM: 27569.4, Sum(ms): 99059.3, Avg(ms): 14.3, \
            50th(ms): 12.6, 90th(ms): 25.2, 95th(ms): 30.4, 99th(ms): 46.1, 99.9th(ms): 130.0, Max(ms): 151.0\n\
            [Summary] PAYMENT - Takes(s): 15.1, Count: 6495, TPM: 25893.4, 99th(ms): 44.0, Max(ms): 159.4\n\
            tpmC: 27569.1, tpmTotal: 60937.2, efficiency: 107189.2%\n";
        let c = Client { label: "2 warehouses -T 16".into(), argv: vec![], parse: parse_go_tpc };
        let s = parse_go_tpc(&c, out).unwrap();
        assert_eq!((s[0].metric, s[0].value), ("tpmC", 27569.1));
        assert_eq!((s[1].case.as_str(), s[1].metric, s[1].value), ("NEW_ORDER 2 warehouses -T 16", "p99_ms", 46.1));
        let err = format!("{out}[Summary] NEW_ORDER_ERR - Takes(s): 14.2, Count: 3, TPM: 12.7\n");
        assert!(parse_go_tpc(&c, &err).unwrap_err().to_string().contains("NEW_ORDER_ERR"));
        assert!(parse_go_tpc(&c, "Finished\n").is_err());
    }

    #[test]
    fn sysbench_tables_must_keep_every_id_once() {
        let row = format!("{n}\t{n}\t1\t{n}\n", n = SB_TABLE_SIZE);
        assert!(check_sbtest_rows(&row.repeat(SB_TABLES as usize)).is_ok());
        assert!(check_sbtest_rows(&row.repeat(SB_TABLES as usize - 1)).is_err());
        let short = format!("{}\t{}\t1\t{}\n", SB_TABLE_SIZE - 1, SB_TABLE_SIZE - 1, SB_TABLE_SIZE);
        assert!(check_sbtest_rows(&format!("{short}{}", row.repeat(SB_TABLES as usize - 1))).is_err());
        assert!(check_zero("0\n").is_ok() && check_zero("2\n").is_err());
    }

    #[test]
    fn resync_plans_both_directions_against_side_b_of_the_same_path() {
        let dir = Path::new("/tmp/ph-resync-plan");
        let p = resync("10.99.0.1", true, dir, Path::new("bench/resync.sh")).unwrap();
        let server = p.server.argv.join(" ");
        for setting in ["--bind 10.99.0.1", "--repl-diskless-sync yes", "--repl-diskless-sync-delay 0"] {
            assert!(server.contains(setting), "{setting}: {server}");
        }
        assert!(server.contains("--rdbcompression no") && server.contains("--dir /tmp/ph-resync-plan"), "{server}");
        assert!(server.contains("--repl-diskless-load swapdb") && server.contains("--save "), "{server}");
        let runs: Vec<(String, String)> = p.clients.iter().map(|c| (c.label.clone(), c.argv[2..].join(" "))).collect();
        let tail = "10.99.0.1 10.99.0.2 65536 1024 /tmp/ph-resync-plan/side-b";
        assert_eq!(
            runs,
            [
                ("master a, replica b".to_string(), format!("a-to-b {tail}")),
                ("master b, replica a".to_string(), format!("b-to-a {tail}")),
            ]
        );
        assert_eq!(RESYNC_KEYS * RESYNC_VALUE_BYTES, 1 << 30);
        let full = resync("10.98.0.1", false, dir, Path::new("bench/resync.sh")).unwrap();
        assert!(full.clients[0].argv.join(" ").contains("10.98.0.1 10.98.0.2 1048576 1024"));
        assert!(side_b_addr("fd99::1").is_err());
        assert_eq!(server_counters(Name::Resync), ["TcpOutSegs", "TcpRetransSegs"]);
    }

    #[test]
    fn resync_output_gives_seconds_and_mb_per_s() {
        let c = Client { label: "master a, replica b".into(), argv: vec![], parse: parse_resync };
        let s = c.parse("some log\nresync: 65536 keys of 1024 bytes in 0.500 s\n").unwrap();
        let got: Vec<(&str, f64)> = s.iter().map(|s| (s.metric, s.value)).collect();
        assert_eq!(got, [("seconds", 0.5), ("mb_per_s", 65536.0 * 1024.0 / 1e6 / 0.5)]);
        assert_eq!(s[0].case, "master a, replica b");
        assert_eq!(metric_info("seconds"), ("s", false));
        assert!(c.parse("resync.sh: the replica 10.99.0.1:6379 was not in sync within 600 s\n").is_err());
        assert!(c.parse("resync: 65536 keys of 1024 bytes in 0.000 s\n").is_err());
        assert!(c.parse("resync: many keys\n").is_err());
    }

    #[test]
    fn pgbench_output_gives_tps_latency_and_transactions() {
        let c = |label: &str| Client { label: label.into(), argv: vec![], parse: parse_pgbench };
        let cases = [
            ("select-only -c 16", include_str!("testdata/pgbench-select-only.txt")),
            ("TPC-B-like -c 16", include_str!("testdata/pgbench-tpcb.txt")),
            ("select-only -C -c 16", include_str!("testdata/pgbench-select-only-connect.txt")),
        ];
        for (label, out) in cases {
            let s = c(label).parse(out).unwrap();
            assert_eq!(s.iter().map(|s| s.metric).collect::<Vec<_>>(), ["tps", "latency_avg_ms", "transactions"]);
            assert!(s.iter().all(|s| s.case == label && s.value > 0.0), "{s:?}");
            // pgbench ran 2 s: its tps is about its transactions over 2 s, whichever it reports.
            assert!((s[0].value * 2.0 / s[2].value - 1.0).abs() < 0.5, "{label}: {s:?}");
        }
        let s = c("x").parse(include_str!("testdata/pgbench-select-only.txt")).unwrap();
        assert_eq!((s[0].value, s[1].value, s[2].value), (23117.272811, 0.692, 36764.0));
        let connect = c("x").parse(include_str!("testdata/pgbench-select-only-connect.txt")).unwrap();
        assert!(include_str!("testdata/pgbench-select-only-connect.txt").contains("including reconnection times"));
        assert!(connect[0].value < s[0].value);
    }

    #[test]
    fn pgbench_failures_and_aborted_clients_reject_the_run() {
        let c = Client { label: "TPC-B-like -c 16".into(), argv: vec![], parse: parse_pgbench };
        let out = include_str!("testdata/pgbench-tpcb.txt");
        let failed = out.replace("failed transactions: 0 (0.000%)", "failed transactions: 3 (0.400%)");
        assert!(c.parse(&failed).unwrap_err().root_cause().to_string().contains("3 failed"));
        let aborted = format!("pgbench: error: client 3 aborted in command 4 (SQL) of script 0\n{out}");
        assert!(c.parse(&aborted).unwrap_err().root_cause().to_string().contains("client 3 aborted"));
        let none = out.replace("actually processed: 729", "actually processed: 0");
        assert!(c.parse(&none).is_err());
        assert!(c.parse("pgbench: error: connection to server at \"10.99.0.1\", port 5432 failed\n").is_err());
    }

    #[test]
    fn pgbench_plans_the_cases_against_postgres_on_the_path_under_test() {
        if !Path::new(postgres::BIN).join("postgres").is_file() {
            eprintln!("skipped: {}/postgres is not installed", postgres::BIN);
            return;
        }
        let dir = std::env::temp_dir().join(format!("ph-pgbench-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let full = plan(Name::Pgbench, "10.99.0.1", false, &dir, Workers::ONE).unwrap();
        let labels: Vec<&str> = full.clients.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "select-only -c 16",
                "select-only -c 64",
                "TPC-B-like -c 16",
                "TPC-B-like -c 64",
                "TPC-B-like -c 4",
                "select-only -C -c 16"
            ]
        );
        let runs: Vec<String> = full.clients.iter().map(|c| c.argv.join(" ")).collect();
        let head = "pgbench -h 10.99.0.1 -U postgres -n -j 4 -T 20";
        assert_eq!(runs[1], format!("{head} -S -c 64 postgres"));
        assert_eq!(runs[3], format!("{head} -c 64 postgres"));
        assert_eq!(runs[4], format!("{head} -c 4 postgres"));
        assert_eq!(runs[5], format!("{head} -S -C -c 16 postgres"));
        let quick = plan(Name::Pgbench, "10.98.0.1", true, &dir, Workers::ONE).unwrap();
        let labels: Vec<&str> = quick.clients.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["select-only -c 16", "TPC-B-like -c 16", "select-only -C -c 16"]);
        let runs: Vec<String> = quick.clients.iter().map(|c| c.argv.join(" ")).collect();
        assert!(runs.iter().all(|r| r.contains("-h 10.98.0.1") && r.contains("-T 5 ")), "{runs:?}");
        let server = quick.server.argv.join(" ");
        for part in ["setpriv --reuid=postgres", "-c listen_addresses=10.98.0.1", "-c synchronous_commit=off"] {
            assert!(server.contains(part), "{part}: {server}");
        }
        assert_eq!(quick.server.port, 5432);
        let hba = std::fs::read_to_string(dir.join("pg_hba.conf")).unwrap();
        assert!(hba.contains("host all all 10.98.0.0/24 trust") && hba.contains("10.99.0.0/24"), "{hba}");
        let setup = quick.setup.unwrap();
        assert!(setup.local[1].join(" ").contains("initdb -D"), "{:?}", setup.local);
        assert_eq!(setup.prepare[0].join(" "), "pgbench -h 10.98.0.1 -U postgres -i -s 8 -q postgres");
        assert!(quick.after.as_ref().unwrap().argv.contains(&PGBENCH_BALANCES.to_string()));
        assert!(check_pgbench_balances("t|800000\n").is_ok());
        assert!(check_pgbench_balances("f|800000\n").is_err() && check_pgbench_balances("t|799999\n").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn plans_point_clients_at_the_address_under_test() {
        let dir = std::env::temp_dir().join(format!("ph-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // mariadb's plan needs mariadbd installed (scripts/setup.sh); tpcc's also go-tpc, built by hand.
        for name in [Name::Redis, Name::RedisCps, Name::Latency, Name::Bulk, Name::Http, Name::Mariadb] {
            let p = plan(name, "10.98.0.1", true, &dir, Workers::ONE).unwrap();
            assert!(p.server.argv.join(" ").contains("10.98.0.1") || name == Name::Http, "{name:?}");
            assert!(p.clients.iter().all(|c| c.argv.join(" ").contains("10.98.0.1")), "{name:?}");
        }
        let conf = std::fs::read_to_string(dir.join("nginx.conf")).unwrap();
        assert!(conf.contains("listen 10.98.0.1:8080") && conf.contains("master_process off"));
        let own_queues = plan(Name::Http, "10.98.0.1", true, &dir, Workers { count: 2, family: false }).unwrap();
        let conf = std::fs::read_to_string(dir.join("nginx.conf")).unwrap();
        assert!(conf.contains("master_process on; worker_processes 2;"), "{conf}");
        assert!(own_queues.about.contains("each on a NIC queue of its own"), "{}", own_queues.about);
        let family = plan(Name::Http, "10.98.0.1", true, &dir, Workers { count: 2, family: true }).unwrap();
        assert!(family.about.contains("serve on its stack"), "{}", family.about);
        let conf = std::fs::read_to_string(dir.join("nginx.conf")).unwrap();
        assert!(conf.contains("daemon off;"), "a family's master must stay in the foreground: {conf}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
