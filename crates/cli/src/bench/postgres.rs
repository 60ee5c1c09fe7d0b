//! PostgreSQL 15 as Debian starts it: as the postgres user (postgres refuses to run as root),
//! here through setpriv, which hands on the capabilities pronghorn's NIC needs. Shared by
//! `pronghorn bench pgbench` and the lab tests (tests/lab/main.rs includes this file).
//!
//! Owns: PostgreSQL's command lines (datadir creation, the server). Must not: run them.

use std::path::Path;

/// Debian's PostgreSQL 15 server binaries.
pub const BIN: &str = "/usr/lib/postgresql/15/bin";

/// The capabilities a process that is not root needs to open the NIC
/// (`nic::dpdk::NIC_CAPABILITIES`), in setpriv's syntax: `+net_admin,+net_raw,...`.
pub fn setpriv_nic_caps() -> String {
    nic::dpdk::NIC_CAPABILITIES.iter().map(|(_, name)| format!("+{name}")).collect::<Vec<_>>().join(",")
}

/// initdb of a new datadir `data` as the postgres user, every local connection trusted.
pub fn initdb(data: &Path) -> Vec<String> {
    let initdb = format!("{BIN}/initdb");
    let data = data.display().to_string();
    ["runuser", "-u", "postgres", "--", &initdb, "-D", &data, "-A", "trust"].map(String::from).into()
}

/// The pg_hba.conf rule that lets clients from `net` (address/prefix) in without a password.
pub fn trust_host(net: &str) -> String {
    format!("host all all {net} trust\n")
}

/// The postmaster on `data`, as the postgres user with the NIC's capabilities, listening on
/// `addr` with its unix socket in `socket_dir`; `settings` are more `name=value` (`-c`).
pub fn server(data: &Path, addr: &str, socket_dir: &Path, settings: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> =
        ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"].map(String::from).into();
    // Inheritable and ambient: they survive the exec of postgres.
    let caps = setpriv_nic_caps();
    argv.extend([format!("--inh-caps={caps}"), format!("--ambient-caps={caps}")]);
    argv.extend([format!("{BIN}/postgres"), "-D".into(), data.display().to_string()]);
    let listen = format!("listen_addresses={addr}");
    let sockets = format!("unix_socket_directories={}", socket_dir.display());
    for setting in [&listen, &sockets].into_iter().map(String::as_str).chain(settings.iter().copied()) {
        argv.extend(["-c".to_string(), setting.to_string()]);
    }
    argv
}
