//! Listeners handed to a program this process execs: nginx's binary upgrade (USR2: the master
//! forks a child that execs the new binary with the listening fds named in `NGINX`), or any
//! server that execs its successor with its listening sockets inherited.
//!
//! Only listeners not yet on a shard can follow (`Fd::Listening`: bound and listening while the
//! NIC is not open, as in nginx's master under `share` off, whose workers open their own
//! queues): they are an address, a backlog and options, held on an eventfd placeholder that the
//! exec keeps. Before such an exec the new program's environment gets what makes it accelerated
//! (`PRONGHORN_ACCEL_PID` = this pid, which the exec keeps; `LD_PRELOAD`, `PRONGHORN_CONFIG` and
//! `PRONGHORN_EXE` as this process started with them: nginx gives its new binary an
//! environment of its own) and [`ENV_LISTENERS`], which the new program's runtime reads as the
//! library loads, before the program's first call, and turns back into deferred listeners on
//! the same fds. A listener on a shard (the NIC open) cannot follow: `say_listeners_left_behind`.
//!
//! It must not open the NIC or touch a shard.

use std::ffi::CString;
use std::net::SocketAddr;

use nic::Nic;

use super::EXE;
use crate::accel::Accel;
use crate::fdtable::{Entry, Fd, OpenFile, SockOpts};
use crate::real;
use crate::tracked_fds::set_tracked;

/// The listeners handed over: `fd/address/backlog/flags` separated by `;` (flags: the letters
/// of [`FLAGS`] that are set).
pub const ENV_LISTENERS: &str = "PRONGHORN_LISTENERS";

/// One letter per option carried: non-blocking, IPv6 socket, IPV6_V6ONLY, SO_REUSEADDR,
/// SO_REUSEPORT.
const FLAGS: [char; 5] = ['n', '6', 'o', 'a', 'p'];

/// `LD_PRELOAD` and `PRONGHORN_CONFIG` as this process started with them.
static START_ENV: std::sync::OnceLock<[Option<String>; 2]> = std::sync::OnceLock::new();

/// Called when the process-wide runtime is made (with `process::remember_env`).
pub(crate) fn remember() {
    START_ENV.get_or_init(|| [std::env::var("LD_PRELOAD").ok(), std::env::var(config::ENV_VAR).ok()]);
}

/// A deferred listener as the new program gets it.
#[derive(Debug, PartialEq)]
struct Handed {
    fd: i32,
    local: SocketAddr,
    backlog: usize,
    flags: [bool; 5],
}

impl Handed {
    fn encode(&self) -> String {
        let flags: String = FLAGS.iter().zip(self.flags).filter(|(_, on)| *on).map(|(c, _)| *c).collect();
        format!("{}/{}/{}/{flags}", self.fd, self.local, self.backlog)
    }

