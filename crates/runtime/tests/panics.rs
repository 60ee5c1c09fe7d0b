//! The last resort (`runtime::shield`): a panic inside the runtime while it serves a call fails
//! that call with EIO, is counted (`panics_caught`), is said once on stderr, and leaves the
//! runtime serving. The panic is provoked on the packet path itself: the NIC's far side, which
//! runs whenever the runtime receives, panics while armed (a stand-in for a bug the stack may
//! still have), under a non-blocking accept that polls the NIC inline. The call goes through
//! `runtime::enter`, the entry every hook's call takes.
//!
//! Its own test binary: the counter, the panic hook and fd 2 are the process's.

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use config::Config;
use runtime::{Accel, Call, Errno};
use testkit::mem::{pair, MemConfig};

use common::{NicWithPeer, Peer};

const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// The far side of the NIC: panics when the runtime receives, while armed.
struct Tripwire(Arc<AtomicBool>);

impl Peer for Tripwire {
    fn run(&mut self) {
        if self.0.load(Ordering::Relaxed) {
            panic!("tripwire on the receive path");
        }
    }
}

fn accept(rt: &'static Accel<NicWithPeer<Tripwire>>, fd: i32) -> Call<(i32, SocketAddr)> {
    runtime::enter("accept", || Some(rt), |a| a.accept(fd, 0))
}

/// Runs `f` with fd 2 going into a pipe; returns what was written there.
fn stderr_of(f: impl FnOnce()) -> String {
    let mut p = [0; 2];
    // SAFETY: pipe2 writes two fds into `p`, which holds two.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_NONBLOCK) }, 0);
    // SAFETY: dup and dup2 take no memory; fd 2 is the test process's to redirect.
    let saved = unsafe { libc::dup(2) };
    // SAFETY: as above.
    unsafe { libc::dup2(p[1], 2) };
    f();
    // SAFETY: dup2 and close take no memory; `saved` and p[1] are fds made above, each
    // closed once.
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
        libc::close(p[1]);
    }
    let mut out = vec![0u8; 65536];
    // SAFETY: the kernel writes at most out.len() bytes into `out`.
    let n = unsafe { libc::read(p[0], out.as_mut_ptr().cast(), out.len()) };
    // SAFETY: the pipe's read end, made above and closed once.
    unsafe { libc::close(p[0]) };
    out.truncate(n.max(0) as usize);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_panic_in_a_call_fails_it_with_eio_counted_and_said_once() {
    let toml = format!(
        "[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\n[ipv4]\naddress = \"{OURS}/24\"\n[runtime]\ndrive = \"inline\"\n"
    );
    let cfg = Config::parse(&toml, Path::new("panics.toml")).unwrap();
    let (a, _b) = pair(MemConfig::default());
    let armed = Arc::new(AtomicBool::new(false));
    let rt = Accel::with_nic(cfg, NicWithPeer { mine: a, peer: Tripwire(armed.clone()), rx_fd: None });
    // SAFETY: socket takes no memory.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    rt.socket_created(fd, libc::AF_INET, libc::SOCK_STREAM, 0);
    assert!(matches!(rt.bind(fd, SocketAddr::V4(SocketAddrV4::new(OURS, 7000))), Call::Done(Ok(()))));
    assert!(matches!(rt.listen(fd, 8), Call::Done(Ok(()))));
    rt.set_nonblock(fd, true);
    assert!(matches!(accept(rt, fd), Call::Done(Err(Errno::EAGAIN))), "nothing to accept yet");
    assert_eq!(runtime::shield::caught(), 0);

    armed.store(true, Ordering::Relaxed);
    let said = stderr_of(|| {
        for _ in 0..3 {
            assert!(matches!(accept(rt, fd), Call::Done(Err(Errno(libc::EIO)))));
        }
    });
    assert_eq!(runtime::shield::caught(), 3);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 1, "one line, the first time only: {said:?}");
    assert!(lines[0].starts_with("pronghorn: internal error in accept: tripwire on the receive path at "), "{said:?}");
    assert!(lines[0].contains("EIO") && lines[0].contains("panics_caught"), "{said:?}");

    // The runtime goes on: the thread's calls still reach it (not the kernel), the lock is
    // usable, and the same call answers as before.
    armed.store(false, Ordering::Relaxed);
    assert!(runtime::tracked(fd), "the thread's calls still go to the runtime");
    assert!(matches!(accept(rt, fd), Call::Done(Err(Errno::EAGAIN))));
    assert_eq!(runtime::shield::caught(), 3);
}
