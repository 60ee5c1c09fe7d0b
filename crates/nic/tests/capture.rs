//! `capture_stdio` takes what C code writes to fds 1 and 2. Alone in its test binary: the
//! capture takes the whole process's stdout and stderr, so another test's output (or libtest's
//! progress) written meanwhile would be captured as well.

#[test]
fn capture_stdio_catches_c_level_output() {
    // SAFETY: write reads 10 bytes of a 10-byte static buffer.
    let ((), text) = nic::dpdk::capture_stdio(|| unsafe {
        libc::write(2, b"to stderr\n".as_ptr() as *const libc::c_void, 10);
    });
    assert_eq!(text, "to stderr\n");
}