    fn decode(text: &str) -> Option<Handed> {
        let mut parts = text.split('/');
        let fd = parts.next()?.parse().ok()?;
        let local = parts.next()?.parse().ok()?;
        let backlog = parts.next()?.parse().ok()?;
        let letters = parts.next()?;
        if parts.next().is_some() || letters.chars().any(|c| !FLAGS.contains(&c)) {
            return None;
        }
        Some(Handed { fd, local, backlog, flags: FLAGS.map(|c| letters.contains(c)) })
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// Before an exec the kernel would start: the environment entries (`NAME=value`) that make
    /// the new program accelerated and hand it this process's deferred listeners that it
    /// inherits (not close-on-exec). Empty when there are none, or when the NIC is open (then
    /// no listener can follow).
    pub(crate) fn hand_listeners_over(&self) -> Vec<CString> {
        let handed = self
            .try_with(|rt| {
                if rt.shards.is_open() {
                    return Vec::new();
                }
                rt.fds
                    .listeners()
                    .into_iter()
                    // SAFETY: F_GETFD takes no memory.
                    .filter(|&fd| unsafe { real::fcntl(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC == 0)
                    .filter_map(|fd| {
                        let &Fd::Listening { local, backlog } = rt.fds.kind(fd)? else { return None };
                        let (o, nonblock) = (rt.fds.opts(fd), rt.fds.file(fd)?.nonblock);
                        Some(Handed { fd, local, backlog, flags: [nonblock, o.v6, o.v6only, o.reuseaddr, o.reuseport] })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if handed.is_empty() {
            return Vec::new();
        }
        let list: Vec<String> = handed.iter().map(Handed::encode).collect();
        let [preload, config] = START_ENV.get().cloned().unwrap_or_default();
        let exe = EXE.get().cloned().flatten();
        let vars = [
            (super::ENV_PID, Some(std::process::id().to_string())),
            ("LD_PRELOAD", preload),
            (config::ENV_VAR, config),
            (super::ENV_EXE, exe),
            (ENV_LISTENERS, Some(list.join(";"))),
        ];
        vars.into_iter().filter_map(|(k, v)| CString::new(format!("{k}={}", v?)).ok()).collect()
    }

    /// As the library loads in a program started with [`ENV_LISTENERS`]: each listener named
    /// whose fd is still an eventfd (the placeholder the exec kept) becomes a deferred listener
    /// of this process again. One that is not (closed, or another file on its fd) is left alone
    /// and said on stderr.
    pub(crate) fn adopt_listeners(&self, list: &str) {
        for text in list.split(';').filter(|t| !t.is_empty()) {
            let Some(h) = Handed::decode(text) else {
                say(&format!("pronghorn: {ENV_LISTENERS}: \"{text}\" is not fd/address/backlog/flags; ignored"));
                continue;
            };
            let link = std::fs::read_link(format!("/proc/self/fd/{}", h.fd)).unwrap_or_default();
            if link.as_os_str() != "anon_inode:[eventfd]" {
                say(&format!(
                    "pronghorn: the listener on {} handed over on fd {} is not there (fd {} is {}): it is not served",
                    h.local,
                    h.fd,
                    h.fd,
                    if link.as_os_str().is_empty() { "closed".into() } else { link.display().to_string() }
                ));
                continue;
            }
            let [nonblock, v6, v6only, reuseaddr, reuseport] = h.flags;
            let adopted = self.with(|rt| {
                rt.claim_addr(h.local, reuseport)?;
                let opts = SockOpts { v6, v6only, reuseaddr, reuseport, ..SockOpts::default() };
                rt.release(h.fd);
                rt.fds.open(
                    h.fd,
                    Entry::new(Fd::Listening { local: h.local, backlog: h.backlog }),
                    OpenFile::new(nonblock, opts),
                );
                rt.fds.get_mut(h.fd).unwrap().bound_to = Some(h.local);
                rt.routing.accelerated_listen += 1;
                rt.deferred_listeners += 1;
                Ok::<(), stack::Errno>(())
            });
            match adopted {
                Some(Ok(())) => set_tracked(h.fd, true),
                Some(Err(e)) => say(&format!("pronghorn: the listener on {} handed over on fd {}: {e}", h.local, h.fd)),
                None => {}
            }
        }
    }
}

fn say(line: &str) {
    let msg = format!("{line}\n");
    // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
    unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handed_listener_reads_back_as_written_and_a_malformed_one_does_not() {
        for h in [
            Handed {
                fd: 6,
                local: "10.99.0.1:8080".parse().unwrap(),
                backlog: 511,
                flags: [true, false, false, true, false],
            },
            Handed {
                fd: 7,
                local: "[fd99::1]:443".parse().unwrap(),
                backlog: 4096,
                flags: [false, true, true, false, true],
            },
        ] {
            assert_eq!(Handed::decode(&h.encode()), Some(h));
        }
        assert_eq!(
            Handed::encode(&Handed { fd: 6, local: "10.99.0.1:80".parse().unwrap(), backlog: 5, flags: [true; 5] }),
            "6/10.99.0.1:80/5/n6oap"
        );
        for bad in [
            "",
            "6",
            "6/10.99.0.1:80/5",
            "6/10.99.0.1:80/5/x",
            "6/10.99.0.1/5/",
            "x/10.99.0.1:80/5/",
            "6/10.99.0.1:80/5//",
        ] {
            assert_eq!(Handed::decode(bad), None, "{bad}");
        }
    }
}
