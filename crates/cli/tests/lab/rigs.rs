//! The rigs of the lab scenarios (`main.rs`): the lab itself, pronghorn's echo and client,
//! the servers run under `pronghorn run` (redis, mariadb, nginx), their kernel twins, and the
//! scripts of side b (`tests/lab/*.py`). Each rig stops what it started when dropped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use testkit::lab::{dpdk_runtime_dirs, eventually, lab_prefix, netns_exists, nr_hugepages, text};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pronghorn")
}

pub fn pronghorn(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("running pronghorn")
}

/// A lab that is taken down when the test ends, pass or fail.
pub struct Lab {
    pub prefix: String,
}

impl Lab {
    pub fn up(prefix: &str, extra: &[&str]) -> Lab {
        let prefix = &lab_prefix(prefix);
        let mut args = vec!["lab", "up", "--prefix", prefix];
        args.extend_from_slice(extra);
        let o = pronghorn(&args);
        assert!(o.status.success(), "lab up failed: {}", text(&o));
        Lab { prefix: prefix.to_string() }
    }

    pub fn exec(&self, side: &str, cmd: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(["lab", "exec", "--prefix", &self.prefix, side, "--"]).args(cmd);
        c
    }

    /// Whether side a's DPDK-owned veth carries an XDP program (`ip -d link` shows it).
    pub fn xdp_attached(&self) -> bool {
        let (ns, iface) = (format!("{}-a", self.prefix), format!("{}-a0", self.prefix));
        let o = Command::new("ip").args(["-n", &ns, "-d", "link", "show", "dev", &iface]).output().unwrap();
        text(&o).contains("prog/xdp")
    }

    pub fn config_a(&self) -> PathBuf {
        PathBuf::from(format!("/run/pronghorn/lab/{}/a.toml", self.prefix))
    }

    /// Node k's config in a lab brought up with --nodes.
    pub fn node_config(&self, k: u16) -> PathBuf {
        PathBuf::from(format!("/run/pronghorn/lab/{}/a{k}.toml", self.prefix))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = pronghorn(&["lab", "down", "--prefix", &self.prefix]);
    }
}

/// `pronghorn echo` running in side a; stopped with SIGTERM.
pub struct Echo {
    pub child: Child,
    pub ready: String,
}

impl Echo {
    pub fn start(lab: &Lab, extra: &[&str]) -> Echo {
        Echo::start_on(lab, "a", extra)
    }

    /// On side a or node aK.
    pub fn start_on(lab: &Lab, side: &str, extra: &[&str]) -> Echo {
        let mut args = vec![bin(), "echo"];
        args.extend_from_slice(extra);
        let mut child =
            lab.exec(side, &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn echo");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        if !line.contains("ready") {
            let out = child.wait_with_output().unwrap();
            panic!("echo did not start: {line}{}", text(&out));
        }
        Echo { child, ready: line }
    }

    /// SIGTERM, then the rest of its output; asserts a clean exit.
    pub fn stop(mut self) -> String {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let child = std::mem::replace(&mut self.child, Command::new("true").spawn().unwrap());
        let out = child.wait_with_output().unwrap();
        let t = text(&out);
        assert!(out.status.success(), "echo exited with {:?}: {t}", out.status);
        t
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn ping(lab: &Lab, args: &[&str]) -> String {
    let mut full = vec!["ping", "-c", "3", "-i", "0.2", "-W", "5"];
    full.extend_from_slice(args);
    let o = lab.exec("b", &full).output().unwrap();
    text(&o)
}

/// After `lab down`: none of lab `prefix`'s namespaces (`<prefix>-<ns>`) or interfaces, no
/// hugepages kept, no DPDK runtime files, no state.
pub fn assert_lab_gone(prefix: &str, namespaces: &[&str], interfaces: &[&str], huge_before: u64) {
    for ns in namespaces {
        assert!(!netns_exists(&format!("{prefix}-{ns}")), "namespace {prefix}-{ns} left");
    }
    for dev in interfaces {
        assert!(!Path::new("/sys/class/net").join(format!("{prefix}-{dev}")).exists(), "{prefix}-{dev} left");
    }
    assert_eq!(nr_hugepages(), huge_before, "hugepages not given back");
    assert!(dpdk_runtime_dirs().is_empty(), "DPDK runtime files left: {:?}", dpdk_runtime_dirs());
    assert!(!Path::new("/run/pronghorn/lab").join(prefix).exists());
}

/// Writes a config for `iface` with extra EAL args into a temp file.
pub fn config_file(name: &str, iface: &str, eal_args: &[&str]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("pronghorn-test-{name}-{}.toml", std::process::id()));
    let args: Vec<String> = eal_args.iter().map(|a| format!("\"{a}\"")).collect();
    std::fs::write(
        &path,
        format!(
            "[nic]\npmd = \"af_xdp\"\niface = \"{iface}\"\neal_args = [{}]\n\n[ipv4]\naddress = \"10.99.0.1/24\"\n",
            args.join(", ")
        ),
    )
    .unwrap();
    path
}

/// One line on stderr, non-zero exit, and no DPDK runtime files.
pub fn assert_one_clear_line(o: &Output, expect: &str) {
    for entry in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("pronghorn-test-") && name.ends_with(&format!("-{}.toml", std::process::id())) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "expected failure, got success: {}", text(o));
    assert_eq!(err.trim_end().lines().count(), 1, "more than one line: {err}");
    assert!(err.contains(expect), "expected {expect:?} in: {err}");
    assert!(dpdk_runtime_dirs().is_empty(), "DPDK runtime files left: {:?}", dpdk_runtime_dirs());
}

