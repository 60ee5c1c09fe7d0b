//! The `pronghorn` command as a Unix tool: what a shell pipeline expects of it. No root needed.

use std::process::{Command, Stdio};

/// `pronghorn lab status | head -0`: the reader is gone before pronghorn writes. Like any Unix
/// tool it ends quietly (killed by SIGPIPE), without a panic message.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    unsafe { libc::close(fds[0]) };
    let stdout = unsafe { <Stdio as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    let o = Command::new(env!("CARGO_BIN_EXE_pronghorn"))
        .args(["lab", "status", "--prefix", "nosuchlab"])
        .stdout(stdout)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{:?} {err}", o.status);
}

/// `pronghorn config check`: a good file is described, a typo is named with its line and what
/// the section accepts (exit 1), before anything starts.
#[test]
fn config_check_names_the_bad_key_and_its_line() {
    let dir = std::env::temp_dir().join(format!("pronghorn-config-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.toml");
    let check = |text: &str| {
        std::fs::write(&file, text).unwrap();
        Command::new(env!("CARGO_BIN_EXE_pronghorn")).args(["config", "check"]).arg(&file).output().unwrap()
    };
    let good = "[nic]\npmd = \"af_xdp\"\niface = \"x0\"\nqueues = 2\n[ipv4]\naddress = \"10.0.0.1/24\"\n";
    let o = check(good);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success()
            && out.contains("ok: nic af_xdp on x0 (2 queues")
            && out.contains("10.0.0.1/24")
            && out.contains("tcp congestion cubic"),
        "{out}"
    );
    let o = check(&format!("{good}[tcp]\ncongestion = \"newreno\"\n"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("tcp congestion newreno"), "{out}");
    let o = check(&good.replace("queues", "queus"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("line 4") && err.contains("queus") && err.contains("`queues`"), "{err}");
    let o = check(&format!("{good}[tcp]\ncongestion = \"bbr\"\n"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("line 8") && err.contains("tcp.congestion must be \"cubic\" or \"newreno\""), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pid is written as the kernel writes it: `+123` and `0123` are refused, naming the argument.
#[test]
fn pid_arguments_are_parsed_strictly() {
    for (cmd, bad) in [("stat", "+123"), ("stat", "0123"), ("conns", "0"), ("lat", "12a"), ("stat", "99999999999")] {
        let o = Command::new(env!("CARGO_BIN_EXE_pronghorn")).args([cmd, bad]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd} {bad}: {err}");
        assert!(err.contains(bad) && err.contains("not a process id"), "{cmd} {bad}: {err}");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_pronghorn"))
        .args(["pcap", "--pid", "+1", "-w", "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The run directory is shared (/dev/shm): another user may put a symbolic link or a FIFO where
/// a region or a control socket would be. `ps` and `stat` (run by root) neither follow the link
/// nor wait on the FIFO.
#[test]
fn ps_and_stat_ignore_links_and_fifos_in_the_run_directory() {
    use runtime::observe::region::{control_path, stats_path, Region};
    let dir = std::env::temp_dir().join(format!("pronghorn-run-dir-kinds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pronghorn = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_pronghorn")).args(args).env("PRONGHORN_RUN_DIR", &dir).output().unwrap()
    };
    // A live region (this test's own process) under another name, and a link to it.
    let real = stats_path(&dir, 1_000_001);
    let region = Region::create(&real).unwrap();
    std::os::unix::fs::symlink(&real, stats_path(&dir, 1_000_002)).unwrap();
    std::os::unix::fs::symlink("/nonexistent.sock", control_path(&dir, 1_000_001)).unwrap();
    let o = pronghorn(&["ps", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("1000001") && !out.contains("1000002"), "{out}");
    let o = pronghorn(&["stat", "1000002"]);
    assert_eq!(o.status.code(), Some(1), "a linked region was read: {}", String::from_utf8_lossy(&o.stdout));
    let o = pronghorn(&["conns", "1000001"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is not a socket"), "{err}");
    // A FIFO nobody writes to: opening it for reading would block for ever.
    let fifo = std::ffi::CString::new(stats_path(&dir, 1_000_003).into_os_string().into_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let o = pronghorn(&["ps", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("1000001") && !out.contains("1000003"), "{out}");
    let o = pronghorn(&["stat", "1000003"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    region.remove();
    let _ = std::fs::remove_dir_all(&dir);
}
