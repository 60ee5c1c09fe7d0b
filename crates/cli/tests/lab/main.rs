//! Lab tests: the `pronghorn` binary in the lab network, over DPDK af_xdp and af_packet, against
//! the Linux kernel in the peer namespace; and the error paths a person hits first.
//!
//! They need root (network namespaces, hugepages, XDP). `scripts/test.sh` runs them as root with
//! PRONGHORN_LAB_TESTS=1; without that variable (or without root, or a tool the scenario needs)
//! each test says it is skipped and returns: the one line `testkit::lab::scenario` opening each
//! test. They run one at a time (hugepages are machine-wide) and each uses its own lab prefix `tst-*`;
//! PRONGHORN_LAB_PREFIX=P makes that `P-*` for the labs `Lab` and `KernelPair` bring up, so
//! that people sharing a machine do not take each other's labs down (tests that bring up or
//! name their labs' interfaces themselves, such as the `lab up`/`down` and node tests, keep
//! `tst`).
//!
//! This file is the list of scenarios; the rigs they use (the lab, pronghorn's echo and client,
//! the servers and their kernel twins) are in `rigs.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use testkit::lab::{dpdk_runtime_dirs, eventually, netns_exists, nr_hugepages, scenario, text, HUGEPAGES_2M};

#[path = "../../src/bench/postgres.rs"]
mod postgres;
mod rigs;

use rigs::{
    accelerated_pid, assert_echoed, assert_lab_gone, assert_one_clear_line, attempt_fails, bin, compat_peer, compat_py,
    config_file, deterministic_sql, exit_stat, family_config, have_scapy, kernel_client, nginx_daemon_site, nginx_site,
    nginx_workers_conf, nginx_workers_site, peer_py, ping, pronghorn, pronghorn_as_nobody, pronghorn_client, ps_json,
    redis_benchmark, redis_cli, redis_dir, script_checks, share_side_a, shared_redis, stat_of_process_on, until_ok,
    wire_py, Accelerated, Echo, KernelPair, KernelServer, Lab, Mariadb, NginxMaster, Redis, RedisNode, WrkErrors,
    WrkUnderway, DEBIAN_PYTHON, MARIADB_TOOLS, REDIS_TOOLS, WRK_CONNECTIONS,
};

fn ping_both_families(pmd: &str, prefix: &str) {
    let huge_before = nr_hugepages();
    {
        let lab = Lab::up(prefix, &["--pmd", pmd]);
        let echo = Echo::start(&lab, &[]);
        assert!(echo.ready.contains(pmd), "{}", echo.ready);
        // The PMD's socket was found, so an idle echo sleeps instead of spinning.
        assert!(!echo.ready.contains("busy polling"), "no rx fd over {pmd}: {}", echo.ready);
        let out = ping(&lab, &["10.99.0.1"]);
        assert!(out.contains("3 packets transmitted, 3 received"), "ping over {pmd}: {out}");
        let out = ping(&lab, &["-6", "fd99::1"]);
        assert!(out.contains("3 packets transmitted, 3 received"), "ping -6 over {pmd}: {out}");
        let stats = echo.stop();
        assert!(stats.contains("6 icmp echo replies"), "{stats}");
    }
    // Lab dropped: down ran.
    assert_lab_gone(prefix, &["a", "b"], &["a0", "b0"], huge_before);
}

#[test]
fn ping_over_af_xdp() {
    let Some(_scenario) = scenario(&[]) else { return };
    ping_both_families("af_xdp", "tst-xdp");
}

#[test]
fn ping_over_af_packet() {
    let Some(_scenario) = scenario(&[]) else { return };
    ping_both_families("af_packet", "tst-pkt");
}

/// net_tap's queue is a `/dev/net/tun` fd, found as the rx fd like the sockets of the others.
#[test]
fn ping_over_tap() {
    let Some(_scenario) = scenario(&[]) else { return };
    ping_both_families("tap", "tst-tap");
}

#[test]
fn lab_up_twice_is_harmless_and_down_twice_too() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-twice", &[]);
    let p = testkit::lab::lab_prefix("tst-twice");
    let o = pronghorn(&["lab", "up", "--prefix", &p]);
    assert!(o.status.success() && text(&o).contains("already up"), "{}", text(&o));
    let o = pronghorn(&["lab", "status", "--prefix", &p]);
    assert!(o.status.success() && text(&o).contains("10.99.0.2/24"), "{}", text(&o));
    let cfg = std::fs::read_to_string(lab.config_a()).unwrap();
    assert!(cfg.contains(&format!("iface = \"{p}-a0\"")), "{cfg}");
    let o = lab.exec("a", &["sh", "-c", "echo $PRONGHORN_CONFIG"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), lab.config_a().to_str().unwrap());
    drop(lab);
    let o = pronghorn(&["lab", "down", "--prefix", &p]);
    assert!(o.status.success() && text(&o).contains("is not up"), "{}", text(&o));
    let o = pronghorn(&["lab", "status", "--prefix", &p]);
    assert_eq!(o.status.code(), Some(1));
    let o = pronghorn(&["lab", "exec", "--prefix", &p, "a", "--", "true"]);
    assert!(
        !o.status.success() && text(&o).contains(&format!("is not up: run `pronghorn lab up --prefix {p}`")),
        "{}",
        text(&o)
    );
}

#[test]
fn down_cleans_up_after_a_crashed_echo() {
    let Some(_scenario) = scenario(&[]) else { return };
    let huge_before = nr_hugepages();
    let lab = Lab::up("tst-crash", &[]);
    let mut echo = Echo::start(&lab, &[]);
    echo.child.kill().unwrap(); // SIGKILL: no cleanup in the process
    echo.child.wait().unwrap();
    drop(lab);
    assert!(!netns_exists("tst-crash-a"));
    assert_eq!(nr_hugepages(), huge_before);
    assert!(dpdk_runtime_dirs().is_empty(), "{:?}", dpdk_runtime_dirs());
}

/// `pronghorn doctor` on the lab's side a: nothing fails; after an echo killed by SIGKILL it
/// names the XDP program and the DPDK directory left over, and once its fixes are run the host
/// is clean again.
#[test]
fn doctor_passes_the_lab_and_names_what_a_killed_echo_left() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-doctor", &[]);
    let doctor = || {
        let o = lab.exec("a", &[bin(), "doctor", "--json"]).output().unwrap();
        assert!(o.status.success(), "a check failed: {}", text(&o));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let checks = report["checks"].as_array().unwrap().clone();
        move |name: &str| {
            let c = checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no {name}: {checks:?}"));
            (c["status"].as_str().unwrap().to_owned(), c["detail"].as_str().unwrap().to_owned(), c["fix"].clone())
        }
    };
    let check = doctor();
    for name in ["privileges", "config", "hugepages", "interface", "xdp", "mtu", "xdp program"] {
        assert_eq!(check(name).0, "ok", "{name}: {:?}", check(name));
    }
    assert_eq!(check("interface").1, format!("{}-a0 up, driver veth", lab.prefix));
    // The veth's XDP features come from the kernel where it reports them (6.3+): native XDP
    // (basic, redirect) without zero-copy; before, from the driver list, which says so.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut version = release.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>().unwrap_or(0));
    let reports_xdp_features = (version.next().unwrap(), version.next().unwrap()) >= (6, 3);
    let xdp = check("xdp").1;
    if reports_xdp_features {
        let kernel = format!("the kernel reports {}-a0's XDP features: basic, redirect", lab.prefix);
        assert!(xdp.starts_with(&kernel), "{xdp}");
    } else {
        assert!(xdp.contains("no netdev netlink family"), "{xdp}");
    }
    assert!(xdp.ends_with("native XDP, AF_XDP in copy mode"), "{xdp}");
    let mut echo = Echo::start(&lab, &[]);
    let pid = echo.child.id();
    echo.child.kill().unwrap(); // SIGKILL: the port is not closed
    echo.child.wait().unwrap();
    let check = doctor();
    let (status, detail, fix) = check("xdp program");
    assert_eq!(status, "warn", "{detail}");
    assert!(detail.starts_with("pronghorn_xdp (id "), "{detail}");
    let xdp_off = format!("ip link set dev {}-a0 xdp off", lab.prefix);
    assert_eq!(fix, xdp_off.as_str());
    let (status, detail, fix) = check("dpdk run dirs");
    assert_eq!(status, "warn", "{detail}");
    assert!(fix.as_str().unwrap().contains(&format!("/var/run/dpdk/pronghorn-{pid}")), "{fix}");
    let off: Vec<&str> = xdp_off.split(' ').collect();
    assert!(lab.exec("a", &off).status().unwrap().success());
    std::fs::remove_dir_all(format!("/var/run/dpdk/pronghorn-{pid}")).unwrap();
    let check = doctor();
    assert_eq!(check("xdp program").0, "ok");
    assert!(!check("dpdk run dirs").1.contains(&pid.to_string()));
}

#[test]
fn echo_on_a_missing_interface_says_so() {
    let Some(_scenario) = scenario(&[]) else { return };
    let cfg = config_file("noiface", "nope0", &[]);
    let o = pronghorn(&["echo", "--config", cfg.to_str().unwrap()]);
    assert_one_clear_line(&o, "interface \"nope0\" does not exist");
}

#[test]
fn echo_with_bad_eal_args_says_so() {
    let Some(_scenario) = scenario(&[]) else { return };
    // "lo" exists everywhere; --no-huge lets the EAL get as far as parsing the bad argument.
    let cfg = config_file("badeal", "lo", &["--no-huge", "--no-such-eal-flag"]);
    let o = pronghorn(&["echo", "--config", cfg.to_str().unwrap()]);
    assert_one_clear_line(&o, "DPDK rejected the EAL arguments");
}

#[test]
fn echo_asking_for_a_driver_not_linked_in_says_so() {
    let Some(_scenario) = scenario(&[]) else { return };
    // DPDK is linked statically with a chosen list of drivers: net_null is not one of them.
    let cfg = config_file("nodriver", "lo", &["--vdev", "net_null0"]);
    let o = pronghorn(&["echo", "--config", cfg.to_str().unwrap()]);
    assert_one_clear_line(&o, "is not linked into pronghorn, which carries only bus_pci, bus_vdev");
}

#[test]
fn echo_without_hugepages_says_so() {
    let Some(_scenario) = scenario(&[]) else { return };
    let before = nr_hugepages();
    std::fs::write(HUGEPAGES_2M, "0").unwrap();
    let cfg = config_file("nohuge", "lo", &[]);
    let o = pronghorn(&["echo", "--config", cfg.to_str().unwrap()]);
    std::fs::write(HUGEPAGES_2M, before.to_string()).unwrap();
    assert_one_clear_line(&o, "no free hugepages");
}