pub fn peer_py() -> String {
    format!("{}/../../tests/lab/peer.py", env!("CARGO_MANIFEST_DIR"))
}

/// Runs tests/lab/`script` in side a under `pronghorn run` (with `--config config` when given),
/// its arguments `args`, and reads the checks it prints (a JSON object of name -> bool): it must
/// exit 0 and report `count` checks, every one true. Returns them and its stderr.
pub fn script_checks(
    lab: &Lab,
    config: Option<&Path>,
    script: &str,
    args: &[&str],
    count: usize,
) -> (serde_json::Map<String, serde_json::Value>, String) {
    let script = format!("{}/../../tests/lab/{script}", env!("CARGO_MANIFEST_DIR"));
    let mut cmd = vec![bin(), "run"];
    if let Some(c) = config {
        cmd.extend(["--config", c.to_str().unwrap()]);
    }
    cmd.extend(["--", "python3", &script]);
    cmd.extend(args);
    let o = lab.exec("a", &cmd).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let seen: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert_eq!(seen.len(), count, "{seen:?}");
    assert!(seen.values().all(|v| v == &serde_json::Value::Bool(true)), "{seen:?}");
    (seen, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A directory `pronghorn-<name>-<pid>` holding side a's config with `[runtime] share =
/// "family"` (issue 24): the directory (the caller removes it) and the config's path.
pub fn family_config(lab: &Lab, name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("pronghorn-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = std::fs::read_to_string(lab.config_a()).unwrap();
    let cfg_path = dir.join("family.toml");
    std::fs::write(&cfg_path, cfg + "\n[runtime]\nshare = \"family\"\n").unwrap();
    (dir, cfg_path)
}

/// The kernel in side b as a client of `pronghorn echo`: `bytes` each way per connection, every
/// connection's sent and received sha256 identical.
pub fn kernel_client(lab: &Lab, host: &str, bytes: u64, conns: usize) {
    let o = lab
        .exec(
            "b",
            &["python3", &peer_py(), "tcp-echo-client", host, "7", &bytes.to_string(), "--conns", &conns.to_string()],
        )
        .output()
        .unwrap();
    assert_echoed(&o, host, bytes, conns);
}

/// peer.py tcp-echo-client's report: `conns` connections, each echoed `bytes` identical.
pub fn assert_echoed(o: &Output, host: &str, bytes: u64, conns: usize) {
    let out = text(o);
    assert!(o.status.success(), "echo client to {host} failed: {out}");
    let json = String::from_utf8_lossy(&o.stdout);
    let conns_seen = json.matches("\"sent\": ").count();
    assert_eq!(conns_seen, conns, "{json}");
    assert_eq!(json.matches(&format!("\"sent\": {bytes}, \"received\": {bytes},")).count(), conns, "{json}");
    for c in json.split("}, {") {
        let hash = |key: &str| c.split(key).nth(1).map(|r| r[4..68].to_string());
        assert_eq!(hash("\"sent_sha256\""), hash("\"received_sha256\""), "echo differs over {host}: {c}");
        assert!(c.contains("\"error\": []"), "{c}");
    }
}

/// `pronghorn echo --connect` in `side` (a or a node) against an echo server.
pub fn pronghorn_client(lab: &Lab, side: &str, server: &str, bytes: u64, conns: usize, fault: Option<&str>) {
    let mut args = vec![bin(), "echo", "--connect", server];
    let (b, c) = (bytes.to_string(), conns.to_string());
    args.extend_from_slice(&["--bytes", &b, "--conns", &c]);
    if let Some(f) = fault {
        args.extend_from_slice(&["--fault", f]);
    }
    let o = lab.exec(side, &args).output().unwrap();
    let out = text(&o);
    assert!(o.status.success(), "pronghorn client to {server} failed: {out}");
    assert_eq!(out.matches(&format!("{bytes} bytes echoed back identical")).count(), conns, "{out}");
}

/// A kernel echo server in side b, killed when dropped.
pub struct KernelServer(pub Child);

impl KernelServer {
    pub fn start(lab: &Lab, port: u16) -> KernelServer {
        let mut child = lab
            .exec("b", &["python3", &peer_py(), "tcp-echo-server", &port.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        KernelServer(child)
    }
}

impl Drop for KernelServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The accelerated processes as `pronghorn ps --json` lists them.
pub fn ps_json() -> Vec<serde_json::Value> {
    let o = pronghorn(&["ps", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The pid of the accelerated process whose command contains `command`, on interface `iface`
/// (as `pronghorn ps` lists it).
pub fn accelerated_pid(command: &str, iface: &str) -> String {
    let procs = ps_json();
    let me = procs
        .iter()
        .find(|p| p["command"].as_str().unwrap_or("").contains(command) && p["interface"] == iface)
        .unwrap_or_else(|| panic!("ps does not list the {command} on {iface}: {procs:?}"));
    me["pid"].as_u64().unwrap().to_string()
}

/// `pronghorn run -- redis-server` in side a, killed when dropped.
pub struct Redis {
    pub child: Child,
}

impl Redis {
    pub fn start(lab: &Lab, dir: &Path, extra: &[&str]) -> Redis {
        Redis::start_with(lab, dir, &[], extra)
    }

    /// With `run_options` (`--profile NAME`) before the command.
    pub fn start_with(lab: &Lab, dir: &Path, run_options: &[&str], extra: &[&str]) -> Redis {
        let mut args = vec![bin(), "run"];
        args.extend_from_slice(run_options);
        args.extend_from_slice(&["--", "redis-server", "--bind", "10.99.0.1", "--port", "6379"]);
        args.extend_from_slice(&["--save", "", "--protected-mode", "no", "--daemonize", "no"]);
        args.extend_from_slice(&["--dir", dir.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let mut child =
            lab.exec("a", &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn redis-server");
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let n = reader.read_line(&mut line).unwrap();
            assert!(n > 0, "redis-server ended before it was ready");
            if line.contains("Ready to accept connections") {
                break;
            }
        }
        // Keep draining its log so that it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while reader.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        Redis { child }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn redis_cli(lab: &Lab, args: &[&str]) -> String {
    let mut full = vec!["redis-cli", "-h", "10.99.0.1"];
    full.extend_from_slice(args);
    let o = lab.exec("b", &full).output().unwrap();
    assert!(o.status.success(), "redis-cli {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn redis_benchmark(lab: &Lab, args: &[&str], tests: &[&str]) {
    let mut full = vec!["redis-benchmark", "-h", "10.99.0.1", "-q", "-d", "3"];
    full.extend_from_slice(args);
    let o = lab.exec("b", &full).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).replace('\r', "\n");
    assert!(o.status.success(), "redis-benchmark {args:?} failed: {}", text(&o));
    for t in tests {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{t}: ")) && l.contains("requests per second")),
            "redis-benchmark {args:?}: no result for {t}: {out}"
        );
    }
    assert!(!out.to_lowercase().contains("error"), "{out}");
}

pub const MARIADB_TOOLS: &[(&str, &str)] = &[
    ("mariadbd", "mariadb-server"),
    ("mariadb-install-db", "mariadb-server"),
    ("mariadb", "mariadb-client"),
    ("sysbench", "sysbench"),
];

/// mariadbd in side a as Debian's package starts it (as root, becoming mysql through
/// --user=mysql), on a fresh datadir of its own, bound to `addr`; under `pronghorn run` where
/// `accelerated`. Its init file makes the passwordless user `bench`@`%` and the database sbtest.
pub struct Mariadb {
    pub child: Child,
    pub addr: &'static str,
}

impl Mariadb {
    pub fn start(lab: &Lab, dir: &Path, addr: &'static str, accelerated: bool, extra: &[&str]) -> Mariadb {
        let home = dir.join(if accelerated { "pronghorn" } else { "kernel" });
        let h = home.to_str().unwrap();
        let run = |cmd: &[&str]| {
            let o = Command::new(cmd[0]).args(&cmd[1..]).output().unwrap();
            assert!(o.status.success(), "{cmd:?}: {}", text(&o));
        };
        run(&["install", "-d", "-o", "mysql", "-g", "mysql", h]);
        let datadir = format!("--datadir={h}/data");
        run(&["mariadb-install-db", "--no-defaults", "--user=mysql", &datadir, "--skip-test-db"]);
        let init = dir.join("init.sql");
        std::fs::write(
            &init,
            "CREATE USER IF NOT EXISTS 'bench'@'%';\nGRANT ALL ON *.* TO 'bench'@'%';\n\
             CREATE DATABASE IF NOT EXISTS sbtest;\n",
        )
        .unwrap();
        let (socket, pid, bind) =
            (format!("--socket={h}/sock"), format!("--pid-file={h}/pid"), format!("--bind-address={addr}"));
        let init_file = format!("--init-file={}", init.display());
        let mut args = if accelerated { vec![bin(), "run", "--"] } else { vec![] };
        args.extend_from_slice(&["mariadbd", "--no-defaults", "--user=mysql", &datadir, &socket, &pid, &bind]);
        args.extend_from_slice(&["--port=3306", "--skip-log-bin", "--skip-name-resolve", "--max-connections=300"]);
        args.extend_from_slice(&["--innodb-buffer-pool-size=128M", &init_file]);
        args.extend_from_slice(extra);
        let mut child = lab.exec("a", &args).stderr(Stdio::piped()).spawn().expect("spawn mariadbd");
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            let n = log.read_line(&mut line).unwrap();
            assert!(n > 0, "mariadbd on {addr} ended before it was ready: {seen}");
            seen += &line;
            if line.contains("ready for connections") {
                break;
            }
        }
        // Keep draining its log so that it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while log.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        Mariadb { child, addr }
    }

    /// One statement through the mariadb client in side b; its rows, tab-separated.
    pub fn sql(&self, lab: &Lab, sql: &str) -> String {
        let o = lab.exec("b", &["mariadb", "-h", self.addr, "-u", "bench", "-N", "-B", "-e", sql]).output().unwrap();
        assert!(o.status.success(), "{sql} on {}: {}", self.addr, text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// sysbench from side b against this server, over the lab's sbtest tables; its output.
    pub fn sysbench(&self, lab: &Lab, args: &[&str]) -> String {
        let host = format!("--mysql-host={}", self.addr);
        let mut cmd = vec!["sysbench", "--db-driver=mysql", &host, "--mysql-user=bench", "--mysql-db=sbtest"];
        cmd.extend_from_slice(&["--tables=4", "--table-size=10000", "--mysql-ignore-errors=1213"]);
        cmd.extend_from_slice(args);
        let o = lab.exec("b", &cmd).output().unwrap();
        let t = text(&o);
        assert!(o.status.success() && !t.contains("FATAL"), "sysbench {args:?} on {}: {t}", self.addr);
        t
    }

    /// SIGTERM: mariadbd shuts down cleanly, and nothing is left behind: having dropped root it
    /// cannot remove its DPDK directory itself, `pronghorn reap` does (waited for, bounded).
    pub fn stop(mut self) {
        let pid = self.child.id();
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "mariadbd on {} exited with {status:?}", self.addr);
        let dir = format!("pronghorn-{pid}");
        let gone = (0..500).any(|_| {
            let gone = !dpdk_runtime_dirs().contains(&dir);
            if !gone {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            gone
        });
        assert!(gone, "/var/run/dpdk/{dir} is left after mariadbd exited");
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A value of `len` characters that depends only on its arguments (a quote included, doubled).
pub fn value(table: u32, id: u32, salt: u32, len: usize) -> String {
    let mut x = (u64::from(table) << 40) ^ (u64::from(id) << 8) ^ u64::from(salt);
    let mut out = String::from("it''s-");
    while out.len() < len {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out += &format!("{:016x}", z ^ (z >> 31));
    }
    out.truncate(len);
    out
}

/// The statements of connection `conn` of `conns`, and the rows it adds to each table minus those
/// it removes. Each connection owns the ids with id % conns == conn, in every table: it rewrites
/// all of them (so whatever was there before does not matter), then updates, deletes and inserts
/// among them. The shares are disjoint, so the end state does not depend on how the connections
/// interleave: it is the same on any correct server.
pub fn deterministic_sql(conn: u32, conns: u32, tables: u32, size: u32) -> (String, i64) {
    let mut sql = String::new();
    let mut delta = 0i64;
    for t in 1..=tables {
        let ids: Vec<u32> = (1..=size).filter(|id| id % conns == conn).collect();
        for chunk in ids.chunks(100) {
            let rows: Vec<String> = chunk
                .iter()
                .map(|&id| format!("({id},{},'{}','{}')", id * 7 % size + 1, value(t, id, 1, 119), value(t, id, 2, 59)))
                .collect();
            sql += &format!("BEGIN;\nREPLACE INTO sbtest{t} (id, k, c, pad) VALUES {};\nCOMMIT;\n", rows.join(","));
        }
        for &id in &ids {
            if id % 7 == 0 {
                sql += &format!(
                    "UPDATE sbtest{t} SET k = k + {}, c = '{}' WHERE id = {id};\n",
                    id % 13,
                    value(t, id, 3, 100)
                );
            }
            if id % 11 == 0 {
                sql += &format!("DELETE FROM sbtest{t} WHERE id = {id};\n");
                delta -= 1;
            }
            if id % 10 == 0 {
                let new = size + id;
                sql += &format!(
                    "INSERT INTO sbtest{t} (id, k, c, pad) VALUES ({new}, {}, '{}', '{}');\n",
                    id % 97,
                    value(t, new, 1, 119),
                    value(t, new, 2, 59)
                );
                delta += 1;
            }
        }
    }
    (sql, delta)
}

/// A program under `pronghorn run` in side a, killed when dropped.
pub struct Accelerated(pub Child);

impl Drop for Accelerated {
    /// Kills the process and, while it still runs, the processes it forked (a postmaster's
    /// backends, nginx's workers): a test that fails must not leave them behind, holding
    /// hugepages, ports and shared memory that the next tests need. Waits until they are gone.
    fn drop(&mut self) {
        let running = matches!(self.0.try_wait(), Ok(None));
        let tree = if running { descendants(self.0.id() as i32) } else { Vec::new() };
        let _ = self.0.kill();
        for &pid in &tree {
            // SAFETY: kill takes integers; `pid` was found a descendant of our running child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = self.0.wait();
        for pid in tree {
            wait_gone(pid);
        }
    }
}

/// Every process descended from `root` (from /proc: each process's parent).
fn descendants(root: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) state ppid ...": the fields after the last ')'.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parents.iter().filter(|&&(_, pp)| pp == parent).map(|&(p, _)| p));
        i += 1;
    }
    found.remove(0);
    found
}

/// Waits (at most 10 s) until process `pid`, not our child, has exited.
fn wait_gone(pid: i32) {
    // SAFETY: pidfd_open takes integers; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if fd < 0 {
        return;
    }
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd; then closes the pidfd opened above.
    unsafe {
        libc::poll(&mut p, 1, 10_000);
        libc::close(fd);
    }
}

/// A directory `<name>-<pid>` for one nginx worker on 10.99.0.1:8080 (`master_process` on or
/// off, sendfile on): `nginx.conf`, `www/index.html` with `index`, and `www/big.bin`, `big`
/// pseudo-random bytes, which it returns with the directory.
pub fn nginx_site(name: &str, master_process: &str, big: usize, index: &str) -> (PathBuf, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let mut bytes = vec![0u8; big];
    stack::echo::Stream::new(42).fill(&mut bytes);
    std::fs::write(www.join("big.bin"), &bytes).unwrap();
    std::fs::write(www.join("index.html"), index).unwrap();
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off; master_process {master_process}; worker_processes 1; user root;\n\
             error_log {d}/error.log; pid {d}/nginx.pid;\n\
             events {{ worker_connections 1024; }}\n\
             http {{ access_log off; sendfile on; client_body_temp_path {d}; proxy_temp_path {d};\n\
             fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
             server {{ listen 10.99.0.1:8080; root {d}/www; }} }}\n"
        ),
    )
    .unwrap();
    (dir, bytes)
}

/// Runs `cmd` in side b until it succeeds (for at most a minute: a server that never came up
/// fails the test then, where 500 tries of a client that waits for ARP took 25 minutes).
pub fn until_ok(lab: &Lab, cmd: &[&str]) -> Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let o = lab.exec("b", cmd).output().unwrap();
        if o.status.success() {
            return o;
        }
        assert!(std::time::Instant::now() < deadline, "{cmd:?} never succeeded: {}", text(&o));
        // The poll interval of `eventually`.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Two namespaces joined by a plain veth pair, both ends on the kernel with the lab's addresses:
/// the baseline the compatibility suite compares pronghorn with.
pub struct KernelPair {
    pub a: String,
    pub b: String,
}

impl KernelPair {
    pub fn up(prefix: &str) -> KernelPair {
        let prefix = lab_prefix(prefix);
        let (a, b) = (format!("{prefix}-a"), format!("{prefix}-b"));
        let (va, vb) = (format!("{prefix}-a0"), format!("{prefix}-b0"));
        let pair = KernelPair { a: a.clone(), b: b.clone() };
        let run = |args: &[&str]| {
            let o = Command::new("ip").args(args).output().unwrap();
            assert!(o.status.success(), "ip {args:?}: {}", text(&o));
        };
        run(&["netns", "add", &a]);
        run(&["netns", "add", &b]);
        run(&["link", "add", &va, "type", "veth", "peer", "name", &vb]);
        run(&["link", "set", &va, "netns", &a]);
        run(&["link", "set", &vb, "netns", &b]);
        for (ns, dev, v4, v6) in [(&a, &va, "10.99.0.1/24", "fd99::1/64"), (&b, &vb, "10.99.0.2/24", "fd99::2/64")] {
            run(&["-n", ns, "addr", "add", v4, "dev", dev]);
            run(&["-n", ns, "addr", "add", v6, "dev", dev, "nodad"]);
            run(&["-n", ns, "link", "set", dev, "up"]);
            run(&["-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }

    pub fn exec(&self, side: &str, cmd: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", if side == "a" { &self.a } else { &self.b }]).args(cmd);
        c
    }
}

impl Drop for KernelPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

pub fn compat_py() -> String {
    format!("{}/../../tests/lab/compat.py", env!("CARGO_MANIFEST_DIR"))
}

/// Starts a peer (compat.py's, wire.py's listener) from `cmd` and waits for its ready line.
pub fn compat_peer(mut cmd: Command) -> Accelerated {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    Accelerated(child)
}

/// Debian's python3, which python3-scapy is for (a python3 earlier on PATH may lack it).
pub const DEBIAN_PYTHON: &str = "/usr/bin/python3";

/// Whether Debian's python has scapy (side b crafts segments with it); says "skipped" if not.
pub fn have_scapy(test: &str) -> bool {
    let scapy = Command::new(DEBIAN_PYTHON).args(["-c", "import scapy.all"]).output();
    let ok = scapy.is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("{test}: skipped (scapy is not installed: Debian's python3-scapy; scripts/setup.sh installs it)");
    }
    ok
}

pub fn wire_py() -> String {
    format!("{}/../../tests/lab/wire.py", env!("CARGO_MANIFEST_DIR"))
}

/// nginx with its master and worker processes, as Debian ships it, stopped (workers first) when
/// the test ends, pass or fail.
pub struct NginxMaster {
    pub child: Child,
    pub pid_file: PathBuf,
}

impl NginxMaster {
    pub fn pid(&self) -> u32 {
        std::fs::read_to_string(&self.pid_file).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(self.child.id())
    }

    /// The master's worker processes (not its other children: pronghorn's cleanup helper,
    /// forked by a master that opened the NIC, or a new binary's master).
    pub fn workers(&self) -> Vec<u32> {
        let o = Command::new("pgrep").args(["-P", &self.pid().to_string()]).output().unwrap();
        let worker = |p: &u32| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"nginx: worker process"))
        };
        let mut pids: Vec<u32> =
            String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.parse().ok()).filter(worker).collect();
        pids.sort();
        pids
    }

    pub fn signal(&self, sig: &str, pid: u32) {
        assert!(Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success());
    }
}

impl Drop for NginxMaster {
    fn drop(&mut self) {
        // The master first (it would start new workers), then its workers.
        let (master, workers) = (self.pid(), self.workers());
        for p in std::iter::once(master).chain(workers) {
            // The master may be gone already (its pid file left behind).
            let _ = Command::new("kill").args(["-KILL", &p.to_string()]).stderr(Stdio::null()).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A redis-server (or redis-sentinel) under `pronghorn run` on a node of a `--nodes` lab, or on
/// the kernel in side b; killed with SIGKILL when dropped.
pub struct RedisNode {
    pub child: Child,
    pub host: String,
    pub port: u16,
}

impl RedisNode {
    /// `redis-server` with `args` after its address, port and the test defaults.
    pub fn start(lab: &Lab, side: &str, host: &str, port: u16, dir: &Path, args: &[&str]) -> RedisNode {
        std::fs::create_dir_all(dir).unwrap();
        let port_s = port.to_string();
        let mut cmd: Vec<&str> = if side == "b" { vec![] } else { vec![bin(), "run", "--"] };
        cmd.extend_from_slice(&["redis-server", "--bind", host, "--port", &port_s, "--dir", dir.to_str().unwrap()]);
        cmd.extend_from_slice(&["--save", "", "--appendonly", "no", "--protected-mode", "no"]);
        cmd.extend_from_slice(args);
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = lab.exec(side, &cmd).stdout(log.try_clone().unwrap()).stderr(log).spawn().unwrap();
        RedisNode { child, host: host.to_string(), port }.answering(lab, &dir.join("log"))
    }

    /// Waits (bounded) until it answers PING; fails with its log if it exits first.
    pub fn answering(mut self, lab: &Lab, log: &Path) -> RedisNode {
        eventually(&format!("{}:{} answers", self.host, self.port), || {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "{}:{} exited ({status}): {}",
                    self.host,
                    self.port,
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            self.cli(lab, &["ping"]).trim() == "PONG"
        });
        self
    }

    /// A sentinel (`redis-server CONFIG --sentinel`) under `pronghorn run` on node `side`.
    pub fn sentinel(lab: &Lab, side: &str, host: &str, port: u16, conf: &Path) -> RedisNode {
        let log = std::fs::File::create(conf.with_extension("log")).unwrap();
        let child = lab
            .exec(side, &[bin(), "run", "--", "redis-server", conf.to_str().unwrap(), "--sentinel"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        RedisNode { child, host: host.to_string(), port }.answering(lab, &conf.with_extension("log"))
    }

    /// redis-cli from side b against this server.
    pub fn cli(&self, lab: &Lab, args: &[&str]) -> String {
        let port = self.port.to_string();
        let mut cmd = vec!["redis-cli", "-h", &self.host, "-p", &port];
        cmd.extend_from_slice(args);
        let o = lab.exec("b", &cmd).output().unwrap();
        String::from_utf8_lossy(&o.stdout).replace('\r', "")
    }

    /// One field of INFO.
    pub fn info(&self, lab: &Lab, field: &str) -> String {
        let text = self.cli(lab, &["info"]);
        text.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).unwrap_or("").to_string()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.kill();
    }
}

pub const REDIS_TOOLS: &[(&str, &str)] =
    &[("redis-server", "redis-server"), ("redis-cli", "redis-tools"), ("redis-benchmark", "redis-tools")];

pub fn redis_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pronghorn-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The counter `name` of shard `k` in the exit statistics (PRONGHORN_EXIT_STATS) on `stderr`.
pub fn exit_stat(stderr: &str, k: usize, name: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains(&format!(" shard {k} at exit: ShardStats {{")))
        .unwrap_or_else(|| panic!("no exit statistics of shard {k}: {stderr}"));
    let at = line.find(&format!("{name}: ")).unwrap_or_else(|| panic!("no {name}: {line}")) + name.len() + 2;
    line[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// `pronghorn ARGS` as user `nobody` (setpriv), to show what another user may not see.
pub fn pronghorn_as_nobody(args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()])
        .args(args)
        .output()
        .unwrap()
}

/// The pid and `pronghorn stat --json` of the accelerated process on interface `iface`.
pub fn stat_of_process_on(iface: &str) -> (i32, serde_json::Value) {
    let o = pronghorn(&["ps", "--json"]);
    let pid = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|p| p["interface"] == iface)
        .and_then(|p| p["pid"].as_i64())
        .unwrap_or_else(|| panic!("ps does not list the server on {iface}: {}", text(&o)));
    let o = pronghorn(&["stat", &pid.to_string(), "--json"]);
    let stat = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    (pid as i32, stat)
}

/// Side a's DPDK veth shared with the kernel (issue 23): kernel addresses 10.99.0.1/24 and
/// fd99::1/64 on it, and a config beside the lab's that shares it (`nic.share`, addresses
/// "auto"). Returns the interface and that config.
pub fn share_side_a(lab: &Lab) -> (String, PathBuf) {
    let (ns, iface) = (format!("{}-a", lab.prefix), format!("{}-a0", lab.prefix));
    let ip = |args: &[&str]| {
        let o = Command::new("ip").args(["-n", &ns]).args(args).output().unwrap();
        assert!(o.status.success(), "ip {args:?}: {}", text(&o));
    };
    let o = Command::new("ip")
        .args(["netns", "exec", &ns, "sysctl", "-qw", &format!("net.ipv6.conf.{iface}.disable_ipv6=0")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    ip(&["addr", "add", "10.99.0.1/24", "dev", &iface]);
    ip(&["addr", "add", "fd99::1/64", "dev", &iface, "nodad"]);
    let shared = lab.config_a().with_file_name("shared.toml");
    std::fs::write(
        &shared,
        format!("[nic]\npmd = \"af_xdp\"\niface = \"{iface}\"\nshare = true\n[ipv4]\naddress = \"auto\"\n[ipv6]\naddress = \"auto\"\n"),
    )
    .unwrap();
    (iface, shared)
}

/// redis-server under pronghorn in side a with `config`, bound to `bind`, its dir `dir`, once
/// it says it is ready (its output read on after that, so that it never blocks on it).
pub fn shared_redis(lab: &Lab, config: &str, bind: &[&str], dir: &Path) -> Accelerated {
    let mut redis = Accelerated(
        lab.exec("a", &[&[bin(), "run", "--config", config, "--", "redis-server", "--bind"][..], bind].concat())
            .args(["--port", "6379", "--save", "", "--protected-mode", "no", "--dir", dir.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut reader = BufReader::new(redis.0.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "redis-server ended before it was ready");
        if line.contains("Ready to accept connections") {
            break;
        }
    }
    std::thread::spawn(move || while reader.read_line(&mut String::new()).is_ok_and(|n| n > 0) {});
    redis
}

/// wrk from side b against `url` (20 connections, one thread, for `secs`), running while the
/// scenario does something to the server.
pub struct WrkUnderway {
    child: Child,
}

/// What wrk counted: its socket errors, and the replies that were not 2xx or 3xx.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WrkErrors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    pub non_2xx: u64,
}

/// wrk's connections per run.
pub const WRK_CONNECTIONS: usize = 20;

impl WrkUnderway {
    pub fn start(lab: &Lab, url: &str, secs: u32, extra: &[&str]) -> WrkUnderway {
        let (c, d) = (WRK_CONNECTIONS.to_string(), format!("{secs}s"));
        let mut cmd = vec!["wrk", "-t1", "-c", &c, "-d", &d];
        cmd.extend_from_slice(extra);
        cmd.push(url);
        let child = lab.exec("b", &cmd).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let underway = WrkUnderway { child };
        // Under load: every connection established (seen from side b's kernel).
        eventually("wrk's connections are up", || {
            let o = lab.exec("b", &["ss", "-Htn", "state", "established", "( dport = :8080 )"]).output().unwrap();
            String::from_utf8_lossy(&o.stdout).lines().count() >= WRK_CONNECTIONS
        });
        underway
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits for the end of the run: its error counts and its whole output.
    pub fn finish(self) -> (WrkErrors, String) {
        let o = self.child.wait_with_output().unwrap();
        let t = text(&o);
        assert!(o.status.success() && t.contains("Requests/sec"), "wrk: {t}");
        (wrk_errors(&t), t)
    }
}

/// Side b's kernel's count of connection attempts that failed (`Tcp: AttemptFails` in
/// /proc/net/snmp: a connect refused by a RST, or timed out): wrk counts a refused non-blocking
/// connect as a write error, as it counts a write to a connection reset before it, so a test
/// that allows resets but no refusal asks the client's kernel.
pub fn attempt_fails(lab: &Lab) -> u64 {
    let o = lab.exec("b", &["cat", "/proc/net/snmp"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let tcp: Vec<Vec<&str>> =
        text.lines().filter(|l| l.starts_with("Tcp:")).map(|l| l.split_whitespace().collect()).collect();
    let [names, values] = tcp.as_slice() else { panic!("no Tcp lines in /proc/net/snmp: {text}") };
    let i = names.iter().position(|&n| n == "AttemptFails").expect("AttemptFails");
    values[i].parse().unwrap()
}

/// The counts in wrk's report ("Socket errors: connect 0, read 20, write 0, timeout 0",
/// "Non-2xx or 3xx responses: 5"); absent lines count 0.
pub fn wrk_errors(report: &str) -> WrkErrors {
    let mut e = WrkErrors::default();
    let number = |s: &str| s.trim().trim_end_matches(',').parse::<u64>().unwrap_or(0);
    for line in report.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Socket errors:") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            for pair in words.chunks(2) {
                let n = pair.get(1).map_or(0, |s| number(s));
                match pair[0] {
                    "connect" => e.connect = n,
                    "read" => e.read = n,
                    "write" => e.write = n,
                    "timeout" => e.timeout = n,
                    _ => {}
                }
            }
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            e.non_2xx = number(rest);
        }
    }
    e
}

/// An nginx config in `dir` (with `www/index.html`): a master and `workers` worker processes
/// running as nobody, serving 10.99.0.1:8080.
pub fn nginx_workers_site(name: &str, workers: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/index.html"), "hello from a worker\n").unwrap();
    // The workers (nobody) read the site.
    assert!(Command::new("chmod").args(["-R", "a+rX"]).arg(&dir).status().unwrap().success());
    std::fs::write(dir.join("nginx.conf"), nginx_workers_conf(&dir, &workers.to_string(), "")).unwrap();
    dir
}

/// `nginx_workers_site` with `daemon on` (nginx acts on USR2 only in a master whose parent is
/// not the process that started it): the site's directory and its config file.
pub fn nginx_daemon_site(name: &str, workers: usize) -> (PathBuf, PathBuf) {
    let dir = nginx_workers_site(name, workers);
    let conf = dir.join("nginx.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&conf, text.replace("daemon off;", "daemon on;")).unwrap();
    (dir, conf)
}

/// The config `nginx_workers_site` writes, with `worker_processes procs` and `listen` after the
/// address (" reuseport").
pub fn nginx_workers_conf(dir: &Path, procs: &str, listen: &str) -> String {
    let d = dir.display();
    format!(
        "daemon off; master_process on; worker_processes {procs}; user nobody nogroup;\n\
         error_log {d}/error.log; pid {d}/nginx.pid;\n\
         events {{ worker_connections 1024; }}\n\
         http {{ access_log off; client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp;\n\
         fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n\
         server {{ listen 10.99.0.1:8080{listen}; root {d}/www; }} }}\n"
    )
}
