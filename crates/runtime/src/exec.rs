//! Exec: what the process that drives the NIC does before it becomes another program. A
//! successful exec discards the image that holds the stack, and with it every connection the
//! stack still carries, so those connections are finished first (`Accel::drain_before_exec`,
//! with the exit's drain). A failed exec returns to the program, which then carries on without
//! them: the drain runs only when the kernel would start the program as far as a cheap check
//! can tell ([`Program::would_start`]).

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;

/// The program an exec function is about to run, as its caller named it.
#[derive(Clone, Copy, Debug)]
pub enum Program<'a> {
    /// execve, execv: a path (relative ones from the working directory).
    Path(&'a CStr),
    /// execvp, execvpe: a file looked up in PATH as glibc does (one with a slash is a path).
    Search(&'a CStr),
    /// fexecve: an open file.
    Fd(i32),
    /// execveat: a path from a directory fd, with its AT_EMPTY_PATH and AT_SYMLINK_NOFOLLOW.
    At { dirfd: i32, path: &'a CStr, flags: i32 },
}

impl Program<'_> {
    /// Whether the kernel would start it, as far as a check without side effects can tell: a
    /// regular file the caller may execute (its effective ids, as execve checks them; a noexec
    /// mount fails `faccessat` too). What is not checked, and can still fail the exec after
    /// the drain: the file's format (ENOEXEC: binfmt_misc may run any format, so rejecting
    /// what is not ELF or `#!` would skip the drain for programs that do start), a missing
    /// interpreter or library, E2BIG, ETXTBSY, ENOMEM.
    pub fn would_start(&self) -> bool {
        match *self {
            Program::Path(path) => executable_at(libc::AT_FDCWD, path, 0),
            Program::Search(file) => search_path(file, std::env::var_os("PATH").as_deref()),
            Program::Fd(fd) => executable_at(fd, c"", libc::AT_EMPTY_PATH),
            Program::At { dirfd, path, flags } => executable_at(dirfd, path, flags),
        }
    }
}

/// glibc's PATH when the environment has none (`execvpe`'s default).
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// execvp's lookup (glibc's `__execvpe`): a name with a slash is a path; else each PATH entry
/// in turn, an empty entry meaning the working directory. It starts the first candidate the
/// kernel accepts (it goes on past EACCES and ENOENT), so one executable candidate is enough.
/// An empty name is ENOENT.
pub(crate) fn search_path(file: &CStr, path: Option<&OsStr>) -> bool {
    let name = file.to_bytes();
    if name.is_empty() {
        return false;
    }
    if name.contains(&b'/') {
        return executable_at(libc::AT_FDCWD, file, 0);
    }
    let path = path.map_or(DEFAULT_PATH, |p| p.as_bytes());
    path.split(|&b| b == b':').any(|dir| {
        let mut candidate = dir.to_vec();
        if !dir.is_empty() {
            candidate.push(b'/');
        }
        candidate.extend_from_slice(name);
        CString::new(candidate).is_ok_and(|c| executable_at(libc::AT_FDCWD, &c, 0))
    })
}

/// A regular file that the caller's effective ids may execute (`flags`: AT_EMPTY_PATH,
/// AT_SYMLINK_NOFOLLOW as execveat takes them).
fn executable_at(dirfd: i32, path: &CStr, flags: i32) -> bool {
    let lookup = flags & (libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW);
    // SAFETY: struct stat is integers: all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated CStr that outlives both calls; fstatat writes
    // only into `st`, which outlives it; faccessat takes no other memory.
    unsafe {
        libc::fstatat(dirfd, path.as_ptr(), &mut st, lookup) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFREG
            && libc::faccessat(dirfd, path.as_ptr(), libc::X_OK, libc::AT_EACCESS | lookup) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn only_an_executable_regular_file_would_start() {
        assert!(Program::Path(c"/bin/true").would_start());
        assert!(!Program::Path(c"/etc/passwd").would_start(), "not executable (not even for root)");
        assert!(!Program::Path(c"/bin").would_start(), "a directory");
        assert!(!Program::Path(c"/no/such/program").would_start());
        assert!(!Program::Path(c"").would_start());
        let exe = std::fs::File::open("/bin/true").unwrap();
        let text = std::fs::File::open("/etc/passwd").unwrap();
        assert!(Program::Fd(exe.as_raw_fd()).would_start());
        assert!(!Program::Fd(text.as_raw_fd()).would_start());
        assert!(!Program::Fd(-1).would_start());
        let at = |path, flags| Program::At { dirfd: libc::AT_FDCWD, path, flags }.would_start();
        assert!(at(c"/bin/true", 0));
        assert!(!at(c"/etc/passwd", 0));
        let dir = std::fs::File::open("/bin").unwrap();
        assert!(Program::At { dirfd: dir.as_raw_fd(), path: c"true", flags: 0 }.would_start());
    }

    #[test]
    fn a_search_finds_what_execvp_would_start() {
        let path = |p: &str| Some(OsStr::new(p).to_owned());
        let search = |file, p: &Option<std::ffi::OsString>| search_path(file, p.as_deref());
        assert!(search(c"true", &path("/no/such/dir:/bin")));
        assert!(!search(c"true", &path("/no/such/dir:/etc")));
        assert!(!search(c"passwd", &path("/etc")), "found, not executable");
        assert!(search(c"true", &None), "glibc's default PATH has /bin");
        assert!(search(c"/bin/true", &path("/etc")), "a slash: the path itself");
        assert!(!search(c"", &path("/bin")), "ENOENT");
        assert!(search(c"bin/true", &path("/etc")) == Program::Path(c"bin/true").would_start());
    }
}