#[test]
fn not_root_is_one_clear_line() {
    let Some(_scenario) = scenario(&[]) else { return };
    // Copy the binary where an unprivileged user can run it (the build dir may be private).
    let dir = std::env::temp_dir().join(format!("pronghorn-nonroot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("pronghorn");
    std::fs::copy(bin(), &exe).unwrap();
    let cfg = config_file("nonroot", "lo", &[]);
    let cfg_copy = dir.join("c.toml");
    std::fs::copy(&cfg, &cfg_copy).unwrap();
    Command::new("chmod").args(["-R", "a+rX", dir.to_str().unwrap()]).status().unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", exe.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap()
    };
    let o = as_nobody(&["echo", "--config", cfg_copy.to_str().unwrap()]);
    assert_one_clear_line(&o, "needs root");
    let o = as_nobody(&["lab", "up", "--prefix", "tst-nonroot"]);
    assert_one_clear_line(&o, "lab up needs root");
    assert!(!netns_exists("tst-nonroot-a"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn tcp_interop(pmd: &str, prefix: &str, big: u64, small: u64) {
    let lab = Lab::up(prefix, &["--pmd", pmd]);
    // pronghorn as the server.
    let echo = Echo::start(&lab, &[]);
    kernel_client(&lab, "10.99.0.1", big, 1);
    kernel_client(&lab, "fd99::1", big, 1);
    kernel_client(&lab, "10.99.0.1", small, 4);
    let o = lab.exec("b", &["python3", &peer_py(), "udp-echo-client", "10.99.0.1", "7", "50"]).output().unwrap();
    assert!(text(&o).contains("\"echoed_identical\": 50"), "udp: {}", text(&o));
    let stats = echo.stop();
    assert!(stats.contains("accepted"), "{stats}");
    // pronghorn with faults on its rx and tx, as the server.
    let echo = Echo::start(&lab, &["--fault", "loss=0.02,reorder=0.02,dup=0.01,corrupt=0.001"]);
    kernel_client(&lab, "10.99.0.1", small, 1);
    kernel_client(&lab, "fd99::1", small, 1);
    echo.stop();
    // pronghorn as the client, without and with faults.
    let _server = KernelServer::start(&lab, 7007);
    pronghorn_client(&lab, "a", "10.99.0.2:7007", big, 1, None);
    pronghorn_client(&lab, "a", "[fd99::2]:7007", big, 1, None);
    pronghorn_client(&lab, "a", "10.99.0.2:7007", small, 1, Some("loss=0.02,reorder=0.02,dup=0.01,corrupt=0.001"));
    pronghorn_client(&lab, "a", "[fd99::2]:7007", small, 1, Some("loss=0.02,reorder=0.02,dup=0.01,corrupt=0.001"));
}

#[test]
fn tcp_and_udp_interop_with_the_kernel_over_af_xdp() {
    let Some(_scenario) = scenario(&[]) else { return };
    tcp_interop("af_xdp", "tst-tcpx", 256 << 20, 16 << 20);
}

#[test]
fn tcp_and_udp_interop_with_the_kernel_over_af_packet() {
    let Some(_scenario) = scenario(&[]) else { return };
    tcp_interop("af_packet", "tst-tcpp", 32 << 20, 4 << 20);
}

/// The lab's offload path (`lab up --pmd tap`: checksums and TCP segmentation done by the PMD):
/// a kernel client in side b echoes `PRONGHORN_TSO_TEST_MIB` MiB (default 1024: about 30 s a
/// family on a loaded 2-core machine) through a server under `pronghorn run`, over IPv4 and
/// IPv6, sha256 compared each way. Over IPv4 `pronghorn stat` shows segments of several MSS
/// handed to the NIC (more TCP segments sent than frames); over IPv6 none (DPDK 22.11's net_tap
/// segments IPv4 only).
#[test]
fn bulk_both_ways_over_the_tap_with_segmentation_offload() {
    let Some(_scenario) = scenario(&[]) else { return };
    let mib: u64 = std::env::var("PRONGHORN_TSO_TEST_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let bytes = mib << 20;
    let lab = Lab::up("tst-tso", &["--pmd", "tap"]);
    let iface = format!("{}-t0", lab.prefix);
    let mut server = Accelerated(
        lab.exec("a", &[bin(), "run", "--", DEBIAN_PYTHON, &peer_py(), "tcp-echo-server", "7007"])
            .args(["--bind", "10.99.0.1", "--bind", "fd99::1"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(server.0.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let sent = || {
        let shard = &stat_of_process_on(&iface).1["shards"][0];
        let count = |name: &str| shard[name].as_f64().unwrap_or_else(|| panic!("no {name}: {shard}"));
        (count("tcp_out_segs"), count("tx_frames"))
    };
    // The server's counters start at zero (`ps` lists it once its first socket opened the NIC).
    let (mut segments_before, mut frames_before) = (0.0, 0.0);
    for host in ["10.99.0.1", "fd99::1"] {
        let o = lab
            .exec("b", &["python3", &peer_py(), "tcp-echo-client", host, "7007", &bytes.to_string(), "--conns", "1"])
            .output()
            .unwrap();
        assert_echoed(&o, host, bytes, 1);
        let (segments_now, frames_now) = sent();
        let (segments, frames) = (segments_now - segments_before, frames_now - frames_before);
        (segments_before, frames_before) = (segments_now, frames_now);
        eprintln!("{host}: {mib} MiB each way, {segments} TCP segments sent in {frames} frames");
        if host.contains(':') {
            // The two are counted at different layers (segments TCP built, frames the NIC took)
            // and differ by a fraction of a percent on a loaded machine (787,527 segments in
            // 784,665 frames in one CI rehearsal); a large segment per frame would be ~40.
            assert!(segments < 1.1 * frames, "IPv6 is not segmented by net_tap: {segments} segments, {frames} frames");
        } else {
            assert!(segments > 2.0 * frames, "segmentation offload used: {segments} segments, {frames} frames");
        }
    }
}

#[test]
fn redis_server_runs_unmodified_under_pronghorn_run() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-redis", &[]);
    let dir = std::env::temp_dir().join(format!("pronghorn-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut redis = Redis::start(&lab, &dir, &[]);
    assert_eq!(redis_cli(&lab, &["ping"]).trim(), "PONG");
    // Values of 1 B, 64 KiB and 4 MiB round-trip byte-identical.
    let o = lab.exec("b", &["python3", &peer_py(), "redis-check", "10.99.0.1", "6379"]).output().unwrap();
    let out = text(&o);
    assert!(o.status.success() && out.matches("\"identical\": true").count() == 3, "{out}");
    redis_benchmark(
        &lab,
        &["-c", "50", "-n", "20000", "-t", "set,get,incr,lpush,lrange"],
        &["SET", "GET", "INCR", "LPUSH", "LRANGE_100 (first 100 elements)"],
    );
    redis_benchmark(
        &lab,
        &["-c", "1000", "-n", "20000", "-t", "set,get,incr,lpush,lrange"],
        &["SET", "GET", "INCR", "LPUSH", "LRANGE_100 (first 100 elements)"],
    );
    redis_benchmark(&lab, &["-c", "20", "-n", "1000", "-t", "get", "-k", "0"], &["GET"]);
    // BGSAVE forks: the child must not disturb the server or its clients.
    redis_cli(&lab, &["set", "survivor", "yes"]);
    assert!(redis_cli(&lab, &["bgsave"]).contains("Background saving started"));
    let mut saved = false;
    for _ in 0..1000 {
        let info = redis_cli(&lab, &["info", "persistence"]);
        if info.contains("rdb_bgsave_in_progress:0") && info.contains("rdb_last_bgsave_status:ok") {
            saved = true;
            break;
        }
    }
    assert!(saved, "BGSAVE did not finish");
    assert!(dir.join("dump.rdb").exists());
    assert_eq!(redis_cli(&lab, &["get", "survivor"]).trim(), "yes");
    // SIGTERM: redis shuts down cleanly (and pronghorn closes its port on exit).
    unsafe { libc::kill(redis.child.id() as i32, libc::SIGTERM) };
    let status = redis.child.wait().unwrap();
    assert!(status.success(), "redis-server exited with {status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_with_io_threads_runs_under_pronghorn_run() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-redisio", &[]);
    let dir = std::env::temp_dir().join(format!("pronghorn-redisio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Reads and writes of client sockets move to a second thread while many clients are busy.
    let _redis = Redis::start(&lab, &dir, &["--io-threads", "2", "--io-threads-do-reads", "yes"]);
    redis_benchmark(
        &lab,
        &["-c", "100", "-n", "20000", "-t", "set,get,incr,lpush,lrange"],
        &["SET", "GET", "INCR", "LPUSH", "LRANGE_100 (first 100 elements)"],
    );
    let stats = redis_cli(&lab, &["info", "stats"]);
    let counter = |name: &str| -> u64 {
        let line = stats.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap_or_else(|| panic!("{stats}"));
        line.trim().rsplit(':').next().unwrap().parse().unwrap()
    };
    // Both counters are of requests the I/O threads served: the threads did run.
    let (reads, writes) = (counter("io_threaded_reads_processed"), counter("io_threaded_writes_processed"));
    eprintln!("redis_with_io_threads_runs_under_pronghorn_run: {reads} reads and {writes} writes by I/O threads");
    assert!(reads > 0 && writes > 0, "{stats}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// mariadbd --user=mysql under `pronghorn run`: sysbench oltp_read_write with 64 threads and a
/// bounded number of transactions completes with no error but retried deadlocks (InnoDB's
/// answer to two transactions locking rows in opposite orders: not a transport fault) and no
/// reconnect, and every table keeps each of its ids once (the test deletes and re-inserts the same
/// ids). sysbench's data is random even with a fixed --rand-seed (two prepares with seed 42 gave
/// different CHECKSUM TABLE), so what is compared with a kernel mariadbd is the state after
/// statements whose end result is fixed: 16 connections each rewriting, updating, deleting and
/// inserting its own share of the rows. Row counts and CHECKSUM TABLE must match.
#[test]
fn mariadb_under_pronghorn_run_matches_the_kernel() {
    let Some(lab_test) = scenario(MARIADB_TOOLS) else { return };
    let lab = Lab::up("tst-maria", &[]);
    let dir = std::env::temp_dir().join(format!("pronghorn-mariadb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let accel = Mariadb::start(&lab, &dir, "10.99.0.1", true, &[]);
    let kernel = Mariadb::start(&lab, &dir, "10.98.0.1", false, &[]);
    let (tables, size) = (4u32, 10_000u32);
    for m in [&accel, &kernel] {
        m.sysbench(&lab, &["oltp_read_write", "prepare"]);
    }
    let shape = (1..=tables)
        .map(|t| format!("SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM sbtest.sbtest{t}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let full = format!("{size}\t{size}\t1\t{size}\n").repeat(tables as usize);
    assert_eq!(accel.sql(&lab, &shape), full);

    let out = accel.sysbench(&lab, &["--threads=64", "--events=2000", "--time=0", "oltp_read_write", "run"]);
    let count = |key: &str| -> u64 {
        let line = out.lines().map(str::trim).find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("{out}"));
        line[key.len()..].split_whitespace().next().unwrap().parse().unwrap()
    };
    assert_eq!(count("transactions:"), 2000, "{out}");
    assert_eq!(count("reconnects:"), 0, "{out}");
    eprintln!("{}: 2000 transactions, 64 threads, {} deadlocks retried", lab_test.name(), count("ignored errors:"));
    assert_eq!(accel.sql(&lab, &shape), full, "oltp_read_write changed which ids the tables hold");

    let conns = 16u32;
    let mut expected = i64::from(size);
    for c in 0..conns {
        let (sql, delta) = deterministic_sql(c, conns, tables, size);
        std::fs::write(dir.join(format!("conn-{c}.sql")), sql).unwrap();
        expected += delta / i64::from(tables);
    }
    for m in [&accel, &kernel] {
        let clients: Vec<Child> = (0..conns)
            .map(|c| {
                let script = std::fs::File::open(dir.join(format!("conn-{c}.sql"))).unwrap();
                lab.exec("b", &["mariadb", "-h", m.addr, "-u", "bench", "sbtest"]).stdin(script).spawn().unwrap()
            })
            .collect();
        for mut c in clients {
            assert!(c.wait().unwrap().success(), "a scripted connection to {} failed", m.addr);
        }
    }
    let tables_list = (1..=tables).map(|t| format!("sbtest.sbtest{t}")).collect::<Vec<_>>().join(", ");
    let summary = |m: &Mariadb| {
        let counts = (1..=tables)
            .map(|t| format!("SELECT COUNT(*) FROM sbtest.sbtest{t}"))
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        (m.sql(&lab, &counts), m.sql(&lab, &format!("CHECKSUM TABLE {tables_list}")))
    };
    let (a, k) = (summary(&accel), summary(&kernel));
    eprintln!("{}: {expected} rows per table; CHECKSUM TABLE {}", lab_test.name(), a.1.replace('\n', " "));
    assert_eq!(a.0, format!("{expected}\n").repeat(tables as usize), "row counts under pronghorn");
    assert_eq!(a.1.lines().filter(|l| l.split('\t').nth(1).is_some_and(|c| c.parse::<u64>().is_ok())).count(), 4);
    assert_eq!(a, k, "pronghorn's mariadbd and the kernel's hold different data");
    accel.stop();
    drop(kernel);
    let _ = std::fs::remove_dir_all(&dir);
}

/// mariadbd with its thread pool (`--thread-handling=pool-of-threads`) under `pronghorn run`:
/// the pool's listener thread waits in epoll_wait on a set with no member yet, and the threads
/// that log connections in add them to it. That wait used to go to the kernel's epoll_wait,
/// which never hears of an accelerated socket: the server stopped reading queries until a
/// signal happened to interrupt the wait. sysbench's oltp_point_select with 16 threads and a
/// bounded number of transactions completes with no error and no reconnect.
#[test]
fn mariadb_thread_pool_under_pronghorn_run_serves_every_connection() {
    let Some(lab_test) = scenario(MARIADB_TOOLS) else { return };
    let lab = Lab::up("tst-mpool", &[]);
    let dir = std::env::temp_dir().join(format!("pronghorn-mpool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let accel = Mariadb::start(&lab, &dir, "10.99.0.1", true, &["--thread-handling=pool-of-threads"]);
    // Every client under `timeout`: a lost wakeup fails the test instead of hanging it.
    let client = |cmd: &[&str]| {
        let mut bounded = vec!["timeout", "120"];
        bounded.extend_from_slice(cmd);
        let o = lab.exec("b", &bounded).output().unwrap();
        let t = text(&o);
        assert!(o.status.success() && !t.contains("FATAL"), "{cmd:?} ({:?}): {t}", o.status);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let select = ["mariadb", "-h", "10.99.0.1", "-u", "bench", "-N", "-B", "-e", "SELECT @@thread_handling"];
    assert_eq!(client(&select), "pool-of-threads\n");
    let sysbench = |args: &[&str]| {
        let mut cmd = vec!["sysbench", "--db-driver=mysql", "--mysql-host=10.99.0.1", "--mysql-user=bench"];
        cmd.extend_from_slice(&["--mysql-db=sbtest", "--tables=1", "--table-size=10000"]);
        cmd.extend_from_slice(args);
        client(&cmd)
    };
    sysbench(&["oltp_point_select", "prepare"]);
    let out = sysbench(&["--threads=16", "--events=20000", "--time=0", "oltp_point_select", "run"]);
    let count = |key: &str| -> u64 {
        let line = out.lines().map(str::trim).find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("{out}"));
        line[key.len()..].split_whitespace().next().unwrap().parse().unwrap()
    };
    assert_eq!(count("transactions:"), 20000, "{out}");
    assert_eq!(count("ignored errors:"), 0, "{out}");
    assert_eq!(count("reconnects:"), 0, "{out}");
    eprintln!("{}: 20000 point selects over 16 connections to the thread pool", lab_test.name());
    accel.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 16 MiB BLOB goes into mariadbd under `pronghorn run` (as a 32 MiB hex literal: MySQL
/// protocol packets split at 16 MiB) and comes back byte-identical as binary; the server's
/// SHA2() and MD5() of it match the client's.
#[test]
fn mariadb_16_mib_blob_round_trips_under_pronghorn_run() {
    let Some(_scenario) = scenario(MARIADB_TOOLS) else { return };
    let lab = Lab::up("tst-blob", &[]);
    let dir = std::env::temp_dir().join(format!("pronghorn-blob-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let accel = Mariadb::start(&lab, &dir, "10.99.0.1", true, &["--max-allowed-packet=64M"]);
    let mut blob = vec![0u8; 16 << 20];
    stack::echo::Stream::new(16).fill(&mut blob);
    let blob_file = dir.join("blob.bin");
    std::fs::write(&blob_file, &blob).unwrap();
    let mut sql = String::with_capacity(blob.len() * 2 + 200);
    sql += "CREATE TABLE sbtest.blobs (id INT PRIMARY KEY, b LONGBLOB);\nINSERT INTO sbtest.blobs VALUES (1, 0x";
    for byte in &blob {
        sql.push(b"0123456789abcdef"[usize::from(byte >> 4)] as char);
        sql.push(b"0123456789abcdef"[usize::from(byte & 15)] as char);
    }
    sql += ");\n";
    let insert = dir.join("insert.sql");
    std::fs::write(&insert, sql).unwrap();
    let client = ["mariadb", "--max-allowed-packet=64M", "-h", "10.99.0.1", "-u", "bench", "-N", "-B"];
    let o = lab.exec("b", &client).stdin(std::fs::File::open(&insert).unwrap()).output().unwrap();
    assert!(o.status.success(), "insert: {}", text(&o));
    let digest = |tool: &str| {
        let o = Command::new(tool).arg(&blob_file).output().unwrap();
        String::from_utf8_lossy(&o.stdout)[..if tool == "md5sum" { 32 } else { 64 }].to_string()
    };
    let server = accel.sql(&lab, "SELECT LENGTH(b), SHA2(b, 256), MD5(b) FROM sbtest.blobs WHERE id = 1");
    assert_eq!(server, format!("{}\t{}\t{}\n", 16 << 20, digest("sha256sum"), digest("md5sum")));
    let mut read = client.to_vec();
    read.extend_from_slice(&["--raw", "-e", "SELECT b FROM sbtest.blobs WHERE id = 1"]);
    let o = lab.exec("b", &read).output().unwrap();
    assert!(o.status.success(), "read back: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout.len(), blob.len() + 1, "read back {} bytes", o.stdout.len());
    assert!(o.stdout[..blob.len()] == blob[..] && o.stdout[blob.len()] == b'\n', "the BLOB read back differs");
    accel.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn iperf3_and_nginx_run_unmodified_under_pronghorn_run() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-apps", &[]);

    // iperf3 -s: both directions, 1 and 4 streams.
    let mut iperf = lab
        .exec("a", &[bin(), "run", "--", "iperf3", "-s", "-B", "10.99.0.1", "-p", "5201", "--forceflush"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(iperf.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("---"), "{line}");
    // iperf3 reports every second: keep its pipe drained.
    std::thread::spawn(move || while out.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {});
    let iperf = Accelerated(iperf);
    for extra in [&[][..], &["-R"][..], &["-P", "4"][..], &["-P", "4", "-R"][..]] {
        let mut cmd = vec!["iperf3", "-c", "10.99.0.1", "-p", "5201", "-t", "2", "-J"];
        cmd.extend_from_slice(extra);
        let o = lab.exec("b", &cmd).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && !out.contains("\"error\""), "iperf3 {extra:?}: {}", text(&o));
        assert!(out.contains("\"sum_received\""), "{out}");
    }
    // UDP both ways (iperf3's server connects a UDP socket to each client and binds a new one
    // beside it with SO_REUSEADDR): datagrams counted at the receiving end.
    for extra in [&[][..], &["-R"][..]] {
        let mut cmd = vec!["iperf3", "-u", "-b", "20M", "-c", "10.99.0.1", "-p", "5201", "-t", "2", "-J"];
        cmd.extend_from_slice(extra);
        let o = lab.exec("b", &cmd).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && !out.contains("\"error\""), "iperf3 -u {extra:?}: {}", text(&o));
        // The largest "packets" figure is the whole run's.
        let packets = out.split("\"packets\":").skip(1).filter_map(|t| t.split([',', '}']).next()?.trim().parse().ok());
        let packets: u64 = packets.max().unwrap_or_else(|| panic!("no datagram counts: {out}"));
        assert!(packets > 1000, "iperf3 -u {extra:?}: {packets} datagrams: {out}");
    }
    drop(iperf);

    // nginx without a master process: small pages and a 10 MiB file through sendfile.
    let (dir, big) = nginx_site("pronghorn-nginx", "off", 10 << 20, "hello from pronghorn\n");
    let conf = dir.join("nginx.conf");
    let nginx =
        Accelerated(lab.exec("a", &[bin(), "run", "--", "nginx", "-c", conf.to_str().unwrap()]).spawn().unwrap());
    let o = until_ok(&lab, &["curl", "-sf", "http://10.99.0.1:8080/index.html"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from pronghorn\n");
    let got = dir.join("big.got");
    let o =
        lab.exec("b", &["curl", "-sf", "http://10.99.0.1:8080/big.bin", "-o", got.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::read(&got).unwrap() == big, "10 MiB file differs");
    // wrk, keep-alive and not: every response a 200.
    for extra in [&[][..], &["-H", "Connection: close"][..]] {
        let mut cmd = vec!["wrk", "-t1", "-c20", "-d1s"];
        cmd.extend_from_slice(extra);
        cmd.push("http://10.99.0.1:8080/index.html");
        let o = lab.exec("b", &cmd).output().unwrap();
        let t = text(&o);
        assert!(o.status.success() && t.contains("Requests/sec") && !t.contains("Non-2xx"), "wrk {extra:?}: {t}");
    }
    drop(nginx);

    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compatibility_suite_matches_the_kernel() {
    let Some(_scenario) = scenario(&[]) else { return };
    let kernel = KernelPair::up("tst-ck");
    let lab = Lab::up("tst-compat", &[]);
    let _kp = compat_peer(kernel.exec("b", &["python3", &compat_py(), "peer", "7100"]));
    let _lp = compat_peer(lab.exec("b", &["python3", &compat_py(), "peer", "7100"]));
    for (peer, local) in [("10.99.0.2", "10.99.0.1"), ("fd99::2", "fd99::1")] {
        let app = ["python3", &compat_py(), "app", peer, "7100", local];
        let k = kernel.exec("a", &app).output().unwrap();
        assert!(k.status.success(), "kernel run: {}", text(&k));
        let mut under = vec![bin(), "run", "--"];
        under.extend_from_slice(&app);
        let p = lab.exec("a", &under).output().unwrap();
        assert!(p.status.success(), "pronghorn run: {}", text(&p));
        let (k, p) = (String::from_utf8_lossy(&k.stdout), String::from_utf8_lossy(&p.stdout));
        assert!(k.contains("\"connect_refused\""), "{k}");
        assert_eq!(p, k, "socket semantics differ from the kernel over {peer}");
    }
}

/// Issue 12, TCP on the wire: tests/lab/wire.py sends the same crafted segments from side b to
/// a listener under pronghorn and to one on the Linux kernel (the lab's kernel path, in side a
/// too) and compares the answers. Its output lists the cases; a difference prints both
/// transcripts.
#[test]
fn crafted_segments_are_answered_as_the_linux_kernel_answers_them() {
    let Some(_scenario) = scenario(&[("nft", "nftables")]).filter(|s| have_scapy(s.name())) else { return };
    let lab = Lab::up("tst-wire", &[]);
    // The kernel's segments as the wire carries them: no TSO/GSO super-packets on its veth.
    let kernel_veth = format!("{}-k0", lab.prefix);
    let o = lab.exec("a", &["ethtool", "-K", &kernel_veth, "tso", "off", "gso", "off"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let wire = wire_py();
    let (pronghorn, kernel) = ("10.99.0.1,fd99::1", "10.98.0.1,fd98::1");
    let _kernel = compat_peer(lab.exec("a", &[DEBIAN_PYTHON, &wire, "server", kernel, "7300"]));
    let _pronghorn =
        compat_peer(lab.exec("a", &[bin(), "run", "--", DEBIAN_PYTHON, &wire, "server", pronghorn, "7300"]));
    let o = lab.exec("b", &[DEBIAN_PYTHON, &wire, "compare", pronghorn, kernel, "7300"]).output().unwrap();
    let out = text(&o);
    eprintln!("{out}");
    assert!(out.contains("\"differ\": []"), "pronghorn answers differently from the kernel:\n{out}");
    assert!(o.status.success(), "{out}");
}

/// Issue 22: segments from martian sources (above all an IPv4-mapped IPv6 source, which used
/// to abort the server on its SYN-ACK or RST), sent with scapy from side b to a server under
/// pronghorn bound to 10.99.0.1 and fd99::1: none is answered, each is counted in
/// `drop_bad_source`, and the server still serves both families (tests/lab/martians.py).
#[test]
fn segments_from_martian_sources_are_dropped_and_the_server_keeps_serving() {
    let Some(_scenario) = scenario(&[]).filter(|s| have_scapy(s.name())) else { return };
    let lab = Lab::up("tst-martian", &[]);
    let addrs = "10.99.0.1,fd99::1";
    let server = compat_peer(lab.exec("a", &[bin(), "run", "--", DEBIAN_PYTHON, &wire_py(), "server", addrs, "7400"]));
    let martians = format!("{}/../../tests/lab/martians.py", env!("CARGO_MANIFEST_DIR"));
    let side_b = |step: &str| {
        let o = lab.exec("b", &[DEBIAN_PYTHON, &martians, step, addrs, "7400"]).output().unwrap();
        let out = text(&o);
        eprintln!("{out}");
        assert!(o.status.success(), "martians.py {step}: {out}");
    };
    side_b("send");
    let stat = stat_of_process_on(&format!("{}-a0", lab.prefix)).1;
    let dropped = stat["shards"][0]["drop_bad_source"].as_f64().unwrap_or(0.0);
    assert!(dropped >= 27.0, "drop_bad_source {dropped}: {stat}");
    side_b("serves");
    drop(server);
}

#[test]
fn sockperf_server_runs_unmodified_under_pronghorn_run() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-sockperf", &[]);
    let mut server = lab
        .exec("a", &[bin(), "run", "--", "sockperf", "server", "--tcp", "-i", "10.99.0.1", "-p", "11111"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("10.99.0.1") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "sockperf server ended");
    }
    std::thread::spawn(move || while out.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {});
    let pid = server.id();
    let mut server = Accelerated(server);
    for (mode, expect) in [("ping-pong", "Summary: Latency is"), ("throughput", "Summary: Message Rate is")] {
        let o = lab
            .exec("b", &["sockperf", mode, "--tcp", "-i", "10.99.0.1", "-p", "11111", "-t", "2", "-m", "64"])
            .output()
            .unwrap();
        let t = text(&o);
        assert!(o.status.success() && t.contains(expect) && !t.contains("ERROR"), "sockperf {mode}: {t}");
    }
    // Killed with SIGKILL, it cannot clean up: its `pronghorn reap` helper detaches the XDP
    // program and removes the EAL directory.
    let dir = format!("/var/run/dpdk/pronghorn-{pid}");
    assert!(Path::new(&dir).exists(), "{dir} while the server runs");
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let xdp_attached = || lab.xdp_attached();
    let mut left = true;
    for _ in 0..1000 {
        left = Path::new(&dir).exists() || xdp_attached();
        if !left {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(!left, "after SIGKILL: directory {} / XDP attached {}", Path::new(&dir).exists(), xdp_attached());
}

/// The benchmark harness end to end, tiny: one round of each path of redis-cps --quick, its
/// JSON carrying both paths' figures and a ratio, and the lab it brought up gone afterwards.
#[test]
fn bench_runs_kernel_and_pronghorn_side_by_side() {
    let Some(_scenario) = scenario(&[]) else { return };
    let out = std::env::temp_dir().join(format!("pronghorn-bench-test-{}", std::process::id()));
    let o = pronghorn(&[
        "bench",
        "redis-cps",
        "--quick",
        "--rounds",
        "1",
        "--prefix",
        "tst-bench",
        "--out",
        out.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("GET -k 0 -c 50") && t.contains("pronghorn/kernel"), "{t}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("redis-cps-quick.json")).unwrap()).unwrap();
    let rps = json["summary"].as_array().unwrap().iter().find(|s| s["metric"] == "rps").unwrap();
    let (k, p) = (rps["kernel_median"].as_f64().unwrap(), rps["pronghorn_median"].as_f64().unwrap());
    assert!(k > 0.0 && p > 0.0, "{rps}");
    assert!((rps["ratio_median"].as_f64().unwrap() - p / k).abs() < 1e-9, "one round: the ratio is p/k");
    let paths: Vec<&str> = json["runs"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["kernel", "pronghorn"]);
    assert!(out.join("redis-cps-quick.md").exists());
    assert!(!std::path::Path::new("/run/netns/tst-bench-a").exists(), "the lab it brought up is down");
    let _ = std::fs::remove_dir_all(&out);
}

/// `bench --model nic` on a lab it did not bring up: while it runs, RPS steers the kernel
/// server's receive (k0) to the server's core 1 and side b's (k1, b0) to the client's core 0,
/// and the XDP veth's NAPI is a kthread pinned to core 1 (the JSON records each file as read
/// back after the write); afterwards the lab has its own values again and the kthread is gone.
/// The veth model refuses a lab that still has RPS set. `lab model dma` sets the same RPS and
/// leaves the XDP veth's NAPI unthreaded, and restores the lab too.
#[test]
fn bench_nic_model_sets_and_restores_the_receive_placement() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-nic", &[]);
    let p = lab.prefix.clone();
    let files = [
        ("a", format!("/sys/class/net/{p}-k0/queues/rx-0/rps_cpus"), "2"),
        ("b", format!("/sys/class/net/{p}-k1/queues/rx-0/rps_cpus"), "1"),
        ("b", format!("/sys/class/net/{p}-b0/queues/rx-0/rps_cpus"), "1"),
        ("a", format!("/sys/class/net/{p}-a0/threaded"), "1"),
    ];
    let read = |side: &str, file: &str| {
        let o = lab.exec(side, &["cat", file]).output().unwrap();
        assert!(o.status.success(), "cat {file}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let gro = || {
        let o = lab.exec("a", &["ethtool", "-k", &format!("{p}-a0")]).output().unwrap();
        text(&o).lines().find(|l| l.contains("generic-receive-offload")).unwrap_or_default().trim().to_string()
    };
    let before: Vec<String> = files.iter().map(|(side, file, _)| read(side, file)).collect();
    let gro_before = gro();
    let out = std::env::temp_dir().join(format!("pronghorn-bench-nic-test-{}", std::process::id()));
    let args = ["bench", "latency", "--quick", "--rounds", "1", "--model", "nic", "--prefix", &p];
    let o = Command::new(bin()).args(args).args(["--out", out.to_str().unwrap()]).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("lab model nic") && t.contains("nic-like"), "{t}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("latency-nic-quick.json")).unwrap()).unwrap();
    let model = &json["model"];
    assert_eq!(model["model"], "nic", "{model}");
    let settings = model["settings"].as_array().unwrap();
    for (_, file, want) in &files {
        let s = settings.iter().find(|s| s["file"] == file.as_str()).unwrap_or_else(|| panic!("{file}: {model}"));
        assert_eq!(s["set"].as_str().unwrap().trim_start_matches('0'), *want, "{file}: {s}");
    }
    let threads = model["napi_threads"].as_array().unwrap();
    assert!(!threads.is_empty() && threads.iter().all(|t| t["cpus"] == "1"), "{model}");
    let md = std::fs::read_to_string(out.join("latency-nic-quick.md")).unwrap();
    assert!(md.contains("lab model nic") && md.contains("Lab model: nic-like"), "{md}");
    let after: Vec<String> = files.iter().map(|(side, file, _)| read(side, file)).collect();
    assert_eq!(after, before, "every file has its value of before the bench");
    assert_eq!(gro(), gro_before);
    for t in threads {
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", t["pid"])).unwrap_or_default();
        assert_ne!(comm.trim(), t["name"].as_str().unwrap(), "the NAPI kthread still runs");
    }
    assert!(netns_exists(&format!("{p}-a")), "the lab the bench did not bring up stays up");
    // A lab left with RPS (by a bench killed in the nic model) is not measured as the veth model.
    let (_, k0, _) = &files[0];
    assert!(lab.exec("a", &["sh", "-c", &format!("echo 2 > {k0}")]).status().unwrap().success());
    let veth = ["bench", "latency", "--quick", "--rounds", "1", "--model", "veth", "--prefix", &p];
    let o = Command::new(bin()).args(veth).args(["--out", out.to_str().unwrap()]).output().unwrap();
    let t = text(&o);
    assert!(!o.status.success() && t.contains(k0.as_str()) && t.contains("not as `lab up` made it"), "{t}");
    assert!(lab.exec("a", &["sh", "-c", &format!("echo 0 > {k0}")]).status().unwrap().success());
    // `lab model` puts the model around any command (the Python benchmarks' way to it): the
    // command runs with the files set, its exit status is the action's, and the lab is back.
    let script = format!("ip netns exec {p}-a cat {k0}; echo \"$PRONGHORN_LAB_MODEL\"; exit 3");
    let o =
        Command::new(bin()).args(["lab", "model", "nic", "--prefix", &p, "--", "sh", "-c", &script]).output().unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    let seen: Vec<&str> = t.lines().take(2).collect();
    assert_eq!(seen.len(), 2, "{t}");
    assert_eq!((seen[0].trim_start_matches('0'), seen[1]), ("2", "nic"), "{t}");
    let after: Vec<String> = files.iter().map(|(side, file, _)| read(side, file)).collect();
    assert_eq!(after, before, "every file has its value of before `lab model`");
    assert_eq!(gro(), gro_before);
    // The dma model steers the kernel receives as nic does and leaves the XDP veth's NAPI as
    // the lab made it (not threaded: its receive stays on the sender's core).
    let (_, a0_threaded, _) = &files[3];
    let script = format!(
        "ip netns exec {p}-a cat {k0} {a0_threaded}; ip netns exec {p}-b cat {}; echo \"$PRONGHORN_LAB_MODEL\"",
        files[1].1
    );
    let o =
        Command::new(bin()).args(["lab", "model", "dma", "--prefix", &p, "--", "sh", "-c", &script]).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let seen: Vec<&str> = t.lines().take(4).map(|l| l.trim_start_matches('0')).collect();
    assert_eq!(seen, ["2", "", "1", "dma"], "k0's rps_cpus, a0's threaded (0), k1's rps_cpus, the model: {t}");
    let after: Vec<String> = files.iter().map(|(side, file, _)| read(side, file)).collect();
    assert_eq!(after, before, "every file has its value of before `lab model dma`");
    assert_eq!(gro(), gro_before, "the dma model leaves GRO alone");
    let _ = std::fs::remove_dir_all(&out);
}

/// Issue 10: nginx's default process model under `pronghorn run`. The master forks its workers
/// before anything is served, so each worker opens its own queue of the lab's two-queue veth
/// (the kernel side spreads connections over the queues) and serves the inherited listener.
#[test]
fn nginx_worker_processes_each_serve_on_their_own_queue() {
    let Some(_scenario) = scenario(&[]) else { return };
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let workers = cpus.clamp(2, 8);
    let lab = Lab::up("tst-workers", &["--queues", &workers.to_string()]);
    let dir = nginx_workers_site("pronghorn-nginx-workers", workers);
    let conf = |procs: &str, listen: &str| nginx_workers_conf(&dir, procs, listen);
    let conf_path = dir.join("nginx.conf");
    let start = || NginxMaster {
        child: lab.exec("a", &[bin(), "run", "--", "nginx", "-c", conf_path.to_str().unwrap()]).spawn().unwrap(),
        pid_file: dir.join("nginx.pid"),
    };
    let mut nginx = start();
    let url = "http://10.99.0.1:8080/index.html";
    // Every worker up with a port of its own (its EAL directory), and answering.
    let serving = |pids: &[u32]| {
        pids.len() == workers && pids.iter().all(|p| Path::new(&format!("/var/run/dpdk/pronghorn-{p}")).exists())
    };
    eventually("every worker opened its own port", || serving(&nginx.workers()));
    let all_answer = |n: usize| {
        for _ in 0..n {
            let o = lab.exec("b", &["curl", "-sf", "-m", "10", url]).output().unwrap();
            assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n", "{}", text(&o));
        }
    };
    all_answer(20);
    let wrk_clean = || {
        for extra in [&[][..], &["-H", "Connection: close"][..]] {
            let mut cmd = vec!["wrk", "-t1", "-c20", "-d1s"];
            cmd.extend_from_slice(extra);
            cmd.push(url);
            let o = lab.exec("b", &cmd).output().unwrap();
            let t = text(&o);
            assert!(
                o.status.success()
                    && t.contains("Requests/sec")
                    && !t.contains("Non-2xx")
                    && !t.contains("Socket errors"),
                "wrk {extra:?}: {t}"
            );
        }
    };
    wrk_clean();

    // A worker killed: the master starts another, which claims the freed queue; the cleanup
    // helper removes what the dead one left.
    let before = nginx.workers();
    nginx.signal("-KILL", before[0]);
    eventually("a new worker serves in place of the killed one", || {
        let now = nginx.workers();
        serving(&now) && !now.contains(&before[0])
    });
    eventually("the killed worker's EAL directory is removed", || {
        !Path::new(&format!("/var/run/dpdk/pronghorn-{}", before[0])).exists()
    });
    all_answer(20);

    // nginx -s reload under wrk (with `worker_processes auto` where that is as many as the
    // queues): new workers wait for the old ones' queues, then serve. A SYN that finds an old
    // worker's listener closed is left for its retransmission (`tcp_syns_left_unanswered`), so
    // no connection is refused (side b's kernel counts no failed attempt): wrk's only errors are
    // connections the old workers reset as they closed (keep-alive ones, and those their
    // listeners had completed and not accepted), read errors, or write errors when the reset
    // came before wrk wrote its request.
    if cpus == workers {
        std::fs::write(&conf_path, conf("auto", "")).unwrap();
    }
    let mut wrk = WrkUnderway::start(&lab, url, 8, &[]);
    let fails_before = attempt_fails(&lab);
    let before = nginx.workers();
    nginx.signal("-HUP", nginx.pid());
    eventually("a new set of workers serves after reload", || {
        let now = nginx.workers();
        serving(&now) && now.iter().all(|p| !before.contains(p))
    });
    assert!(wrk.running(), "wrk ended before the reload was done: make its run longer");
    let (errors, report) = wrk.finish();
    assert_eq!(attempt_fails(&lab), fails_before, "connections refused: {report}");
    // A connection reset before wrk wrote its request counts as a write error: at most one
    // reset per connection and old worker.
    let resets = errors.read + errors.write;
    assert!(resets <= (workers * WRK_CONNECTIONS) as u64, "wrk: {report}");
    assert_eq!(errors, WrkErrors { read: errors.read, write: errors.write, ..WrkErrors::default() }, "wrk: {report}");
    all_answer(20);

    // A graceful stop: the last worker out detaches the XDP program; nothing is left behind.
    let last = nginx.workers();
    nginx.signal("-QUIT", nginx.pid());
    eventually("the master exits", || nginx.child.try_wait().unwrap().is_some());
    eventually("no EAL directory of a worker is left", || {
        last.iter().all(|p| !Path::new(&format!("/var/run/dpdk/pronghorn-{p}")).exists())
    });
    let o = Command::new("ip").args(["-n", "tst-workers-a", "link", "show", "tst-workers-a0"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&o.stdout).contains("xdp"), "XDP program left: {}", text(&o));
    drop(nginx);

    // `listen ... reuseport`: the master makes a listener per worker and every worker inherits
    // them all; each serves the one it waits on.
    std::fs::write(&conf_path, conf(&workers.to_string(), " reuseport")).unwrap();
    let nginx = start();
    eventually("every worker opened its own port (reuseport)", || serving(&nginx.workers()));
    all_answer(20);
    wrk_clean();
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
}

/// nginx under `--profile nginx-reload` (`[runtime] share = "family"`; a lab of one queue): the
/// master (`listen` opens the NIC in it) serves through its workers, sharing children that run
/// as nobody on its shards, with no port of their own.
fn nginx_sharing_its_masters_stack(lab: &Lab, name: &str) -> (NginxMaster, PathBuf) {
    let dir = nginx_workers_site(name, 2);
    let conf = dir.join("nginx.conf");
    let argv = [bin(), "run", "--profile", "nginx-reload", "--", "nginx", "-c", conf.to_str().unwrap()];
    let nginx = NginxMaster { child: lab.exec("a", &argv).spawn().unwrap(), pid_file: dir.join("nginx.pid") };
    let eal = |pid: u32| Path::new(&format!("/var/run/dpdk/pronghorn-{pid}")).exists();
    eventually("the master opened the NIC and two workers run", || eal(nginx.pid()) && nginx.workers().len() == 2);
    let url = "http://10.99.0.1:8080/index.html";
    let o = until_ok(lab, &["curl", "-sf", "-m", "10", url]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n");
    assert!(!nginx.workers().iter().any(|&w| eal(w)), "a worker opened a port of its own");
    (nginx, dir)
}

/// Issue 24: `nginx -s reload` under wrk (20 connections) with `--profile nginx-reload`
/// (`share = "family"`): the new
/// workers are the master's children on the same shards and listener as the old ones, so no
/// connection is refused or reset. The bar is Linux's own nginx, measured on the kernel path
/// (docs/design-notes.md, "nginx reload ... under share = family"): with Connection: close no
/// error at all; with keep-alive wrk counts a read error for each connection an old worker closed
/// as it left (at most one per connection) and nothing else. With per-process queues (share
/// off) the same reload gave 18-40 write errors (connections reset) in each run.
#[test]
fn nginx_reloads_under_wrk_without_errors_with_share_family() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-reload", &[]);
    let (nginx, dir) = nginx_sharing_its_masters_stack(&lab, "pronghorn-nginx-reload");
    let url = "http://10.99.0.1:8080/index.html";
    for extra in [&[][..], &["-H", "Connection: close"][..]] {
        let mut wrk = WrkUnderway::start(&lab, url, 8, extra);
        let before = nginx.workers();
        nginx.signal("-HUP", nginx.pid());
        eventually("a new set of workers runs after the reload", || {
            let now = nginx.workers();
            now.len() == 2 && now.iter().all(|p| !before.contains(p))
        });
        assert!(wrk.running(), "wrk ended before the reload was done: make its run longer");
        let (errors, report) = wrk.finish();
        let closed_keep_alive = if extra.is_empty() { errors.read.min(WRK_CONNECTIONS as u64) } else { 0 };
        assert_eq!(errors, WrkErrors { read: closed_keep_alive, ..WrkErrors::default() }, "wrk {extra:?}: {report}");
    }
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 24: nginx's master killed with SIGKILL under wrk (20 keep-alive connections), with
/// `--profile nginx-reload` (its two workers on the master's stack). On Linux the workers serve
/// on; here one of them finds the master gone within a second and drives the NIC
/// (`family::succession`): wrk counts no error but timeouts (a request caught in the second
/// without a driver may wait that long; none was seen by hand), new connections are served, and
/// when the workers quit the last of them closes the port: no EAL directory and no XDP program
/// are left. Before, the workers were left without a stack and nothing more was served.
#[test]
fn nginx_serves_on_when_its_master_is_killed_with_share_family() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-ngxkill", &[]);
    let (nginx, dir) = nginx_sharing_its_masters_stack(&lab, "pronghorn-nginx-kill");
    let (master, workers) = (nginx.pid(), nginx.workers());
    // Reparented once the master is gone: the master's drop no longer finds them.
    let _workers: Vec<KillTree> = workers.iter().map(|&w| KillTree(w)).collect();
    let url = "http://10.99.0.1:8080/index.html";
    let mut wrk = WrkUnderway::start(&lab, url, 6, &[]);
    nginx.signal("-KILL", master);
    assert!(wrk.running(), "wrk ended before the master was killed: make its run longer");
    let (errors, report) = wrk.finish();
    assert_eq!(WrkErrors { timeout: 0, ..errors }, WrkErrors::default(), "{report}");
    for _ in 0..10 {
        let o = lab.exec("b", &["curl", "-sf", "-m", "10", url]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n", "after the master's death");
    }
    for &w in &workers {
        nginx.signal("-QUIT", w);
    }
    let eal = format!("/var/run/dpdk/pronghorn-{master}");
    eventually("the workers end, the port is closed and the XDP program detached", || {
        workers.iter().all(|w| {
            let stat = std::fs::read_to_string(format!("/proc/{w}/stat")).unwrap_or_default();
            stat.is_empty() || stat.contains(") Z ")
        }) && !Path::new(&eal).exists()
            && !Path::new(&format!("{eal}.keeper")).exists()
            && !lab.xdp_attached()
    });
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 24 stage 4: under `share = "family"` (`--profile nginx-reload`) listen() opens the NIC,
/// so an nginx with `daemon on` opens it in the process that daemon's fork then leaves. The
/// exiting opener forks a keeper (`pronghorn-keep`) that drives the NIC for the family: the
/// daemon master and the workers it forks (children of a child) serve through it, across a
/// reload under wrk too. When the last of them has ended (nginx -s quit) the keeper finishes as the opener would have: its port
/// closed (the EAL directory, still named by the opener, goes), its XDP program detached.
#[test]
fn a_family_whose_opener_exits_first_is_served_by_its_keeper() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-daemon", &[]);
    let (dir, conf) = nginx_daemon_site("pronghorn-nginx-daemon", 2);
    let text_of = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let stderr = dir.join("run.stderr");
    let argv = ["run", "--profile", "nginx-reload", "--", "nginx", "-c", conf.to_str().unwrap()];
    let mut run = lab.exec("a", &[&[bin()][..], &argv[..]].concat());
    let mut child = run.stdout(Stdio::null()).stderr(std::fs::File::create(&stderr).unwrap()).spawn().unwrap();
    let opener = child.id();
    // `pronghorn run` ends with the process it started, daemon's parent.
    assert!(child.wait().unwrap().success());
    let nginx = NginxMaster { child, pid_file: dir.join("nginx.pid") };
    eventually("the daemon writes its pid file", || dir.join("nginx.pid").exists());
    let said = text_of(&stderr);
    let line = said.lines().find(|l| l.contains("(pronghorn-keep)")).unwrap_or_default().to_string();
    let daemon = nginx.pid();
    assert!(
        line.starts_with(&format!("pronghorn: pid {opener} ")) && line.contains(&format!(" {daemon} still use")),
        "the exiting opener {opener} did not name its child {daemon} and its keeper: {said}"
    );
    let keeper: u32 =
        line.split(" (pronghorn-keep)").next().and_then(|l| l.rsplit(' ').next()).unwrap().parse().unwrap();
    // Named as it leaves the program's world, just after the fork that the opener's line follows.
    eventually("the keeper names itself", || {
        text_of(Path::new(&format!("/proc/{keeper}/comm"))).trim() == "pronghorn-keep"
    });
    let url = "http://10.99.0.1:8080/index.html";
    let o = until_ok(&lab, &["curl", "-sf", "-m", "10", url]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n");
    // `pronghorn ps` shows the keeper (its own stats region), not the opener that is gone, and
    // `doctor` takes neither the opener's EAL directory nor the XDP program for a leftover.
    let ps = text(&pronghorn(&["ps"]));
    assert!(ps.lines().any(|l| l.contains(&keeper.to_string()) && l.contains("[pronghorn-keep] nginx")), "{ps}");
    assert!(!ps.lines().any(|l| l.split_whitespace().next() == Some(&opener.to_string())), "{ps}");
    let o = lab.exec("a", &[bin(), "doctor", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    for name in ["dpdk run dirs", "xdp program"] {
        let c = report["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).cloned();
        assert!(c.as_ref().is_some_and(|c| c["status"] == "ok"), "doctor's {name}: {c:?}");
    }
    // Both workers (children of the daemon, a child itself) serve: more connections than one
    // worker's turn, each answered.
    let o = lab
        .exec("b", &["sh", "-c", &format!("for i in $(seq 40); do curl -sf -m 10 {url} || exit 1; done")])
        .output()
        .unwrap();
    assert!(o.status.success(), "a request failed: {}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).matches("hello from a worker").count(), 40);
    assert_eq!(nginx.workers().len(), 2);
    // A reload under wrk: the daemon forks new workers after the keeper took over, and the old
    // ones finish theirs; as with the opener driving (`nginx_reloads_under_wrk_...`), only the
    // keep-alive connections old workers closed count an error.
    let mut wrk = WrkUnderway::start(&lab, url, 8, &[]);
    let before = nginx.workers();
    nginx.signal("-HUP", daemon);
    eventually("a new set of workers runs after the reload", || {
        let now = nginx.workers();
        now.len() == 2 && now.iter().all(|p| !before.contains(p))
    });
    assert!(wrk.running(), "wrk ended before the reload was done: make its run longer");
    let (errors, report) = wrk.finish();
    assert_eq!(errors, WrkErrors { read: errors.read.min(WRK_CONNECTIONS as u64), ..WrkErrors::default() }, "{report}");
    // A supervisor's stop signal to the keeper does not end it before its family.
    nginx.signal("-TERM", keeper);
    let o = lab.exec("b", &["curl", "-sf", "-m", "10", url]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n", "after SIGTERM to the keeper");
    // The family ends: the keeper closes the port and goes.
    nginx.signal("-QUIT", daemon);
    let eal = format!("/var/run/dpdk/pronghorn-{opener}");
    let keeper_runs = || {
        let stat = text_of(Path::new(&format!("/proc/{keeper}/stat")));
        !stat.is_empty() && !stat.contains(") Z ")
    };
    eventually("the keeper ends after the family", || !keeper_runs());
    eventually("the port is closed and the XDP program detached", || {
        !Path::new(&eal).exists() && !Path::new(&format!("{eal}.keeper")).exists() && !lab.xdp_attached()
    });
    // By the keeper itself: the cleanup helper (whose stderr is the opener's) had nothing to do.
    let said = text_of(&stderr);
    assert!(!said.contains("ended without closing its port"), "{said}");
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 24: nginx's binary upgrade (USR2: the master forks a child that execs the binary, the
/// listeners' fds named in the NGINX variable) under `share = "family"` (`--profile
/// nginx-reload`): the listeners are on the family's shards, which cannot follow an exec (issue
/// 24 stage 5). It fails clearly and the old master serves on: pronghorn says on stderr (nginx's
/// error log) which inherited fds are accelerated listeners the new program cannot use, the new
/// master finds no socket there and its own bind() fails, and the old master takes its pid file
/// back and answers as before. (With a queue per process, the default, the upgrade works: next
/// test.) nginx ignores USR2 in a master whose parent is still the process that started it
/// (`daemon off` under any supervisor, on the kernel too), so this one runs with `daemon on`:
/// its master is the daemon the listening process forked, served by that process's keeper.
#[test]
fn nginx_binary_upgrade_under_share_family_fails_clearly_and_the_old_master_serves_on() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-upgrade", &[]);
    let (dir, conf) = nginx_daemon_site("pronghorn-nginx-upgrade", 1);
    let text_of = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    // The new binary is exec'd by the path the master was started with.
    let argv = [bin(), "run", "--profile", "nginx-reload", "--", "/usr/sbin/nginx", "-c", conf.to_str().unwrap()];
    let nginx = NginxMaster { child: lab.exec("a", &argv).spawn().unwrap(), pid_file: dir.join("nginx.pid") };
    let url = "http://10.99.0.1:8080/index.html";
    let o = until_ok(&lab, &["curl", "-sf", "-m", "10", url]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n");
    let master = nginx.pid();
    let workers = nginx.workers();
    nginx.signal("-USR2", master);
    let log = dir.join("error.log");
    eventually("the new binary's master fails to listen", || text_of(&log).contains("bind() to 10.99.0.1:8080 failed"));
    let said = text_of(&log);
    let line = said.lines().find(|l| l.contains("execs a new program that inherits accelerated listener(s)"));
    assert!(line.is_some_and(|l| l.starts_with("pronghorn: pid ")), "pronghorn did not say why: {said}");
    eventually("the old master takes its pid file back", || {
        !dir.join("nginx.pid.oldbin").exists() && nginx.pid() == master
    });
    assert_eq!(nginx.workers(), workers, "the old master's workers changed");
    for _ in 0..20 {
        let o = lab.exec("b", &["curl", "-sf", "-m", "10", url]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n", "{}", text(&o));
    }
    nginx.signal("-QUIT", master);
    // Gone, or a zombie of whichever process reaps daemons here.
    let gone = |p: u32| std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |s| s.contains(") Z "));
    eventually("the old master quits", || gone(master));
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 24: nginx's binary upgrade with a queue per process (the default) under wrk: `kill
/// -USR2` of the master (whose listeners wait for the NIC: its workers open their own queues)
/// forks a child that execs the new binary with the listeners inherited; pronghorn hands them
/// over (`process::handover`: the new program is accelerated and takes them back as it loads),
/// so the new master uses them ("using inherited sockets") and starts a worker, which waits for
/// the old worker's queue. `-WINCH` of the old master stops its worker; the new one takes the
/// queue; `-QUIT` ends the old master. No connection is refused (side b's kernel counts no
/// failed attempt: a SYN that finds the old listener closed is left for its retransmission);
/// wrk's only errors are connections the old worker reset as it closed, at most one each. Before, the new master found
/// placeholders, not sockets, and exited (the previous test's outcome).
#[test]
fn nginx_binary_upgrade_hands_the_listeners_to_the_new_binary_under_wrk() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-upgrade2", &[]);
    let (dir, conf) = nginx_daemon_site("pronghorn-nginx-upgrade2", 1);
    let text_of = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let argv = [bin(), "run", "--", "/usr/sbin/nginx", "-c", conf.to_str().unwrap()];
    let nginx = NginxMaster { child: lab.exec("a", &argv).spawn().unwrap(), pid_file: dir.join("nginx.pid") };
    let url = "http://10.99.0.1:8080/index.html";
    let o = until_ok(&lab, &["curl", "-sf", "-m", "10", url]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n");
    let old_master = nginx.pid();
    let old_workers = nginx.workers();
    // A test that fails must not leave the old master and its worker running: the daemon is no
    // child of the process the test started, and the pid file names the new master soon.
    let _old = KillTree(old_master);
    let mut wrk = WrkUnderway::start(&lab, url, 10, &[]);
    let fails_before = attempt_fails(&lab);
    nginx.signal("-USR2", old_master);
    let log = dir.join("error.log");
    // Its worker waits for the old worker's queue, inside its first setuid, before it names
    // itself a worker: any child of the new master counts.
    let has_child = |p: u32| Command::new("pgrep").args(["-P", &p.to_string()]).output().unwrap().status.success();
    eventually("the new master runs and started its worker", || {
        let new_master = nginx.pid();
        new_master != old_master && has_child(new_master)
    });
    let said = text_of(&log);
    assert!(said.contains("using inherited sockets"), "{said}");
    assert!(!said.contains("bind() to 10.99.0.1:8080 failed"), "{said}");
    assert!(!said.contains("execs a new program that inherits accelerated listener"), "{said}");
    let new_master = nginx.pid();
    nginx.signal("-WINCH", old_master);
    let alive = |p: u32| std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| !s.contains(") Z "));
    eventually("the old worker is gone", || !old_workers.iter().any(|&w| alive(w)));
    eventually("the new worker drives its queue", || {
        let workers = nginx.workers();
        !workers.is_empty() && workers.iter().all(|w| Path::new(&format!("/var/run/dpdk/pronghorn-{w}")).exists())
    });
    nginx.signal("-QUIT", old_master);
    eventually("the old master quits", || !alive(old_master));
    assert!(wrk.running(), "wrk ended before the upgrade was done: make its run longer");
    let (errors, report) = wrk.finish();
    assert_eq!(attempt_fails(&lab), fails_before, "connections refused: {report}");
    assert!(errors.read + errors.write <= WRK_CONNECTIONS as u64, "wrk: {report}");
    assert_eq!(errors, WrkErrors { read: errors.read, write: errors.write, ..WrkErrors::default() }, "wrk: {report}");
    for _ in 0..20 {
        let o = lab.exec("b", &["curl", "-sf", "-m", "10", url]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from a worker\n", "{}", text(&o));
    }
    assert_eq!(nginx.pid(), new_master);
    nginx.signal("-QUIT", new_master);
    eventually("the new master quits", || !alive(new_master));
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kills a process and its children (SIGKILL) when dropped, if they still run.
struct KillTree(u32);

impl Drop for KillTree {
    fn drop(&mut self) {
        let o = Command::new("pgrep").args(["-P", &self.0.to_string()]).output().unwrap();
        let children: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect();
        for p in std::iter::once(self.0.to_string()).chain(children) {
            let _ = Command::new("kill").args(["-KILL", &p]).stderr(Stdio::null()).status();
        }
    }
}

/// Issue 24: HAProxy (Debian's 2.6, master-worker, `expose-fd listeners` on its stats socket)
/// under `pronghorn run` with a queue per process (the default) reloads seamlessly under wrk (20
/// connections, keep-alive and `Connection: close`): `kill -USR2` of the master makes it exec
/// itself again and start a new worker, which waits for the old worker's queue while the old
/// one closes its listener and finishes. A SYN that finds that listener closed is left
/// unanswered (`tcp_syns_left_unanswered`: within a second of the close, or while a successor
/// waits for the queue), and its retransmission reaches the new worker. Before, each reload
/// refused the connections that came meanwhile: 108 to 157 write errors. The bar: no
/// connection refused (side b's kernel counts no failed attempt) and, as the kernel path's
/// HAProxy in the same lab, no error but the resets of connections the old worker closed with
/// a request in flight (read errors, 9 or 10 a reload there; a write error when the reset comes
/// before wrk wrote), at most one per connection. The old worker's passing of its listeners to the new master is refused (EOPNOTSUPP,
/// said on stderr) and HAProxy binds anew, as it does when passing fails.
#[test]
fn haproxy_reloads_under_wrk_without_refusing_a_connection() {
    let Some(_scenario) = scenario(&[("haproxy", "haproxy")]) else { return };
    let lab = Lab::up("tst-haproxy", &[]);
    let dir = std::env::temp_dir().join(format!("pronghorn-haproxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cfg, pid_file) = (dir.join("haproxy.cfg"), dir.join("haproxy.pid"));
    std::fs::write(
        &cfg,
        format!(
            "global\n  master-worker\n  pidfile {pid}\n  stats socket {d}/admin.sock mode 600 level admin expose-fd listeners\n\
             defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
             frontend web\n  bind 10.99.0.1:8080\n  http-request return status 200 content-type text/plain string \"hello from haproxy\\n\"\n",
            pid = pid_file.display(),
            d = dir.display()
        ),
    )
    .unwrap();
    let argv = [bin(), "run", "--", "haproxy", "-W", "-db", "-f", cfg.to_str().unwrap()];
    let _haproxy = Accelerated(lab.exec("a", &argv).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let url = "http://10.99.0.1:8080/";
    let o = until_ok(&lab, &["curl", "-sf", "-m", "10", url]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello from haproxy\n");
    let master = || -> u32 { std::fs::read_to_string(&pid_file).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0) };
    let workers = || -> Vec<u32> {
        let o = Command::new("pgrep").args(["-P", &master().to_string(), "haproxy"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.parse().ok()).collect()
    };
    eventually("the master wrote its pid and started its worker", || master() > 0 && workers().len() == 1);
    for extra in [&[][..], &["-H", "Connection: close"][..]] {
        let mut wrk = WrkUnderway::start(&lab, url, 8, extra);
        let fails_before = attempt_fails(&lab);
        let before = workers();
        assert!(Command::new("kill").args(["-USR2", &master().to_string()]).status().unwrap().success());
        eventually("the old worker is gone and a new one serves", || {
            let now = workers();
            now.len() == 1
                && !before.contains(&now[0])
                && lab.exec("b", &["curl", "-sf", "-m", "10", url]).output().unwrap().status.success()
        });
        assert!(wrk.running(), "wrk ended before the reload was done: make its run longer");
        let (errors, report) = wrk.finish();
        assert_eq!(attempt_fails(&lab), fails_before, "connections refused: wrk {extra:?}: {report}");
        // Resets by the old worker as it closed: read errors, or write errors when the reset
        // came before wrk wrote its request; at most one per connection.
        assert!(errors.read + errors.write <= WRK_CONNECTIONS as u64, "wrk {extra:?}: {report}");
        let resets = WrkErrors { read: errors.read, write: errors.write, ..WrkErrors::default() };
        assert_eq!(errors, resets, "wrk {extra:?}: {report}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 10: fork under `pronghorn run` (tests/lab/forks.py): a child forked before the process
/// used the network serves with its own NIC; one forked after gets EOPNOTSUPP on the inherited
/// connection, an exec'd program does not inherit it, a copy the child made inheritable is a
/// socket that was never connected there (not the placeholder eventfd: issue 24, said on
/// stderr), and the parent's connection is intact; so is a program started by posix_spawn with
/// the connection as its stdin or inherited (said on stderr too).
/// Issue 22: children made by `_Fork` and `daemon()` (which fork inside libc) too, and the NIC's
/// own sockets and BPF fds are close-on-exec.
#[test]
fn forked_children_get_their_own_nic_or_a_clear_errno() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-fork", &[]);
    let _peer = KernelServer::start(&lab, 7300);
    let (_, stderr) = script_checks(&lab, None, "forks.py", &["10.99.0.2", "7300"], 10);
    assert!(stderr.contains("inherited through fork"), "{stderr}");
    assert!(stderr.contains("on fd(s) 100: there they are sockets that were never connected"), "{stderr}");
    assert!(
        stderr.contains("spawns a program (posix_spawn) that would get accelerated socket(s) on fd(s) 0:"),
        "{stderr}"
    );
}

/// Issue 24: an accelerated socket passed to another process over a unix socket (SCM_RIGHTS)
/// would arrive as the placeholder eventfd, which never carries a byte: the sendmsg is refused
/// with EOPNOTSUPP and said on stderr (tests/lab/fd_passing.py), while pipes and kernel sockets
/// still pass and the connection keeps working.
#[test]
fn accelerated_sockets_passed_over_a_unix_socket_fail_clearly() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-fdpass", &[]);
    let _peer = KernelServer::start(&lab, 7301);
    let (_, stderr) = script_checks(&lab, None, "fd_passing.py", &["10.99.0.2", "7301"], 7);
    assert!(stderr.contains("SCM_RIGHTS"), "{stderr}");
}

/// Issue 24 stage 3: the same script with `[runtime] share = "family"`: a child forked after
/// the parent's NIC opened (fork, _Fork) echoes through the connection it inherited, on the
/// parent's stack, and the parent's connection still echoes after each, the fork child's exec
/// included (its copy is a socket that was never connected in the new program, and the parent
/// still holds the connection, so it is not reset); a daemon() child echoes on after its
/// parent, the driver, is gone (stage 4: the parent's exit forked a keeper that drives the NIC,
/// and said so).
#[test]
fn forked_children_share_the_parents_stack_with_share_family() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-forkfam", &[]);
    let _peer = KernelServer::start(&lab, 7300);
    let (dir, cfg_path) = family_config(&lab, "forkfam");
    let (seen, stderr) = script_checks(&lab, Some(&cfg_path), "forks.py", &["10.99.0.2", "7300", "family"], 10);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(stderr.contains("1 accelerated connection(s) on fds that are not close-on-exec"), "{stderr}");
    assert!(stderr.contains("stay open for the other processes of the family that hold them"), "{stderr}");
    assert!(stderr.contains("(pronghorn-keep), a copy of it, drives the NIC for them"), "{stderr}");
    assert!(
        seen.contains_key(
            "after: child echoes through the inherited connection, and a copy kept across exec is not connected"
        ),
        "{seen:?}"
    );
    assert!(seen.contains_key("daemon: child echoes through the inherited connection, its parent gone"), "{seen:?}");
}

/// tests/lab/`script` HOST PORT under `pronghorn run` with `[runtime] share = "family"` on
/// side a, once it printed "ready": (the config's directory, the server, its stdout after that).
fn family_script(
    lab: &Lab,
    name: &str,
    script: &str,
    port: &str,
) -> (PathBuf, Accelerated, BufReader<std::process::ChildStdout>) {
    let (dir, cfg_path) = family_config(lab, name);
    let script = format!("{}/../../tests/lab/{script}", env!("CARGO_MANIFEST_DIR"));
    let argv = [bin(), "run", "--config", cfg_path.to_str().unwrap(), "--", "python3", &script, "10.99.0.1", port];
    let mut server = lab.exec("a", &argv).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let server = Accelerated(server);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    (dir, server, out)
}

/// Issue 24: SCM_RIGHTS between two accelerated processes of one family (`[runtime] share =
/// "family"`, tests/lab/pass_fds.py): the parent accepts side b's connection and passes it to
/// the worker it forked over a unix socketpair, closing its own; the worker echoes, the kernel
/// client in side b gets every byte back, and the connection, passed back to the parent, ends
/// only when the parent closes it.
#[test]
fn a_connection_passed_to_a_worker_of_the_family_is_served_by_it() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-passfam", &[]);
    let (dir, mut server, mut out) = family_script(&lab, "passfam", "pass_fds.py", "7302");
    let o =
        lab.exec("b", &["python3", &peer_py(), "tcp-echo-client", "10.99.0.1", "7302", "1000000"]).output().unwrap();
    let status = server.0.wait().unwrap();
    let mut seen = String::new();
    out.read_to_string(&mut seen).unwrap();
    let mut stderr = String::new();
    server.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "the server saw: {seen} {stderr}");
    assert_echoed(&o, "10.99.0.1", 1_000_000, 1);
}

/// Issue 24: the opener of a family execs while its child serves (HAProxy's master re-execs
/// itself into its wait mode right after forking its workers, tests/lab/exec_opener.py): the
/// opener hands the NIC to a keeper before the exec, as at its exit, so the child's connection
/// from side b is echoed, and the new program, waiting for that child, exits 0 once it is done.
/// Before, the exec took the EAL, the port and the stack thread with the opener's image, and
/// the child never answered (HAProxy's workers served nothing).
#[test]
fn a_family_whose_opener_execs_is_served_by_its_keeper() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-execfam", &[]);
    let (dir, mut server, _out) = family_script(&lab, "execfam", "exec_opener.py", "7303");
    let o = lab.exec("b", &["python3", &peer_py(), "tcp-echo-client", "10.99.0.1", "7303", "100000"]).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // Checked before waiting: a child that was never served would keep its parent waiting.
    assert_echoed(&o, "10.99.0.1", 100_000, 1);
    let status = server.0.wait().unwrap();
    let mut stderr = String::new();
    server.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(stderr.contains("execs a new program while its children"), "{stderr}");
    assert!(stderr.contains("(pronghorn-keep), a copy of it, drives the NIC"), "{stderr}");
    assert!(status.success(), "the new program's wait for the child: {status:?} {stderr}");
}

/// Issue 24: the process that drives the NIC for its family killed (SIGKILL: no exit handler,
/// no keeper; tests/lab/opener_killed.py): its child, which echoes on the listener it inherited
/// and sleeps in epoll_wait, finds it gone (a child's sleep in the runtime lasts a second at
/// most), takes its place and drives the NIC, and says so: side b's connection, open across the
/// kill, and a new one are echoed. Before, the child was left without a stack and served
/// nothing, silently. The child, killed in turn, leaves the port to the cleanup helper, which
/// followed the driver from the opener to the child and now detaches the XDP program (before,
/// it gave up at the opener's death and nobody did).
#[test]
fn a_child_drives_the_nic_when_its_familys_driver_is_killed() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-killfam", &[]);
    let (dir, cfg_path) = family_config(&lab, "killfam");
    let script = format!("{}/../../tests/lab/opener_killed.py", env!("CARGO_MANIFEST_DIR"));
    let argv =
        [bin(), "run", "--config", cfg_path.to_str().unwrap(), "--", "python3", &script, "server", "10.99.0.1", "7304"];
    let mut server = lab.exec("a", &argv).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let mut stderr = server.stderr.take().unwrap();
    let mut server = Accelerated(server);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pids: Vec<i32> = line
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("the server said {line:?}"))
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (opener, child) = (pids[0], pids[1]);
    let _child = KillTree(child as u32);
    let mut client = lab
        .exec("b", &["python3", &script, "client", "10.99.0.1", "7304"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut client_out = BufReader::new(client.stdout.take().unwrap());
    line.clear();
    client_out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "echoed", "before the kill");
    // SAFETY: kill takes integers; `opener` is the server's process, which still runs.
    unsafe { libc::kill(opener, libc::SIGKILL) };
    let _ = server.0.wait();
    client.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut report = String::new();
    client_out.read_to_string(&mut report).unwrap();
    let _ = client.wait();
    let seen: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&report).unwrap_or_else(|e| panic!("{e}: the client said {report:?}"));
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.values().all(|v| v == &serde_json::Value::Bool(true)), "{seen:?}");
    // The child, the family's driver now, is killed too: the cleanup helper, which followed
    // the driver to it (it named itself beside the EAL's directory), detaches the program.
    // SAFETY: kill takes integers; `child` is the server's child, which still runs.
    unsafe { libc::kill(child, libc::SIGKILL) };
    let eal = format!("/var/run/dpdk/pronghorn-{opener}");
    eventually("the child ends", || {
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        stat.is_empty() || stat.contains(") Z ")
    });
    eventually("the port is closed and the XDP program detached", || {
        !Path::new(&eal).exists() && !Path::new(&format!("{eal}.keeper")).exists() && !lab.xdp_attached()
    });
    let mut said = String::new();
    stderr.read_to_string(&mut said).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        said.contains(&format!(
            "pid {opener}, which drove the NIC for its family (runtime.share = \"family\"), is gone without handing it \
             on (killed by a signal?): pid {child} drives the NIC for the family from now on"
        )),
        "{said}"
    );
    assert!(said.contains(&format!("pronghorn reap: pid {child} ended without closing its port")), "{said}");
}

/// Issue 10: `lab up --nodes 3`. Each node is a namespace with its own DPDK-driven veth (no
/// kernel address, no IPv6) and config; side b reaches every node, and the nodes reach each other
/// through the bridge, over IPv4 and IPv6, with several accelerated processes running at once,
/// each on its own config (also given with `--config`). `lab down` leaves nothing behind.
#[test]
fn lab_nodes_reach_side_b_and_each_other_and_down_leaves_nothing() {
    let Some(_scenario) = scenario(&[]) else { return };
    let prefix = &testkit::lab::lab_prefix("tst-nodes");
    let huge_before = nr_hugepages();
    let queue_dirs;
    {
        let lab = Lab::up("tst-nodes", &["--nodes", "3"]);
        // The queue locks of each node's namespace (`nic::share`), under its inode.
        queue_dirs = (1..=3)
            .map(|k| {
                use std::os::unix::fs::MetadataExt;
                let ino = std::fs::metadata(format!("/run/netns/{prefix}-a{k}")).unwrap().ino();
                nic::share::namespace_dir(ino)
            })
            .collect::<Vec<PathBuf>>();
        let o = pronghorn(&["lab", "status", "--prefix", prefix]);
        let status = text(&o);
        assert!(
            o.status.success() && status.contains(&format!("{prefix}-br")) && status.contains("10.99.0.2/24"),
            "{status}"
        );
        for k in 1..=3u16 {
            assert!(status.contains(&format!("node a{k}: namespace {prefix}-a{k}: {prefix}-n{k}")), "{status}");
            let config = lab.node_config(k);
            let cfg = std::fs::read_to_string(&config).unwrap();
            for want in
                [format!("iface = \"{prefix}-n{k}\""), format!("\"10.99.0.1{k}/24\""), format!("\"fd99::1{k}/64\"")]
            {
                assert!(cfg.contains(&want), "{want} not in {cfg}");
            }
            let o = lab.exec(&format!("a{k}"), &["sh", "-c", "echo $PRONGHORN_CONFIG; ip -br addr"]).output().unwrap();
            let out = text(&o);
            assert!(out.starts_with(&format!("{}\n", config.display())), "exec a{k}: {out}");
            let veth =
                out.lines().find(|l| l.starts_with(&format!("{prefix}-n{k}@"))).unwrap_or_else(|| panic!("{out}"));
            assert_eq!(veth.split_whitespace().count(), 2, "a kernel address on node a{k}'s DPDK veth: {veth}");
            // Side b's frames reach the AF_XDP receivers with full checksums.
            let o = lab.exec("b", &["ethtool", "-k", &format!("{prefix}-p{k}")]).output().unwrap();
            assert!(text(&o).contains("tx-checksumming: off"), "{}", text(&o));
        }
        let o = pronghorn(&["lab", "exec", "--prefix", prefix, "a", "--", "true"]);
        assert!(!o.status.success() && text(&o).contains("has nodes a1 to a3"), "{}", text(&o));
        let o = pronghorn(&["lab", "exec", "--prefix", prefix, "a4", "--", "true"]);
        assert!(!o.status.success() && text(&o).contains("no a4"), "{}", text(&o));

        // Accelerated echo servers on a1 (config from the environment) and a2 (--config).
        let a2_config = lab.node_config(2);
        let e1 = Echo::start_on(&lab, "a1", &[]);
        let e2 = Echo::start_on(&lab, "a2", &["--config", a2_config.to_str().unwrap()]);
        assert!(
            e1.ready.contains(&format!("{prefix}-n1")) && e2.ready.contains("10.99.0.12/24"),
            "{}{}",
            e1.ready,
            e2.ready
        );
        let out = ping(&lab, &["10.99.0.11"]);
        assert!(out.contains("3 packets transmitted, 3 received"), "{out}");
        let out = ping(&lab, &["-6", "fd99::12"]);
        assert!(out.contains("3 packets transmitted, 3 received"), "{out}");
        kernel_client(&lab, "10.99.0.12", 1 << 20, 2);
        // Node to node: a3's clients, accelerated, through the bridge. `--config` wins over a
        // PRONGHORN_CONFIG that names another node's interface (absent in a3's namespace).
        let a1_config = lab.node_config(1);
        let a3_config = lab.node_config(3);
        let env = format!("PRONGHORN_CONFIG={}", a1_config.display());
        let client = ["python3", &peer_py(), "tcp-echo-client", "10.99.0.11", "7", "1048576"];
        let mut cmd = vec!["env", &env, bin(), "run", "--config", a3_config.to_str().unwrap(), "--"];
        cmd.extend_from_slice(&client);
        let o = lab.exec("a3", &cmd).output().unwrap();
        assert_echoed(&o, "10.99.0.11 from a3", 1 << 20, 1);
        pronghorn_client(&lab, "a3", "[fd99::12]:7", 1 << 20, 2, None);
        let (s1, s2) = (e1.stop(), e2.stop());
        assert!(s1.contains("1 accepted") && s2.contains("4 accepted"), "{s1}{s2}");
        assert!(
            queue_dirs.iter().all(|d| d.exists()),
            "no queue locks where the nodes drove their NICs: {queue_dirs:?}"
        );
    }
    let namespaces = ["a1", "a2", "a3", "b"];
    assert_lab_gone(prefix, &namespaces, &["br", "n1", "n2", "n3", "p1", "p2", "p3"], huge_before);
    let left: Vec<_> = queue_dirs.iter().filter(|d| d.exists()).collect();
    assert!(left.is_empty(), "lab down left the queue locks of its namespaces: {left:?}");
}

/// Two labs at once (two people testing on one machine): the second reserves hugepages of its
/// own instead of counting on the first's, which go when the first goes down.
#[test]
fn a_second_lab_does_not_count_on_the_first_labs_hugepages() {
    let Some(_scenario) = scenario(&[]) else { return };
    let huge_before = nr_hugepages();
    {
        let first = Lab::up("tst-huge1", &[]);
        let second = Lab::up("tst-huge2", &["--nodes", "2"]);
        drop(first);
        let echo = Echo::start_on(&second, "a2", &[]);
        assert!(echo.ready.contains("10.99.0.12/24"), "{}", echo.ready);
        echo.stop();
    }
    assert_lab_gone("tst-huge1", &["a", "b"], &["a0", "b0"], huge_before);
    assert_lab_gone("tst-huge2", &["a1", "a2", "b"], &["n1", "n2", "p1", "p2"], huge_before);
}

/// Issue 10: master/replica in both directions (an accelerated master with a kernel replica, a
/// kernel master with an accelerated replica): a full sync that carries a 5 MB value intact,
/// then a partial resync after the replication link is cut.
#[test]
fn redis_replication_both_ways_full_and_partial_resync() {
    let Some(_scenario) = scenario(REDIS_TOOLS) else { return };
    let lab = Lab::up("tst-repl", &["--nodes", "2"]);
    let dir = redis_dir("repl");
    let big_file = dir.join("big.bin");
    std::fs::create_dir_all(&dir).unwrap();
    let mut big = vec![0u8; 5 << 20];
    stack::echo::Stream::new(7).fill(&mut big);
    for b in big.iter_mut() {
        *b = b'a' + *b % 26; // printable: redis-cli --raw prints it as is
    }
    std::fs::write(&big_file, &big).unwrap();
    let sha = |data: &[u8]| {
        let o = Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        use std::io::Write;
        let mut o = o;
        o.stdin.take().unwrap().write_all(data).unwrap();
        String::from_utf8_lossy(&o.wait_with_output().unwrap().stdout).split(' ').next().unwrap().to_string()
    };
    let want = sha(&[&big[..], b"\n"].concat());
    let diskless = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"];
    // (master side, master host, replica side, replica host)
    for (ms, mh, rs, rh) in [("a1", "10.99.0.11", "b", "10.99.0.2"), ("b", "10.99.0.2", "a2", "10.99.0.12")] {
        let master = RedisNode::start(&lab, ms, mh, 6400, &dir.join(format!("m-{ms}")), &diskless);
        let o = lab
            .exec("b", &["bash", "-c", &format!("redis-cli -h {mh} -p 6400 -x SET big < {}", big_file.display())])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&o.stdout).contains("OK"), "{}", text(&o));
        master.cli(&lab, &["SET", "before", "1"]);
        let replica = RedisNode::start(&lab, rs, rh, 6401, &dir.join(format!("r-{rs}")), &["--replicaof", mh, "6400"]);
        eventually("the replica is in sync", || replica.info(&lab, "master_link_status") == "up");
        let got = lab
            .exec("b", &["bash", "-c", &format!("redis-cli -h {rh} -p 6401 --raw GET big | sha256sum")])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&got.stdout).split(' ').next().unwrap(), want, "{ms} -> {rs}: big value");
        assert_eq!(replica.cli(&lab, &["GET", "before"]).trim(), "1");
        // Cut the link: the replica reconnects and continues from its offset.
        let partial = master.info(&lab, "sync_partial_ok");
        replica.cli(&lab, &["CLIENT", "KILL", "TYPE", "master"]);
        master.cli(&lab, &["SET", "after", "2"]);
        eventually("a partial resync", || master.info(&lab, "sync_partial_ok") != partial);
        eventually("the write after the cut reaches the replica", || {
            replica.cli(&lab, &["GET", "after"]).trim() == "2"
        });
        assert_eq!(master.info(&lab, "sync_full"), "1", "{ms} -> {rs}: one full sync only");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 10: six accelerated redis-servers form a cluster (its bus between accelerated nodes
/// too), serve redis-benchmark --cluster, and survive a master killed with SIGKILL: its replica
/// takes over and every key written before is still there.
#[test]
fn redis_cluster_of_six_accelerated_nodes_fails_over() {
    let Some(_scenario) = scenario(REDIS_TOOLS) else { return };
    let lab = Lab::up("tst-cluster", &["--nodes", "6"]);
    let dir = redis_dir("cluster");
    let hosts: Vec<String> = (1..=6).map(|k| format!("10.99.0.1{k}")).collect();
    let mut nodes: Vec<RedisNode> = (1..=6)
        .map(|k| {
            let args = ["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"];
            RedisNode::start(&lab, &format!("a{k}"), &hosts[k - 1], 7000, &dir.join(format!("n{k}")), &args)
        })
        .collect();
    let mut create = vec!["redis-cli".to_string(), "--cluster".into(), "create".into()];
    create.extend(hosts.iter().map(|h| format!("{h}:7000")));
    create.extend(["--cluster-replicas".into(), "1".into(), "--cluster-yes".into()]);
    let create: Vec<&str> = create.iter().map(|s| s.as_str()).collect();
    let o = lab.exec("b", &create).output().unwrap();
    assert!(o.status.success() && text(&o).contains("All 16384 slots covered"), "{}", text(&o));
    eventually("every node sees the cluster ok", || {
        nodes.iter().all(|n| n.cli(&lab, &["cluster", "info"]).contains("cluster_state:ok"))
    });
    let o = lab
        .exec(
            "b",
            &["redis-benchmark", "--cluster", "-h", &hosts[0], "-p", "7000", "-n", "5000", "-t", "set,get", "-q"],
        )
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success() && t.contains("GET:") && !t.contains("rror"), "redis-benchmark --cluster: {t}");
    let writes = "for i in $(seq 1 200); do redis-cli -c -h 10.99.0.11 -p 7000 SET key:$i val:$i; done";
    let o = lab.exec("b", &["bash", "-c", writes]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).matches("OK").count(), 200, "{}", text(&o));
    // A replica that never synced may not take over (cluster-replica-validity-factor).
    eventually("every replica is in sync with its master", || {
        nodes.iter().all(|n| n.info(&lab, "role") == "master" || n.info(&lab, "master_link_status") == "up")
    });
    // Kill a master that is not the node the client asks (a1), and watch its replica.
    let view = nodes[0].cli(&lab, &["cluster", "nodes"]);
    let line_of = |h: &str| view.lines().find(|l| l.contains(&format!(" {h}:7000@"))).unwrap_or("").to_string();
    let victim = hosts
        .iter()
        .position(|h| {
            let l = line_of(h);
            l.contains("master") && !l.contains("myself")
        })
        .unwrap_or_else(|| panic!("no second master: {view}"));
    let victim_id = line_of(&hosts[victim]).split(' ').next().unwrap().to_string();
    let heir = hosts
        .iter()
        .position(|h| line_of(h).contains(&format!("slave {victim_id}")))
        .unwrap_or_else(|| panic!("no replica of {}: {view}", hosts[victim]));
    nodes[victim].kill();
    let victim_addr = format!(" {}:7000@", hosts[victim]);
    eventually("the replica takes over and the cluster is ok", || {
        let view = nodes[0].cli(&lab, &["cluster", "nodes"]);
        let failed = view.lines().any(|l| l.contains(&victim_addr) && l.contains("fail") && !l.contains("fail?"));
        failed
            && nodes[heir].info(&lab, "role") == "master"
            && nodes[0].cli(&lab, &["cluster", "info"]).contains("cluster_state:ok")
    });
    let reads = "bad=0; for i in $(seq 1 200); do [ \"$(redis-cli -c -h 10.99.0.11 -p 7000 GET key:$i)\" = val:$i ] || bad=$((bad+1)); done; echo bad=$bad";
    let o = lab.exec("b", &["bash", "-c", reads]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "bad=0", "{}", text(&o));
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 10: a master and a replica accelerated, watched by three accelerated sentinels: the
/// master killed, the sentinels fail over, and a client that asks them reaches the new master.
#[test]
fn redis_sentinels_fail_over_to_the_replica() {
    let Some(_scenario) = scenario(REDIS_TOOLS) else { return };
    let lab = Lab::up("tst-sentinel", &["--nodes", "5"]);
    let dir = redis_dir("sentinel");
    let mut master = RedisNode::start(&lab, "a1", "10.99.0.11", 6379, &dir.join("m"), &[]);
    let replica =
        RedisNode::start(&lab, "a2", "10.99.0.12", 6379, &dir.join("r"), &["--replicaof", "10.99.0.11", "6379"]);
    eventually("the replica is in sync", || replica.info(&lab, "master_link_status") == "up");
    master.cli(&lab, &["SET", "before", "1"]);
    let sentinels: Vec<RedisNode> = (3..=5)
        .map(|k| {
            let host = format!("10.99.0.1{k}");
            // Each sentinel rewrites its own config file.
            let conf = dir.join(format!("sentinel{k}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port 26379\nbind {host}\nprotected-mode no\ndir {}\n\
                     sentinel monitor mymaster 10.99.0.11 6379 2\n\
                     sentinel down-after-milliseconds mymaster 1000\n\
                     sentinel failover-timeout mymaster 10000\n",
                    dir.display()
                ),
            )
            .unwrap();
            RedisNode::sentinel(&lab, &format!("a{k}"), &host, 26379, &conf)
        })
        .collect();
    eventually("the sentinels know each other and the replica", || {
        sentinels.iter().all(|s| {
            let m = s.cli(&lab, &["SENTINEL", "master", "mymaster"]);
            let field = |name: &str| m.lines().skip_while(|l| *l != name).nth(1).unwrap_or("").to_string();
            field("num-other-sentinels") == "2" && field("num-slaves") == "1"
        })
    });
    master.kill();
    eventually("every sentinel names the replica as master", || {
        sentinels
            .iter()
            .all(|s| s.cli(&lab, &["SENTINEL", "get-master-addr-by-name", "mymaster"]).starts_with("10.99.0.12\n"))
    });
    // A client that asks the sentinels, then the master they name.
    let asked = sentinels[1].cli(&lab, &["SENTINEL", "get-master-addr-by-name", "mymaster"]);
    let mut lines = asked.lines();
    let (host, port) = (lines.next().unwrap().to_string(), lines.next().unwrap().to_string());
    let o = lab.exec("b", &["redis-cli", "-h", &host, "-p", &port, "SET", "after", "2"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "OK", "{}", text(&o));
    eventually("the new master is a master", || replica.info(&lab, "role") == "master");
    assert_eq!(replica.cli(&lab, &["GET", "before"]).trim(), "1");
    drop(sentinels);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 10 item 6: `runtime.shards = 2`: one process, two stacks, each driving its own queue
/// of the lab's two-queue veth with a thread of its own. As a server (redis-server) the one
/// listener fd listens on both shards, and the kernel side's per-flow hash spreads the clients
/// over them; as a client (redis-benchmark against a kernel redis-server in side b) connect()
/// takes the shards in turn and the replies, which land on whichever queue the peer hashes them
/// to, reach their shard through the other. Correctness is checked (values byte-identical, no
/// client errors), and the exit counters show that both shards did each kind of work.
#[test]
fn one_process_with_two_shards_serves_and_connects_on_both_queues() {
    let Some(_scenario) = scenario(REDIS_TOOLS) else { return };
    let lab = Lab::up("tst-shards", &["--queues", "2"]);
    let dir = std::env::temp_dir().join(format!("pronghorn-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = std::fs::read_to_string(lab.config_a()).unwrap();
    assert!(!cfg.contains("[runtime]"), "the lab writes no default keys: {cfg}");
    let cfg_path = dir.join("shards.toml");
    std::fs::write(&cfg_path, cfg + "\n[runtime]\nshards = 2\n").unwrap();
    let cfg_arg = cfg_path.to_str().unwrap();

    // As a server.
    let mut server = lab
        .exec(
            "a",
            &[
                bin(),
                "run",
                "--config",
                cfg_arg,
                "--",
                "redis-server",
                "--bind",
                "10.99.0.1",
                "--save",
                "",
                "--protected-mode",
                "no",
                "--dir",
                dir.to_str().unwrap(),
            ],
        )
        .env("PRONGHORN_EXIT_STATS", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let answers = |host: &str, port: &str| {
        let o = lab.exec("b", &["redis-cli", "-h", host, "-p", port, "ping"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim() == "PONG"
    };
    eventually("redis-server with two shards answers", || answers("10.99.0.1", "6379"));
    let o = lab.exec("b", &["python3", &peer_py(), "redis-check", "10.99.0.1", "6379"]).output().unwrap();
    let out = text(&o);
    assert!(o.status.success() && out.matches("\"identical\": true").count() == 3, "{out}");
    redis_benchmark(&lab, &["-c", "50", "-n", "20000", "-t", "set,get,lrange"], &["SET", "GET"]);
    redis_benchmark(&lab, &["-c", "20", "-n", "2000", "-t", "get", "-k", "0"], &["GET"]);
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let mut stderr = String::new();
    std::io::Read::read_to_string(server.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(server.wait().unwrap().success(), "{stderr}");
    for k in 0..2 {
        let opens = exit_stat(&stderr, k, "tcp_passive_opens");
        eprintln!("two shards, server: shard {k} accepted {opens} connections");
        assert!(opens > 0, "shard {k} accepted no connection: {stderr}");
    }

    // As a client: a kernel redis-server in side b, redis-benchmark accelerated with two shards.
    let mut kernel = lab
        .exec("b", &["redis-server", "--bind", "10.99.0.2", "--port", "6390", "--save", "", "--protected-mode", "no"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the kernel redis-server in side b answers", || answers("10.99.0.2", "6390"));
    let o = lab
        .exec(
            "a",
            &[
                bin(),
                "run",
                "--config",
                cfg_arg,
                "--",
                "redis-benchmark",
                "-h",
                "10.99.0.2",
                "-p",
                "6390",
                "-q",
                "-c",
                "20",
                "-n",
                "20000",
                "-t",
                "set,get",
            ],
        )
        .env("PRONGHORN_EXIT_STATS", "1")
        .output()
        .unwrap();
    let _ = kernel.kill();
    let _ = kernel.wait();
    let out = String::from_utf8_lossy(&o.stdout).replace('\r', "\n");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "accelerated redis-benchmark failed: {out}{err}");
    assert!(out.lines().any(|l| l.starts_with("SET: ")) && out.lines().any(|l| l.starts_with("GET: ")), "{out}");
    assert!(!out.to_lowercase().contains("error"), "{out}");
    let mut handed = 0;
    for k in 0..2 {
        let opens = exit_stat(&err, k, "tcp_active_opens");
        handed += exit_stat(&err, k, "tcp_handed_off");
        eprintln!("two shards, client: shard {k} opened {opens} connections");
        assert!(opens > 0, "shard {k} opened no connection: {err}");
    }
    eprintln!("two shards, client: {handed} segments handed to the other shard");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 11: an accelerated redis-server seen from outside while redis-benchmark -c 50 runs:
/// `ps` lists it, `conns` shows the 50 connections, `stat` agrees with the requests made, `lat`
/// has samples of every stage, `pcap -c 2000` writes a file tshark reads with the handshakes;
/// another user can read neither the region nor the control socket; the exit leaves nothing.
#[test]
fn a_running_redis_is_seen_by_ps_conns_stat_lat_and_pcap() {
    let Some(lab_test) = scenario(&[REDIS_TOOLS, &[("tshark", "tshark"), ("setpriv", "util-linux")]].concat()) else {
        return;
    };
    let lab = Lab::up("tst-observe", &[]);
    let dir = redis_dir(lab_test.name());
    std::fs::create_dir_all(&dir).unwrap();
    let mut redis = Redis::start(&lab, &dir, &[]);

    // ps: the process, its interface and address.
    let procs = ps_json();
    let me = procs
        .iter()
        .find(|p| {
            p["command"].as_str().unwrap_or("").contains("redis-server")
                && p["address"].as_str().unwrap_or("").contains("10.99.0.1/24")
        })
        .unwrap_or_else(|| panic!("ps does not list the redis-server: {procs:?}"));
    assert_eq!(me["interface"], format!("{}-a0", lab.prefix), "{me}");
    assert_eq!(me["shards"], 1, "{me}");
    let pid = me["pid"].as_u64().unwrap().to_string();
    let o = pronghorn(&["ps"]);
    assert!(text(&o).contains(&pid) && text(&o).contains("redis-server"), "{}", text(&o));

    // conns: the 50 connections of a running benchmark, established, with their TCP details.
    let mut bench = lab
        .exec("b", &["redis-benchmark", "-h", "10.99.0.1", "-c", "50", "-n", "100000000", "-t", "ping", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut last = String::new();
    eventually("conns shows the benchmark's 50 established connections", || {
        let o = pronghorn(&["conns", &pid, "--json"]);
        last = text(&o);
        let est = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|c| c["state"] == "ESTAB" && c["peer"].as_str().unwrap_or("").starts_with("10.99.0.2:"))
            .filter(|c| c["cwnd"].as_u64().unwrap_or(0) > 0 && c["mss"].as_u64().unwrap_or(0) > 0 && c["fd"] != "-")
            .count();
        est == 50
    });
    let table = text(&pronghorn(&["conns", &pid]));
    assert!(table.contains("LISTEN") && table.contains("10.99.0.1:6379") && table.contains("ESTAB"), "{table}\n{last}");

    // pcap: 2000 frames while clients connect and go (keep-alive off), read back by tshark.
    // The capture starts once the churning clients connect (2000 frames of the 50 busy
    // connections take a few milliseconds: a capture begun before them saw no handshake).
    let passive_opens = || -> u64 {
        let o = pronghorn(&["stat", &pid, "--json"]);
        let stat: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        stat["mib"]["TcpPassiveOpens"].as_f64().unwrap_or(0.0) as u64
    };
    let opens_before = passive_opens();
    let churn = lab
        .exec("b", &["redis-benchmark", "-h", "10.99.0.1", "-c", "5", "-n", "100000000", "-t", "ping", "-k", "0", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the churning clients connect", || passive_opens() > opens_before + 20);
    let file = dir.join("capture.pcapng");
    let o = pronghorn(&["pcap", &pid, "-w", file.to_str().unwrap(), "-c", "2000", "tcp", "port", "6379"]);
    let mut churn = churn;
    let _ = churn.kill();
    let _ = churn.wait();
    let _ = bench.kill();
    let _ = bench.wait();
    assert!(o.status.success() && text(&o).contains("2000 frames captured"), "{}", text(&o));
    let tshark = |filter: &str| -> usize {
        let o = Command::new("tshark").args(["-r", file.to_str().unwrap(), "-Y", filter]).output().unwrap();
        assert!(o.status.success(), "tshark -Y {filter}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    assert_eq!(tshark("tcp.port == 6379"), 2000);
    let syns = tshark("tcp.flags.syn == 1 && tcp.flags.ack == 0 && ip.dst == 10.99.0.1");
    let syn_acks = tshark("tcp.flags.syn == 1 && tcp.flags.ack == 1 && ip.src == 10.99.0.1");
    eprintln!("{}: the capture holds {syns} SYNs and {syn_acks} SYN-ACKs", lab_test.name());
    assert!(syns > 0 && syn_acks > 0, "no handshake in the capture");

    // stat: counters agree with what redis counted (one request per segment at least).
    // (redis's figures first: the connection that asks for them is one more for both.)
    let info = redis_cli(&lab, &["info", "stats"]);
    let o = pronghorn(&["stat", &pid, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let stat: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let field = |name: &str| -> u64 {
        let line = info.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap_or_else(|| panic!("{info}"));
        line.trim().rsplit(':').next().unwrap().parse().unwrap()
    };
    let (commands, connections) = (field("total_commands_processed"), field("total_connections_received"));
    let mib = |name: &str| stat["mib"][name].as_f64().unwrap_or_else(|| panic!("no {name}: {stat}")) as u64;
    eprintln!(
        "{}: redis counted {commands} commands and {connections} connections; stat: InSegs {} PassiveOpens {}",
        lab_test.name(),
        mib("TcpInSegs"),
        mib("TcpPassiveOpens")
    );
    assert!(mib("TcpInSegs") >= commands, "{stat}");
    assert!(mib("TcpPassiveOpens") >= connections, "{stat}");
    assert!(stat["shards"][0]["nic_rx_packets"].as_f64().unwrap() > 0.0, "{stat}");
    // Redis's one thread waits alone: `drive = "auto"` keeps it inline. DPDK's interrupt thread,
    // asleep in its own epoll set, once counted as a second blocked thread and started a stack
    // thread (a context switch more per request).
    let me = ps_json().into_iter().find(|p| p["pid"].as_u64().map(|p| p.to_string()) == Some(pid.clone()));
    assert_eq!(me.as_ref().map(|p| p["mode"].clone()), Some(serde_json::json!("inline")), "{me:?}");
    let o = pronghorn(&["stat", &pid, "--prometheus"]);
    assert!(text(&o).contains(&format!("pronghorn_tcp_in_segs{{pid=\"{pid}\",shard=\"0\"}}")), "{}", text(&o));
    let o = pronghorn(&["stat", &pid, "--interval", "0.2", "--count", "2"]);
    assert!(o.status.success() && text(&o).contains("per second"), "{}", text(&o));

    // lat: every stage has samples.
    let o = pronghorn(&["lat", &pid, "--json"]);
    let lat: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    for stage in lat["stages"].as_array().unwrap() {
        assert!(stage["samples"].as_u64().unwrap() > 0 && stage["p99_ns"].as_u64().is_some(), "{lat}");
    }

    // Another user sees nothing of it.
    let region = format!("/dev/shm/pronghorn.{pid}.stats");
    let control = format!("/dev/shm/pronghorn.{pid}.ctl");
    for path in [&region, &control] {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o600, "{path}");
    }
    let o = pronghorn_as_nobody(&["stat", &pid]);
    assert!(!o.status.success() && text(&o).contains("another user"), "{}", text(&o));
    let o = pronghorn_as_nobody(&["ps"]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains(&pid), "{}", text(&o));
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat", &region])
        .output()
        .unwrap();
    assert!(!o.status.success(), "nobody read the region");

    // The exit leaves nothing behind.
    unsafe { libc::kill(pid.parse::<i32>().unwrap(), libc::SIGTERM) };
    let _ = redis.child.wait();
    eventually("the region and the control socket are removed", || {
        !Path::new(&region).exists() && !Path::new(&control).exists()
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 22: a server under pronghorn that writes 4 MiB to a slow kernel reader (a small
/// receive buffer, paced reads), closes the connection and exits at once: its stack keeps
/// running at exit until the data and the FIN are through, so the reader gets every byte and
/// an EOF, not a stall or a reset.
#[test]
fn a_server_that_writes_closes_and_exits_delivers_every_byte_and_a_fin() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-exit", &[]);
    for (host, port) in [("10.99.0.1", "9400"), ("fd99::1", "9401")] {
        a_slow_reader_gets_everything(&lab, "write-close-exit", host, port, &[]);
    }
}

/// Issue 22: a server under pronghorn that writes 4 MiB to a slow kernel reader, then execs
/// /bin/true at once (Python's os.execv) after closing the connection, or holding it on a
/// close-on-exec fd (which the exec closes): the runtime finishes the connection before the
/// exec discards the stack, so the reader gets every byte and an EOF. On the way, after the
/// first MiB, the server runs /bin/true with subprocess: that child execs in the server's
/// memory (vfork) and must leave the server's connections alone.
#[test]
fn a_server_that_execs_delivers_every_byte_and_a_fin() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-exec", &[]);
    a_slow_reader_gets_everything(&lab, "write-exec", "10.99.0.1", "9402", &[]);
    a_slow_reader_gets_everything(&lab, "write-exec", "fd99::1", "9403", &["--hold"]);
}

/// Runs peer.py `mode` (with `more` arguments) under pronghorn on side a, a server that writes
/// 4 MiB to one connection and then ends one way or another, and peer.py slow-read against it
/// from side b: the server ends well, and the reader gets every byte and an EOF.
fn a_slow_reader_gets_everything(lab: &Lab, mode: &str, host: &str, port: &str, more: &[&str]) {
    let (bytes, peer) = ((4u64 << 20).to_string(), peer_py());
    let argv = [&[bin(), "run", "--", "python3", &peer, mode, host, port, &bytes], more].concat();
    let mut server = lab.exec("a", &argv).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let mut server = Accelerated(server);
    let o = lab.exec("b", &["python3", &peer, "slow-read", host, port, &bytes]).output().unwrap();
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{mode} {more:?}: the server exited with {status:?}");
    let json = String::from_utf8_lossy(&o.stdout);
    assert!(
        json.contains(&format!("\"received\": {bytes}, \"eof\": true, \"error\": [], \"identical\": true")),
        "{mode} {host} {more:?}: {}",
        text(&o)
    );
}

/// Issue 22: `nginx -s quit` (SIGQUIT to the master) while a client downloads a large file
/// slowly: the worker finishes the response, closes and exits, and what it wrote last still
/// reaches the client, byte for byte.
#[test]
fn nginx_graceful_quit_finishes_a_download_in_progress() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-quit", &[]);
    let (dir, big) = nginx_site("pronghorn-nginx-quit", "on", 8 << 20, "up\n");
    let conf = dir.join("nginx.conf");
    let mut nginx = NginxMaster {
        child: lab.exec("a", &[bin(), "run", "--", "nginx", "-c", conf.to_str().unwrap()]).spawn().unwrap(),
        pid_file: dir.join("nginx.pid"),
    };
    until_ok(&lab, &["curl", "-sf", "http://10.99.0.1:8080/index.html"]);
    // A small receive window on the client's side (its namespace's own tcp_rmem), so that the
    // worker's send buffer is still full when it closes and exits.
    let o = lab.exec("b", &["sysctl", "-w", "net.ipv4.tcp_rmem=4096 16384 16384"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // About two seconds of download at the client's pace.
    let got = dir.join("big.got");
    let download = lab
        .exec("b", &["curl", "-sS", "-f", "-m", "30", "--limit-rate", "4M", "http://10.99.0.1:8080/big.bin", "-o"])
        .arg(&got)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually("the download is under way", || std::fs::metadata(&got).is_ok_and(|m| m.len() > 1 << 20));
    nginx.signal("-QUIT", nginx.pid());
    let o = download.wait_with_output().unwrap();
    assert!(o.status.success(), "the download failed: {}", text(&o));
    assert!(std::fs::read(&got).unwrap() == big, "8 MiB file differs");
    eventually("nginx quit", || nginx.child.try_wait().unwrap().is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 22 item 8, `tcp.max_orphans` with a real server and Linux clients: a server (Python,
/// accelerated) writes to four connections whose clients are not reading and closes them all.
/// The first two orphans (the limit) deliver every byte and a FIN; closing the other two resets
/// them (Linux's "too many orphaned sockets", TcpExtTCPAbortOnMemory).
#[test]
fn orphans_beyond_max_orphans_are_reset_and_the_others_deliver_everything() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-orphans", &[]);
    let dir = std::env::temp_dir().join(format!("pronghorn-orphans-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = std::fs::read_to_string(lab.config_a()).unwrap();
    assert!(!cfg.contains("[runtime]") && !cfg.contains("[tcp]"), "the lab writes no default keys: {cfg}");
    // A stack thread drives the orphans while the server sleeps.
    let cfg = cfg + "\n[runtime]\ndrive = \"dedicated\"\n\n[tcp]\nmax_orphans = 2\n";
    let cfg_path = dir.join("orphans.toml");
    std::fs::write(&cfg_path, cfg).unwrap();
    let peer = peer_py();
    let server = lab
        .exec("a", &[bin(), "run", "--config", cfg_path.to_str().unwrap(), "--", "python3", &peer, "orphan-server"])
        .args(["10.99.0.1", "7070", "4", "--seconds", "15"])
        .env("PRONGHORN_EXIT_STATS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = lab.exec("b", &["python3", &peer, "orphan-client", "10.99.0.1", "7070", "4"]).output().unwrap();
    let clients: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    let out = server.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let queued: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    let ends: Vec<&str> = (0..4).map(|i| clients[i]["end"].as_str().unwrap_or("?")).collect();
    assert_eq!(ends, ["eof", "eof", "reset", "reset"], "{clients} {queued}");
    for i in 0..2 {
        assert!(queued["queued"][i].as_u64().unwrap() > 0);
        assert_eq!(clients[i]["bytes"], queued["queued"][i], "connection {i}: {clients} {queued}");
    }
    assert_eq!(exit_stat(&stderr, 0, "tcp_abort_on_memory"), 2, "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 25: redis under `--profile latency` answers (the process reads the merged config:
/// the profile's busy polling under the lab's keys), and `topo PID` lists every one of its
/// threads with the CPU it last ran on, and its memory per node with DPDK's hugepages.
#[test]
fn redis_under_profile_latency_answers_and_topo_lists_its_threads() {
    let Some(lab_test) = scenario(REDIS_TOOLS) else { return };
    let lab = Lab::up("tst-topo", &[]);
    let dir = redis_dir(lab_test.name());
    std::fs::create_dir_all(&dir).unwrap();
    let iface = format!("{}-a0", lab.prefix);
    // The merged configs of this lab's interface (`run --profile` leaves one per distinct merge
    // in the run directory), from earlier runs of this test, are removed first.
    let run_dir = std::env::var("PRONGHORN_RUN_DIR").unwrap_or_else(|_| "/dev/shm".to_owned());
    let merged_configs = || -> Vec<(PathBuf, String)> {
        std::fs::read_dir(&run_dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("pronghorn-profile.latency."))
            .map(|e| (e.path(), std::fs::read_to_string(e.path()).unwrap_or_default()))
            .filter(|(_, t)| t.contains(&format!("iface = \"{iface}\"")))
            .collect()
    };
    for (old, _) in merged_configs() {
        std::fs::remove_file(old).unwrap();
    }
    let _redis = Redis::start_with(&lab, &dir, &["--profile", "latency"], &[]);
    assert_eq!(redis_cli(&lab, &["ping"]).trim(), "PONG");
    redis_benchmark(&lab, &["-c", "10", "-n", "2000", "-t", "set,get"], &["SET", "GET"]);

    let pid = accelerated_pid("redis-server", &iface);

    // `run --profile` handed the process the merge: the profile's busy polling under the lab's
    // keys. (Redis's process title overwrites its environment, so the file is found by its name
    // and content in the run directory rather than through /proc/PID/environ.)
    let merged: Vec<String> = merged_configs().into_iter().map(|(_, t)| t).collect();
    assert_eq!(merged.len(), 1, "one merged config for this lab in {run_dir}: {merged:?}");
    assert!(merged[0].contains("busy_poll_us = 50") && merged[0].contains("spin_us = 50"), "{}", merged[0]);

    // topo PID, from inside side a (where the interface is): every thread, named, with a CPU.
    let o = lab.exec("a", &[bin(), "topo", &pid, "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let threads = report["process"]["threads"].as_array().unwrap();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count();
    assert_eq!(threads.len(), tasks, "{report}");
    assert!(threads.iter().any(|t| t["name"] == "redis-server" && t["cpu"].is_u64()), "{report}");
    assert_eq!(report["interface"], iface.as_str(), "{report}");
    assert!(report["process"]["memory"]["hugepages"]["0"].as_u64().unwrap_or(0) > 0, "DPDK's memory: {report}");
    assert!(report["notes"].to_string().contains("one NUMA node"), "{report}");
    let o = lab.exec("a", &[bin(), "topo", &pid]).output().unwrap();
    let out = text(&o);
    assert!(o.status.success() && out.starts_with(&format!("pid {pid} (redis-server")), "{out}");
    assert!(out.contains("  redis-server\n") && out.contains("hugepages (DPDK)"), "{out}");
    for (file, _) in merged_configs() {
        let _ = std::fs::remove_file(file);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 25: `pronghorn run --cpus 1` with `runtime.numa = "auto"` (the default) pins redis to
/// CPU 1 with its memory preferred on CPU 1's node before the exec, and `topo PID` shows every
/// thread there with its context switches; a CPU that is not online is refused before redis
/// starts, naming `--cpus`. The runtime lock's holds are timed once `stat` asked: a second
/// `stat` after traffic counts them, and `lat` shows them as a stage.
#[test]
fn redis_run_with_cpus_is_pinned_there_and_topo_shows_it() {
    let Some(lab_test) = scenario(REDIS_TOOLS) else { return };
    let lab = Lab::up("tst-numa", &[]);
    let o = lab.exec("a", &[bin(), "run", "--cpus", "1023", "--", "true"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--cpus: CPU 1023 is not online (online: "), "{}", text(&o));
    let dir = redis_dir(lab_test.name());
    std::fs::create_dir_all(&dir).unwrap();
    let iface = format!("{}-a0", lab.prefix);
    let _redis = Redis::start_with(&lab, &dir, &["--cpus", "1"], &[]);
    assert_eq!(redis_cli(&lab, &["ping"]).trim(), "PONG");
    let pid = accelerated_pid("redis-server", &iface);
    let (_, before) = stat_of_process_on(&iface);
    assert_eq!(before["process"]["lock_holds"], 0.0, "holds are not timed before a reader asks: {before}");
    redis_benchmark(&lab, &["-c", "10", "-n", "2000", "-t", "set,get"], &["SET", "GET"]);
    let (_, after) = stat_of_process_on(&iface);
    assert!(after["process"]["lock_holds"].as_f64().unwrap() > 4000.0, "{after}");
    assert!(after["process"]["lock_waits"].is_number() && after["process"]["wakeup_syscalls"].is_number(), "{after}");
    let o = pronghorn(&["lat", &pid, "--json"]);
    let lat: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let hold = lat["stages"].as_array().unwrap().iter().find(|s| s["stage"] == "lock-hold").cloned();
    assert!(hold.is_some_and(|h| h["samples"].as_u64().unwrap() > 4000 && h["p50_ns"].as_u64().unwrap() > 0), "{lat}");
    let o = lab.exec("a", &[bin(), "topo", &pid, "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["process"]["allowed_cpus"], serde_json::json!([1]), "{report}");
    let threads = report["process"]["threads"].as_array().unwrap();
    assert!(threads.len() > 1, "{report}");
    for t in threads {
        assert_eq!(t["cpu"], 1, "every thread last ran on CPU 1: {report}");
        assert!(t["waits"].is_u64() && t["preempted"].is_u64(), "context switches: {report}");
    }
    let numa_maps = std::fs::read_to_string(format!("/proc/{pid}/numa_maps")).unwrap();
    assert!(numa_maps.contains(" prefer:0 "), "memory preferred on CPU 1's node: {numa_maps}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 23: the DPDK interface shared with the kernel (`nic.share`, addresses "auto"). Side a's
/// veth gets kernel addresses; a kernel TCP echo server (port 7007) and a redis-server under
/// pronghorn (6379) serve side b on the same address at once; ping (the kernel's) works in both
/// families; pronghorn's XDP program hands pronghorn frames and passes the kernel others; after
/// a SIGKILL of the accelerated process the kernel's server and ping still work.
#[test]
fn a_shared_interface_serves_the_kernel_and_pronghorn_side_by_side() {
    let Some(_scenario) = scenario(&[("redis-server", "redis-server"), ("redis-cli", "redis-tools")]) else {
        return;
    };
    let lab = Lab::up("tst-share", &[]);
    let (iface, shared) = share_side_a(&lab);

    let _kernel_echo = compat_peer(lab.exec("a", &["python3", &peer_py(), "tcp-echo-server", "7007"]));
    let kernel_serves = |why: &str| {
        for host in ["10.99.0.1", "fd99::1"] {
            let o =
                lab.exec("b", &["python3", &peer_py(), "tcp-echo-client", host, "7007", "1048576"]).output().unwrap();
            assert!(o.status.success(), "kernel echo over {host} {why}: {}", text(&o));
            let out = ping(&lab, &[host]);
            assert!(out.contains("3 packets transmitted, 3 received"), "ping {host} {why}: {out}");
        }
    };
    kernel_serves("before pronghorn");

    let dir = std::env::temp_dir().join(format!("pronghorn-share-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = shared.to_str().unwrap();
    let mut redis = shared_redis(&lab, config, &["10.99.0.1", "fd99::1"], &dir);
    for host in ["10.99.0.1", "fd99::1"] {
        let o = lab.exec("b", &["redis-cli", "-h", host, "ping"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "PONG", "redis over {host}: {}", text(&o));
    }
    redis_benchmark(&lab, &["-c", "20", "-n", "5000", "-t", "set,get"], &["SET", "GET"]);
    kernel_serves("beside pronghorn");

    let (pid, stat) = stat_of_process_on(&iface);
    let shard = &stat["shards"][0];
    let count = |name: &str| shard[name].as_f64().unwrap_or(0.0);
    assert!(count("xdp_redirected") >= 10_000.0, "redis's frames go to pronghorn: {shard}");
    assert!(count("xdp_passed") >= 1_000.0, "the kernel's echo and ping go to the kernel: {shard}");
    assert_eq!(count("arp_replies") + count("nd_adverts") + count("echo_replies"), 0.0, "the kernel's: {shard}");

    // SIGKILL: the program stays attached with no socket, and hands the kernel everything.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = redis.0.wait();
    kernel_serves("after pronghorn was killed");

    // Clients: an accelerated one and a kernel one connect out to side b's echo server at once;
    // neither gets the other's replies (pronghorn's ephemeral ports are not the kernel's).
    let _b_echo = KernelServer::start(&lab, 7008);
    let peer = peer_py();
    let client = |accelerated: bool, host: &str| {
        let mut args = if accelerated { vec![bin(), "run", "--config", config, "--"] } else { vec![] };
        args.extend_from_slice(&["python3", &peer, "tcp-echo-client", host, "7008", "4194304", "--conns", "4"]);
        lab.exec("a", &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    };
    for host in ["10.99.0.2", "fd99::2"] {
        let (ours, kernels) = (client(true, host), client(false, host));
        for (who, c) in [("pronghorn", ours), ("the kernel", kernels)] {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{who}'s client to {host}: {}", text(&o));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 23 item 3: a process under pronghorn connects to its own listener on the accelerated
/// address (the dedicated interface, the lab's default): the shard receives what it sends itself,
/// 4 MiB echo back whole, and a port nobody holds refuses at once. Before, the SYN left on the
/// NIC for a neighbor nobody is (then the connect was refused outright, `self_connect_refused`).
///
/// It hung now and then (stop 23): the echo's thread slept in a blocking send whose own flush
/// had looped its data over and brought back the ACKs that made it writable; the wake for that
/// was its own thread's and was dropped (runtime test
/// `a_blocking_send_to_our_own_listener_larger_than_its_buffer_completes_while_nobody_reads`).
#[test]
fn an_accelerated_process_reaches_its_own_listener() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-self", &[]);
    let args = [bin(), "run", "--", "python3", &peer_py(), "self-connect", "10.99.0.1", "7010", "4194304"];
    assert_self_connect(&lab, &args);
}

/// `args` (peer.py's self-connect in side a) echoed its bytes whole and was refused at once on
/// the closed port.
fn assert_self_connect(lab: &Lab, args: &[&str]) {
    let o = lab.exec("a", args).output().unwrap();
    assert!(o.status.success(), "self-connect: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or("")).expect("one JSON line");
    assert_eq!((&v["echoed"], &v["closed_port"]), (&serde_json::json!(true), &serde_json::json!("refused")), "{v}");
}

/// Issue 23 items 3 and 4: on the shared interface, redis-server under pronghorn bound to the
/// wildcards (`0.0.0.0` and `::`, as its default `* -::*`) serves side b through pronghorn and
/// clients on its own host through the kernel socket beside each listener: redis-cli in side a,
/// not accelerated, over 127.0.0.1, ::1 and the interface's own addresses. One server: a key set
/// from side b is read locally and the other way round; `pronghorn stat` counts both sides'
/// accepts. Then a process under pronghorn connects to its own listener (through the kernel, to
/// the socket beside it). Before, the wildcard bind stayed with the kernel (side b's clients
/// never reached pronghorn), and with a specific address local clients reached nothing.
#[test]
fn a_shared_interface_serves_local_clients_and_wildcard_binds() {
    let Some(_scenario) = scenario(REDIS_TOOLS) else { return };
    let lab = Lab::up("tst-local", &[]);
    let (iface, shared) = share_side_a(&lab);
    let dir = std::env::temp_dir().join(format!("pronghorn-local-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut redis = shared_redis(&lab, shared.to_str().unwrap(), &["0.0.0.0", "::"], &dir);
    let cli = |side: &str, host: &str, args: &[&str]| {
        let o = lab.exec(side, &[&["redis-cli", "-h", host][..], args].concat()).output().unwrap();
        assert!(o.status.success(), "redis-cli in {side} to {host} {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    for host in ["10.99.0.1", "fd99::1"] {
        assert_eq!(cli("b", host, &["set", &format!("from-b-{host}"), "wire"]), "OK", "side b over {host}");
    }
    for host in ["127.0.0.1", "::1", "10.99.0.1", "fd99::1"] {
        assert_eq!(cli("a", host, &["get", "from-b-10.99.0.1"]), "wire", "a local client over {host}");
        assert_eq!(cli("a", host, &["set", &format!("from-a-{host}"), "local"]), "OK");
    }
    for host in ["10.99.0.1", "fd99::1"] {
        assert_eq!(cli("b", host, &["get", "from-a-127.0.0.1"]), "local", "side b over {host}");
    }
    let (_, stat) = stat_of_process_on(&iface);
    let process = |name: &str| stat["process"][name].as_f64().unwrap_or(0.0);
    assert!(process("accepted") >= 4.0, "side b's connections through pronghorn: {stat}");
    assert!(process("kernel_accepted") >= 8.0, "the local clients' through the kernel: {stat}");
    assert_eq!(process("kernel_bind"), 0.0, "the wildcard binds are accelerated: {stat}");
    let _ = redis.0.kill();
    let _ = redis.0.wait();
    let _ = std::fs::remove_dir_all(&dir);
    // A process connecting to its own listener: through the kernel, to the socket beside it.
    let config = shared.to_str().unwrap();
    let args =
        [bin(), "run", "--config", config, "--", "python3", &peer_py(), "self-connect", "10.99.0.1", "7010", "4194304"];
    assert_self_connect(&lab, &args);
}

/// Issue 23: on the shared interface a UDP server under pronghorn bound to a wildcard
/// (`0.0.0.0:PORT`, then `[::]:PORT`, which takes IPv4 too) serves side b through pronghorn: its
/// socket is the shard's and the XDP program hands it PORT (`pronghorn stat` counts the frames
/// redirected). Before, the bind stayed with the kernel, which served side b itself (the program
/// passed PORT to it). On `[::]` the server answers IPv4 clients at the IPv4-mapped address it
/// read (an AF_INET address there made Python's sendto fail).
#[test]
fn a_shared_interface_accelerates_a_udp_wildcard_bind() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-udpany", &[]);
    let (iface, shared) = share_side_a(&lab);
    let config = shared.to_str().unwrap();
    for (any, port, clients) in [("0.0.0.0", "7020", &["10.99.0.1"][..]), ("::", "7021", &["10.99.0.1", "fd99::1"])] {
        let server = [bin(), "run", "--config", config, "--", "python3", &peer_py(), "udp-echo-server", any, port];
        let mut server = Accelerated(lab.exec("a", &server).stdout(Stdio::piped()).spawn().unwrap());
        read_until(&mut BufReader::new(server.0.stdout.take().unwrap()), "ready", "udp-echo-server");
        for host in clients {
            let o = lab.exec("b", &["python3", &peer_py(), "udp-echo-client", host, port, "50"]).output().unwrap();
            assert!(text(&o).contains("\"echoed_identical\": 50"), "udp to {any} over {host}: {}", text(&o));
        }
        let (_, stat) = stat_of_process_on(&iface);
        let process = |name: &str| stat["process"][name].as_f64().unwrap_or(0.0);
        let udp = (process("accelerated_udp"), process("kernel_udp"));
        assert_eq!(udp, (1.0, 0.0), "the bind to {any} is the shard's: {stat}");
        let redirected = stat["shards"][0]["xdp_redirected"].as_f64().unwrap_or(0.0);
        assert!(redirected >= 50.0 * clients.len() as f64, "side b's datagrams go to pronghorn: {stat}");
    }
}

/// A server killed with SIGKILL leaves its XDP program attached until its cleanup helper
/// (`pronghorn reap`) detaches it; a server started on the interface before that (a restart; the
/// next lab test on a loaded machine, which failed CI with "Failed to configure xdp socket")
/// found the interface taken. Here the helper is killed first, so the program stays for good:
/// the next server detaches the leftover itself (`nic::xdp::detach_leftover`) and serves side b.
#[test]
fn a_server_started_after_one_was_killed_detaches_the_program_it_left() {
    let Some(_scenario) = scenario(&[]) else { return };
    let lab = Lab::up("tst-leftover", &[]);
    let iface = format!("{}-a0", lab.prefix);
    let config = lab.config_a();
    let server = |port: &str| {
        let argv = [bin(), "run", "--config", config.to_str().unwrap(), "--", "python3", &peer_py()];
        let argv = [&argv[..], &["udp-echo-server", "10.99.0.1", port]].concat();
        let mut server = Accelerated(lab.exec("a", &argv).stdout(Stdio::piped()).spawn().unwrap());
        read_until(&mut BufReader::new(server.0.stdout.take().unwrap()), "ready", "udp-echo-server");
        server
    };
    let program_attached = || lab.xdp_attached();
    let first = server("7030");
    assert!(program_attached(), "the first server's program is attached");
    // Its cleanup helper goes first (its command line kept), then the server itself.
    let helper = format!("reap --pid [0-9]+ --iface {iface}( |$)");
    let o = Command::new("pgrep").args(["-f", &helper]).output().unwrap();
    let helper_pid = text(&o).trim().to_string();
    assert!(o.status.success() && !helper_pid.contains('\n'), "one cleanup helper for the first server: {}", text(&o));
    let cmdline = std::fs::read(format!("/proc/{helper_pid}/cmdline")).unwrap();
    let helper_argv: Vec<String> =
        cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let dead_pid = helper_argv.iter().skip_while(|a| *a != "--pid").nth(1).cloned().unwrap();
    assert!(Command::new("kill").args(["-KILL", &helper_pid]).status().unwrap().success());
    drop(first);
    assert!(program_attached(), "with its helper gone the killed server's program stays");
    let _second = server("7031");
    let echo = || {
        let o = lab.exec("b", &["python3", &peer_py(), "udp-echo-client", "10.99.0.1", "7031", "50"]).output();
        text(&o.unwrap())
    };
    let out = echo();
    assert!(out.contains("\"echoed_identical\": 50"), "the second server: {out}");
    // The first server's helper, run late (by hand here): the second server holds the queue, so
    // it removes only what the dead one left (its EAL directory) and leaves the program alone.
    let dir = format!("/var/run/dpdk/pronghorn-{dead_pid}");
    assert!(Path::new(&dir).exists(), "{dir}: the dead server's EAL directory, left");
    let argv: Vec<&str> = helper_argv.iter().map(String::as_str).collect();
    let o = lab.exec("a", &argv).output().unwrap();
    assert!(o.status.success(), "the late helper: {}", text(&o));
    assert!(!Path::new(&dir).exists(), "the late helper removes {dir}");
    assert!(program_attached(), "the late helper leaves the second server's program attached");
    let out = echo();
    assert!(out.contains("\"echoed_identical\": 50"), "the second server after the late helper: {out}");
}

/// `pronghorn run -- setpriv --reuid=nobody --regid=nogroup --clear-groups` in front of `cmd`
/// (`caps`: passed on as ambient capabilities), on side a.
fn setpriv_nobody(lab: &Lab, caps: bool, cmd: &[&str]) -> Command {
    let mut argv = vec![bin(), "run", "--", "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"];
    let nic_caps = postgres::setpriv_nic_caps();
    let (inh, amb) = (format!("--inh-caps={nic_caps}"), format!("--ambient-caps={nic_caps}"));
    if caps {
        argv.extend_from_slice(&[&inh, &amb]);
    }
    argv.extend_from_slice(cmd);
    lab.exec("a", &argv)
}

/// Reads `who`'s output until a line with `needle` (it must come before the output ends).
/// When it ends first, the failure quotes everything `who` printed.
fn read_until(reader: &mut impl BufRead, needle: &str, who: &str) {
    let mut so_far = String::new();
    let mut line = String::new();
    while !line.contains(needle) {
        line.clear();
        let n = reader.read_line(&mut line).unwrap();
        assert!(n > 0, "{who} ended before printing {needle:?}; it printed:\n{so_far}");
        so_far.push_str(&line);
    }
}

/// The uid of `nobody`, as the system names it.
fn nobody_uid() -> libc::uid_t {
    let name = std::ffi::CString::new("nobody").unwrap();
    // SAFETY: `name` is NUL-terminated; getpwnam's result is read at once, before any other
    // call that could overwrite it.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(!pw.is_null(), "no user nobody");
    // SAFETY: checked non-null above.
    unsafe { (*pw).pw_uid }
}

/// redis-server on the accelerated address as `nobody` may run it (its dir in /tmp).
const REDIS_AS_NOBODY: &[&str] =
    &["redis-server", "--bind", "10.99.0.1", "--port", "6379", "--save", "", "--protected-mode", "no", "--dir", "/tmp"];

/// Issue 24: privilege-dropping wrappers under `pronghorn run`. setpriv keeps its capabilities
/// across setresuid and raises them again with capset (its own thread only); the credential
/// hook used to open the NIC there, whose threads then failed glibc's setresgid broadcast and
/// glibc aborted (rc 134, nothing printed). Now: the wrapper runs; the server it execs is
/// accelerated when the wrapper passes it the NIC's capabilities (ps lists it, side b is
/// served), and otherwise exits saying why (needs root or those capabilities; ENETDOWN). runuser
/// forks the program from a root parent: the program is on the kernel and fails to bind the
/// accelerated address, clearly, with no abort.
#[test]
fn a_privilege_dropping_wrapper_never_aborts_and_its_server_says_where_it_runs() {
    let Some(_scenario) = scenario(&[REDIS_TOOLS, &[("setpriv", "util-linux"), ("runuser", "util-linux")]].concat())
    else {
        return;
    };
    let lab = Lab::up("tst-cred", &[]);
    let o = setpriv_nobody(&lab, false, &["/bin/echo", "dropped"]).output().unwrap();
    assert!(o.status.success() && text(&o).contains("dropped"), "setpriv: {:?} {}", o.status, text(&o));
    let o = lab
        .exec(
            "a",
            &[bin(), "run", "--", "setpriv", "--reuid=nobody", "--regid=nogroup", "--init-groups", "/bin/echo", "hi"],
        )
        .output()
        .unwrap();
    assert!(o.status.success() && text(&o).contains("hi"), "setpriv --init-groups: {:?} {}", o.status, text(&o));

    // Without the capabilities: the server says why it cannot serve there, and ends.
    let o = setpriv_nobody(&lab, false, REDIS_AS_NOBODY).output().unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("needs root") && out.contains("ambient capabilities") && out.contains("ENETDOWN"), "{out}");

    // With them: accelerated, as `nobody`.
    let mut redis = setpriv_nobody(&lab, true, REDIS_AS_NOBODY).stdout(Stdio::piped()).spawn().unwrap();
    let mut reader = BufReader::new(redis.stdout.take().unwrap());
    read_until(&mut reader, "Ready to accept connections", "redis-server as nobody");
    let redis = Accelerated(redis);
    assert_eq!(redis_cli(&lab, &["ping"]).trim(), "PONG");
    let o = pronghorn(&["ps", "--json"]);
    let iface = format!("{}-a0", lab.prefix);
    let listed = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|p| p["interface"] == iface.as_str() && p.to_string().contains("redis-server"));
    assert!(listed, "ps does not list redis-server as nobody on {iface}: {}", text(&o));
    // Killed: no exit handler closes its port, and as nobody it has no cleanup helper, so its
    // EAL directory stays until the next process that is not root opens a port and sweeps it.
    let nobody = nobody_uid();
    let killed_dir = nic::dpdk::runtime_dir_for(redis.0.id(), nobody);
    drop(redis);
    assert!(Path::new(&killed_dir).is_dir(), "{killed_dir}: the killed server's EAL directory");
    let mut child = setpriv_nobody(&lab, true, REDIS_AS_NOBODY).stdout(Stdio::piped()).spawn().unwrap();
    let second_dir = nic::dpdk::runtime_dir_for(child.id(), nobody);
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut redis = Accelerated(child);
    read_until(&mut reader, "Ready to accept connections", "the second redis-server as nobody");
    assert!(!Path::new(&killed_dir).exists(), "{killed_dir}: swept when the next server opened its port");
    assert!(Path::new(&second_dir).is_dir(), "{second_dir}: the running server's own");
    // Shut down, it closes its port and removes its own: the suite leaves nothing in /tmp/dpdk.
    redis_cli(&lab, &["shutdown", "nosave"]);
    let mut status = None;
    eventually("the second redis-server exits after SHUTDOWN", || {
        status = redis.0.try_wait().unwrap();
        status.is_some()
    });
    assert!(status.unwrap().success(), "{status:?}");
    assert!(!Path::new(&second_dir).exists(), "{second_dir}: removed at the server's exit");

    // runuser: the program runs in a child of a root parent, on the kernel.
    let argv = [&[bin(), "run", "--", "runuser", "-u", "nobody", "--"], REDIS_AS_NOBODY].concat();
    let o = lab.exec("a", &argv).output().unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("Cannot assign requested address"), "{out}");
}

/// Issue 24, as far as it goes today: PostgreSQL 15 started as Debian starts it (as postgres,
/// here through setpriv, which passes it the NIC's capabilities) serves accelerated (ps lists
/// it) and accepts psql's connection from side b; the backend it forks for that connection
/// cannot use the inherited socket (`runtime.share` is off by default) and fails at once, loudly: pronghorn
/// says why on the server's stderr, postgres logs the EOPNOTSUPP, psql is told the server
/// closed the connection. Before, the postmaster hung: a child started from its signal handler
/// waited for the runtime lock its interrupted select held.
#[test]
fn postgres_accepts_and_its_forked_backend_fails_clearly() {
    let Some(pg) = Postgres::start("tst-pg", None) else { return };
    let (lab, dir, data, server, log) = (&pg.lab, &pg.dir, &pg.data, pg.server, pg.log);
    // A connection that gets through: the postmaster serves (its backend fails, as below).
    until_ok(lab, &["bash", "-c", "exec 3<>/dev/tcp/10.99.0.1/5432"]);
    let o = pronghorn(&["ps"]);
    assert!(text(&o).contains(&format!("{}-a0", lab.prefix)) && text(&o).contains("postgres"), "{}", text(&o));
    let o = lab
        .exec("b", &["timeout", "30", "psql", "-h", "10.99.0.1", "-U", "postgres", "-c", "select 1"])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(124), "psql hung: {}", text(&o));
    assert!(text(&o).contains("server closed the connection unexpectedly"), "psql: {}", text(&o));
    eventually("the backend's failure on the server's stderr", || {
        let log = log.lock().unwrap();
        log.contains("inherited through fork after its parent started serving")
            && log.contains("Operation not supported")
    });
    let pid = std::fs::read_to_string(data.join("postmaster.pid")).unwrap();
    // Fast shutdown: the postmaster exits on its own (and removes its stats region).
    unsafe { libc::kill(pid.lines().next().unwrap().trim().parse().unwrap(), libc::SIGINT) };
    let mut server = server;
    let status = server.0.wait().unwrap();
    assert!(status.success(), "postgres exited with {status:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Debian's PostgreSQL 15, started as Debian starts it (as postgres, here through setpriv, which
/// passes it the NIC's capabilities), listening on the lab's accelerated address; `runtime` is
/// appended to the lab's config as its `[runtime]` section ("": none).
struct Postgres {
    lab: Lab,
    dir: PathBuf,
    data: PathBuf,
    server: Accelerated,
    /// The server's stderr so far.
    log: std::sync::Arc<std::sync::Mutex<String>>,
    /// Held until the end (after the lab went down).
    _scenario: testkit::lab::Scenario,
}

impl Postgres {
    /// PostgreSQL under `pronghorn run`, with `profile` (`--profile`) if given.
    fn start(prefix: &str, profile: Option<&str>) -> Option<Postgres> {
        let tools = [("setpriv", "util-linux"), ("runuser", "util-linux"), ("psql", "postgresql-client-15")];
        let lab_test = scenario(&tools)?;
        if !Path::new(postgres::BIN).join("postgres").is_file() {
            eprintln!(
                "{}: skipped ({}/postgres is not installed: Debian's postgresql-15)",
                lab_test.name(),
                postgres::BIN
            );
            return None;
        }
        let lab = Lab::up(prefix, &[]);
        let dir = std::env::temp_dir().join(format!("pronghorn-{prefix}-{}", std::process::id()));
        let data = new_datadir(&dir, "10.99.0.0/24");
        let config = lab.config_a();
        let config = config.to_str().unwrap();
        let mut argv = vec![bin(), "run", "--config", config];
        if let Some(p) = profile {
            argv.extend_from_slice(&["--profile", p]);
        }
        argv.push("--");
        let postgres = postgres::server(&data, "10.99.0.1", &dir, &[]);
        argv.extend(postgres.iter().map(String::as_str));
        let mut server = lab.exec("a", &argv).stderr(Stdio::piped()).spawn().unwrap();
        let mut reader = BufReader::new(server.stderr.take().unwrap());
        read_until(&mut reader, "listening on IPv4 address", "postgres");
        let server = Accelerated(server);
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut l = String::new();
            while reader.read_line(&mut l).map(|n| n > 0).unwrap_or(false) {
                sink.lock().unwrap().push_str(&l);
                l.clear();
            }
        });
        Some(Postgres { lab, dir, data, server, log, _scenario: lab_test })
    }
}

/// A new datadir `dir`/data (initdb as the postgres user, `dir` made and given to it) whose
/// pg_hba.conf also lets clients from `net` (side b's subnet) in without a password (initdb's
/// -A trust covers local ones only).
fn new_datadir(dir: &Path, net: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    assert!(Command::new("chown").args(["postgres:", dir.to_str().unwrap()]).status().unwrap().success());
    let data = dir.join("data");
    let initdb = postgres::initdb(&data);
    let o = Command::new(&initdb[0]).args(&initdb[1..]).output().unwrap();
    assert!(o.status.success(), "initdb: {}", text(&o));
    let hba = data.join("pg_hba.conf");
    let rules = std::fs::read_to_string(&hba).unwrap() + &postgres::trust_host(net);
    std::fs::write(&hba, rules).unwrap();
    data
}

/// What pgbench did when a backend was killed under it (`kill_a_backend_under_pgbench`).
#[derive(Debug, PartialEq, Eq)]
struct AfterTheKill {
    /// pgbench's exit status (124: `timeout` ended it: a client never heard of the crash).
    pgbench_status: Option<i32>,
    /// pgbench said clients were aborted (PostgreSQL ends every backend at a backend's crash).
    clients_aborted: bool,
}

/// A postmaster on the kernel path beside `pg`'s, for the same runs on Linux's TCP: a datadir of
/// its own, listening on side a's kernel address 10.98.0.1, port 5433. The process and its
/// datadir.
fn kernel_postmaster(pg: &Postgres) -> (std::process::Child, PathBuf) {
    let kdir = pg.dir.join("kernel");
    let kdata = new_datadir(&kdir, "10.98.0.0/24");
    let kserver = postgres::server(&kdata, "10.98.0.1", &kdir, &["port=5433"]);
    let argv: Vec<&str> = kserver.iter().map(String::as_str).collect();
    let mut kernel = pg.lab.exec("a", &argv).stderr(Stdio::piped()).spawn().unwrap();
    let mut kreader = BufReader::new(kernel.stderr.take().unwrap());
    read_until(&mut kreader, "listening on IPv4 address", "postgres on the kernel path");
    std::thread::spawn(move || std::io::copy(&mut kreader, &mut std::io::sink()));
    (kernel, kdata)
}

/// Fast shutdown of [`kernel_postmaster`]'s server, waited for.
fn stop_kernel_postmaster(mut kernel: std::process::Child, kdata: &Path) {
    // SAFETY: kill takes integers; the kernel path's postmaster, ours.
    unsafe { libc::kill(postmaster_pid(kdata), libc::SIGINT) };
    let _ = kernel.wait();
}

/// The postmaster's pid (postmaster.pid's first line).
fn postmaster_pid(data: &Path) -> i32 {
    std::fs::read_to_string(data.join("postmaster.pid")).unwrap().lines().next().unwrap().trim().parse().unwrap()
}

/// pgbench -S with 4 clients against the server at `addr`:`port` (datadir `data`); once its 4
/// backends run, one is killed with SIGKILL. Returns what pgbench did, once the server, after
/// its crash recovery, served a new pgbench run in full.
fn kill_a_backend_under_pgbench(lab: &Lab, addr: &str, port: &str, data: &Path) -> AfterTheKill {
    let pgbench = |args: &[&str]| -> Command {
        let fixed = ["timeout", "60", "pgbench", "-h", addr, "-p", port, "-U", "postgres"];
        lab.exec("b", &[&fixed[..], args, &["postgres"]].concat())
    };
    let o = pgbench(&["-i", "-s", "1", "-q"]).output().unwrap();
    assert!(o.status.success(), "pgbench -i: {}", text(&o));
    let bench = pgbench(&["-S", "-c", "4", "-j", "2", "-T", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let postmaster = postmaster_pid(data).to_string();
    // pgbench's backends: the postmaster's children titled "postgres: USER DB HOST(PORT) ...".
    let backends = || -> Vec<i32> {
        let o =
            Command::new("pgrep").args(["-P", &postmaster, "-f", "^postgres: postgres postgres "]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect()
    };
    eventually("pgbench's 4 backends run", || backends().len() >= 4);
    let victim = backends()[0];
    // SAFETY: kill takes integers; `victim` is a backend of the server under test.
    assert_eq!(unsafe { libc::kill(victim, libc::SIGKILL) }, 0);
    let o = bench.wait_with_output().unwrap();
    let out = text(&o);
    eprintln!("pgbench at {addr}, backend {victim} killed:\n{out}");
    // The server is in crash recovery for a while: new connections are refused until it ends.
    eventually("the server serves a pgbench run in full after its crash recovery", || {
        let o = pgbench(&["-S", "-c", "4", "-j", "2", "-t", "50"]).output().unwrap();
        o.status.success() && text(&o).contains("number of transactions actually processed: 200/200")
    });
    AfterTheKill { pgbench_status: o.status.code(), clients_aborted: out.contains("aborted") }
}

/// Issue 24: "kill -9 of a process holding the stack lock: the others carry on", with
/// PostgreSQL under `--profile postgres` (`share = "family"`): a backend is killed with SIGKILL
/// while pgbench runs. PostgreSQL itself then ends every other backend (a backend that died
/// may have left its shared memory corrupt), tells their clients, reinitialises and takes
/// connections again; Linux closes the dead backend's socket, so its client hears of the
/// crash too. The same scenario runs first on the kernel path (a postmaster of its own on
/// 10.98.0.1, without pronghorn), and pronghorn's run must end the same way: pgbench ends on
/// its own with its clients aborted (without the family's recovery the dead backend's
/// connection stayed open, its client waited, and `timeout` ended pgbench), and the server
/// serves a new pgbench run in full. `pronghorn stat` of the postmaster counts the dead.
#[test]
fn postgres_carries_on_after_a_backend_is_killed_under_pgbench_with_share_family() {
    let Some(pg) = Postgres::start("tst-pgkill", Some("postgres")) else { return };
    let lab = &pg.lab;
    // Linux's run: its own datadir and postmaster on the kernel path.
    let (kernel, kdata) = kernel_postmaster(&pg);
    let linux = kill_a_backend_under_pgbench(lab, "10.98.0.1", "5433", &kdata);
    stop_kernel_postmaster(kernel, &kdata);
    let ours = kill_a_backend_under_pgbench(lab, "10.99.0.1", "5432", &pg.data);
    assert_eq!(ours, linux, "pronghorn's run ended otherwise than Linux's");
    let pid = postmaster_pid(&pg.data).to_string();
    let o = pronghorn(&["stat", &pid, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let stat: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dead = stat["process"]["family_dead_processes"].as_f64().unwrap_or(0.0);
    assert!(dead >= 1.0, "the killed backend was not counted: {stat}");
    // SAFETY: as above, the postmaster under test.
    unsafe { libc::kill(postmaster_pid(&pg.data), libc::SIGINT) };
    let mut server = pg.server;
    let status = server.0.wait().unwrap();
    assert!(status.success(), "postgres exited with {status:?}\n{}", pg.log.lock().unwrap());
    let _ = std::fs::remove_dir_all(&pg.dir);
}

/// pgbench's runs for [`postgres_tables_after_pgbench_are_the_kernel_paths_with_share_family`]:
/// each with a seed of its own and a count of transactions per client, so that the kernel's
/// server and ours are asked the same transactions.
const PGBENCH_SEEDED_RUNS: [(&[&str], u32); 4] = [
    (&["-c", "16", "-j", "4", "-t", "50", "--random-seed=11"], 800),
    (&["-c", "64", "-j", "4", "-t", "20", "--random-seed=12"], 1280),
    (&["-S", "-c", "64", "-j", "4", "-t", "50", "--random-seed=13"], 3200),
    (&["-C", "-c", "16", "-j", "4", "-t", "10", "--random-seed=14"], 160),
];

/// The seeded pgbench runs against the server at `addr`:`port`, each checked as pgbench reports
/// it (every transaction processed, none failed); then a digest of the tables they wrote.
fn pgbench_seeded_runs_then_digest(lab: &Lab, addr: &str, port: &str) -> String {
    let fixed = ["timeout", "120", "pgbench", "-h", addr, "-p", port, "-U", "postgres"];
    let run = |args: &[&str]| {
        let o = lab.exec("b", &[&fixed[..], args, &["postgres"]].concat()).output().unwrap();
        assert!(o.status.success(), "pgbench {args:?} at {addr}: {}", text(&o));
        text(&o)
    };
    run(&["-i", "-s", "1", "-q"]);
    for (args, total) in PGBENCH_SEEDED_RUNS {
        // -n: no vacuum first, which would also empty the history of the runs before.
        let out = run(&[&["-n"][..], args].concat());
        assert!(
            out.contains(&format!("number of transactions actually processed: {total}/{total}")),
            "{args:?}: {out}"
        );
        assert!(out.contains("number of failed transactions: 0"), "{args:?}: {out}");
    }
    // Every balance, and the history's rows without their times, in a fixed order.
    let digest = "select (select md5(string_agg(aid || ':' || abalance, ',' order by aid)) from pgbench_accounts) \
                  || ' ' || (select md5(string_agg(tid || ':' || tbalance, ',' order by tid)) from pgbench_tellers) \
                  || ' ' || (select md5(string_agg(bid || ':' || bbalance, ',' order by bid)) from pgbench_branches) \
                  || ' ' || (select md5(string_agg(concat_ws(':', tid, bid, aid, delta), ',' \
                                                   order by tid, bid, aid, delta)) from pgbench_history) \
                  || ' ' || (select count(*) from pgbench_history)";
    let o = lab
        .exec("b", &["timeout", "60", "psql", "-h", addr, "-p", port, "-U", "postgres", "-Atc", digest, "postgres"])
        .output()
        .unwrap();
    assert!(o.status.success(), "psql at {addr}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Issue 24: pgbench "with results identical to the kernel path (pgbench's own checks, then
/// table checksums)", at 16 and 64 clients, select-only, the TPC-B-like mix and a connection
/// per transaction (-C). The same seeded runs go to a postmaster on the kernel path (its own
/// datadir, on 10.98.0.1:5433) and to one under `--profile postgres` (`share = "family"`). A
/// client's random draws come from the run's seed, so both servers get the same transactions,
/// in another order; the mix only adds to balances and appends to the history, so the tables
/// end the same whatever the order. A transaction lost, run twice or half-applied on our path
/// changes the digest (every balance of the accounts, tellers and branches, and the history's
/// rows without their times).
#[test]
fn postgres_tables_after_pgbench_are_the_kernel_paths_with_share_family() {
    let Some(pg) = Postgres::start("tst-pgsum", Some("postgres")) else { return };
    let lab = &pg.lab;
    let (kernel, kdata) = kernel_postmaster(&pg);
    let linux = pgbench_seeded_runs_then_digest(lab, "10.98.0.1", "5433");
    stop_kernel_postmaster(kernel, &kdata);
    let ours = pgbench_seeded_runs_then_digest(lab, "10.99.0.1", "5432");
    assert_eq!(ours, linux, "the tables pgbench left differ from the kernel path's\n{}", pg.log.lock().unwrap());
    eprintln!("the tables after the seeded runs, on both paths: {ours}");
    // A digest of no rows (an empty history) would match too: the runs wrote.
    let rows: u32 = linux.rsplit(' ').next().unwrap().parse().unwrap();
    let writes: u32 = PGBENCH_SEEDED_RUNS.iter().filter(|(args, _)| !args.contains(&"-S")).map(|(_, n)| n).sum();
    assert_eq!(rows, writes, "the history holds one row per TPC-B-like transaction: {linux}");
    // SAFETY: as above, the postmaster under test.
    unsafe { libc::kill(postmaster_pid(&pg.data), libc::SIGINT) };
    let mut server = pg.server;
    let status = server.0.wait().unwrap();
    assert!(status.success(), "postgres exited with {status:?}\n{}", pg.log.lock().unwrap());
    let _ = std::fs::remove_dir_all(&pg.dir);
}

/// Issue 24: PostgreSQL's postmaster killed with SIGKILL while a client's query runs
/// (`--profile postgres`). On Linux the backends find the postmaster gone and exit, the kernel
/// closes their connections, and psql says "server closed the connection unexpectedly". Here
/// nobody drives the NIC once the postmaster is gone, and a backend busy in its query never
/// sleeps in the runtime to find that out: a child of the family that exits takes the driver's
/// place first (`family::succession`), so the backend's FIN goes out, and the last process of
/// the family closes the port. Before, psql waited until `timeout` ended it, and the XDP
/// program stayed attached (the server is not root: it has no cleanup helper).
#[test]
fn postgres_clients_hear_the_server_went_away_when_the_postmaster_is_killed_with_share_family() {
    let Some(pg) = Postgres::start("tst-pgdie", Some("postgres")) else { return };
    let lab = &pg.lab;
    let postmaster = postmaster_pid(&pg.data);
    let query = ["timeout", "30", "psql", "-h", "10.99.0.1", "-U", "postgres", "-Atc", "select pg_sleep(3); select 1"];
    let psql = lab.exec("b", &query).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let of_the_server = |pid: &str| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|d| d == pg.data);
    let processes = || -> Vec<String> {
        let o = Command::new("pgrep").args(["-f", "^postgres: "]).output().unwrap();
        text(&o).lines().map(str::to_string).filter(|p| of_the_server(p)).collect()
    };
    eventually("the query's backend runs", || {
        processes().iter().any(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"postgres: postgres postgres "))
        })
    });
    // SAFETY: kill takes integers; the postmaster, which runs.
    unsafe { libc::kill(postmaster, libc::SIGKILL) };
    let o = psql.wait_with_output().unwrap();
    assert_ne!(
        o.status.code(),
        Some(124),
        "psql waited until timeout ended it: {}\n{}",
        text(&o),
        pg.log.lock().unwrap()
    );
    assert!(text(&o).contains("server closed the connection unexpectedly"), "psql: {}", text(&o));
    eventually("the family ends and the port is closed", || processes().is_empty() && !lab.xdp_attached());
    let log = pg.log.lock().unwrap().clone();
    assert!(log.contains(&format!("pronghorn: pid {postmaster}, which drove the NIC for its family")), "{log}");
    let _ = std::fs::remove_dir_all(&pg.dir);
}

/// Issue 24 stage 3: with `--profile postgres` (`[runtime] share = "family"`) the backend the postmaster forks for a
/// connection serves it on the postmaster's stack (the postmaster's stack thread drives the NIC):
/// psql from side b gets its answer, several times over (a backend per connection), and
/// pgbench's select-only run with 16 clients completes every transaction without a failure.
#[test]
fn postgres_serves_psql_through_its_forked_backends_with_share_family() {
    let Some(pg) = Postgres::start("tst-pgfam", Some("postgres")) else { return };
    let lab = &pg.lab;
    for k in 0..3 {
        let o = lab
            .exec(
                "b",
                &["timeout", "30", "psql", "-h", "10.99.0.1", "-U", "postgres", "-Atc", &format!("select {k} + 40")],
            )
            .output()
            .unwrap();
        assert!(
            o.status.success() && text(&o).contains(&format!("{}", k + 40)),
            "psql: {} {}",
            text(&o),
            pg.log.lock().unwrap()
        );
    }
    // pgbench's select-only run, 16 clients (a backend each), then its own checks.
    let bench = |args: &[&str]| {
        let cmd =
            [&["timeout", "120", "pgbench", "-h", "10.99.0.1", "-U", "postgres"][..], args, &["postgres"]].concat();
        let o = lab.exec("b", &cmd).output().unwrap();
        assert!(o.status.success(), "pgbench {args:?}: {}\n{}", text(&o), pg.log.lock().unwrap());
        text(&o)
    };
    bench(&["-i", "-s", "1", "-q"]);
    let out = bench(&["-S", "-c", "16", "-j", "4", "-t", "200"]);
    assert!(out.contains("number of transactions actually processed: 3200/3200"), "{out}");
    assert!(out.contains("number of failed transactions: 0"), "{out}");
    eprintln!("pgbench -S -c 16:\n{out}");
    // The TPC-B-like mix (writes, a backend each), and a connection per transaction (-C: a
    // fork per transaction; a fork while the opener's driver sent wakes used to leave the
    // child a lock it could never take, and the family stalled).
    for args in [&["-c", "16", "-j", "4", "-t", "50"][..], &["-S", "-C", "-c", "16", "-j", "4", "-t", "20"]] {
        let out = bench(args);
        assert!(out.contains("number of failed transactions: 0"), "{args:?}: {out}");
        eprintln!("pgbench {args:?}:\n{out}");
    }
    let o = pronghorn(&["ps"]);
    assert!(text(&o).contains(&format!("{}-a0", lab.prefix)) && text(&o).contains("postgres"), "{}", text(&o));
    let pid = std::fs::read_to_string(pg.data.join("postmaster.pid")).unwrap();
    let pid: u32 = pid.lines().next().unwrap().trim().parse().unwrap();
    // The postmaster runs as postgres, so its EAL keeps its directory under /tmp/dpdk (DPDK's
    // choice for a uid other than 0), not /var/run/dpdk; its port's close removes that one.
    let eal_dir = format!("/tmp/dpdk/pronghorn-{pid}");
    assert!(Path::new(&eal_dir).is_dir(), "{eal_dir} while postgres runs");
    // Fast shutdown: the postmaster exits on its own.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let mut server = pg.server;
    let status = server.0.wait().unwrap();
    assert!(status.success(), "postgres exited with {status:?}\n{}", pg.log.lock().unwrap());
    assert!(!Path::new(&eal_dir).exists(), "{eal_dir} left after postgres closed its port");
    let _ = std::fs::remove_dir_all(&pg.dir);
}
