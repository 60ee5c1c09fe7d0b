//! The keys of a shard's hashes (initial sequence numbers, SYN cookies, ephemeral ports) from
//! the kernel's random source. A key that could not be read is an error, never a key of zeros
//! (which would make every ISN and cookie predictable).

/// Bytes in a shard's key.
pub const SECRET_LEN: usize = 32;

/// A fresh key from getrandom(2).
pub fn random_secret() -> Result<[u8; SECRET_LEN], String> {
    let mut secret = [0u8; SECRET_LEN];
    fill_random(&mut secret, |buf| {
        // SAFETY: the kernel writes at most buf.len() bytes into `buf`.
        let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
        } else {
            Ok(n as usize)
        }
    })?;
    Ok(secret)
}

/// Fills `buf` with `read` (getrandom's contract: the bytes written, or an errno): a call
/// interrupted by a signal is retried, a short read is continued where it stopped, an error or a
/// read of nothing fails.
pub(crate) fn fill_random(buf: &mut [u8], mut read: impl FnMut(&mut [u8]) -> Result<usize, i32>) -> Result<(), String> {
    let mut filled = 0;
    while filled < buf.len() {
        match read(&mut buf[filled..]) {
            Ok(0) => return Err("cannot read random bytes for the stack's keys: getrandom returned none".into()),
            Ok(n) => filled += n.min(buf.len() - filled),
            Err(libc::EINTR) => {}
            Err(e) => {
                return Err(format!(
                    "cannot read random bytes for the stack's keys: getrandom: {}",
                    std::io::Error::from_raw_os_error(e)
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_source_is_an_error_not_a_key_of_zeros() {
        let mut buf = [0u8; SECRET_LEN];
        let err = fill_random(&mut buf, |_| Err(libc::ENOSYS)).unwrap_err();
        assert!(err.contains("getrandom"), "{err}");
    }

    #[test]
    fn a_source_that_gives_nothing_is_an_error() {
        let mut buf = [0u8; SECRET_LEN];
        assert!(fill_random(&mut buf, |_| Ok(0)).is_err());
    }

    #[test]
    fn short_reads_and_interruptions_are_continued_until_the_key_is_full() {
        let mut buf = [0u8; SECRET_LEN];
        let mut calls = 0;
        fill_random(&mut buf, |b| {
            calls += 1;
            if calls % 2 == 0 {
                return Err(libc::EINTR);
            }
            b[0] = calls as u8;
            Ok(1)
        })
        .unwrap();
        assert_eq!(buf[0], 1);
        assert_eq!(buf[SECRET_LEN - 1], (2 * SECRET_LEN - 1) as u8);
        assert_eq!(calls, 2 * SECRET_LEN - 1);
    }

    #[test]
    fn the_kernel_source_gives_a_key() {
        assert_ne!(random_secret().unwrap(), [0u8; SECRET_LEN]);
    }
}
