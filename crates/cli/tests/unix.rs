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
