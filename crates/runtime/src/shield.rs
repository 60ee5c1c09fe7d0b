//! The last resort against a bug in pronghorn: a panic inside the runtime (or the stack below
//! it) while it serves one of the application's calls must not take the application down.
//! Every call `preload`'s hooks make into the runtime goes through [`guard`] (the entry
//! functions of lib.rs), and so do the exit handler and each pass of a stack thread: a panic
//! there is caught, counted (`panics_caught` in `pronghorn stat`), described once on stderr
//! (the first time only, never per call), and the call fails as a device error would: EIO, or
//! the entry's own failure value.
//!
//! Nothing a packet can reach should panic (the stack counts such input as drops); this is for
//! the bug that slipped through. The shard may be left half-way through a change; the process
//! keeps serving what it can, where an abort would have lost every connection at once. The
//! runtime's lock ignores poisoning, and `Accel::with` restores its `INSIDE` flag on unwind.
//!
//! A panic that unwinds into an `extern "C"` hook aborts the process, so this only works when
//! the library unwinds: a build with `panic = "abort"` is refused below.

use std::cell::{Cell, RefCell};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

#[cfg(panic = "abort")]
compile_error!("the runtime catches panics at its entry points (shield.rs): build with panic = \"unwind\"");

/// Panics caught since the process started.
static CAUGHT: AtomicU64 = AtomicU64::new(0);
static HOOK: Once = Once::new();

thread_local! {
    /// How deep this thread is in [`guard`]: a panic there is reported by `guard`, once.
    static GUARDED: Cell<u32> = const { Cell::new(0) };
    /// What the last panic inside [`guard`] said and where.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`, the work of the runtime entry `call`; if it panics, counts it, says so on stderr
/// the first time, and returns `failed()` instead.
#[inline]
pub fn guard<R>(call: &str, failed: impl FnOnce() -> R, f: impl FnOnce() -> R) -> R {
    HOOK.call_once(install_hook);
    let _ = GUARDED.try_with(|g| g.set(g.get() + 1));
    let r = std::panic::catch_unwind(AssertUnwindSafe(f));
    let _ = GUARDED.try_with(|g| g.set(g.get() - 1));
    match r {
        Ok(r) => r,
        Err(_) => {
            if CAUGHT.fetch_add(1, Ordering::Relaxed) == 0 {
                report(call);
            }
            failed()
        }
    }
}

/// Panics caught so far (`panics_caught`).
pub fn caught() -> u64 {
    CAUGHT.load(Ordering::Relaxed)
}

/// The panic hook: a panic inside [`guard`] is remembered for its report and printed by no one
/// else; any other goes to the hook there was before.
fn install_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if GUARDED.try_with(Cell::get).unwrap_or(0) == 0 {
            return previous(info);
        }
        let payload = info.payload();
        let what = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a panic");
        let said = match info.location() {
            Some(at) => format!("{what} at {}:{}", at.file(), at.line()),
            None => what.to_string(),
        };
        let _ = LAST.try_with(|l| *l.borrow_mut() = Some(said));
    }));
}

/// One line on stderr, written straight to fd 2 (not through our own hooks).
fn report(call: &str) {
    let what = LAST.try_with(|l| l.borrow_mut().take()).ok().flatten().unwrap_or_else(|| "a panic".to_string());
    let line = format!(
        "pronghorn: internal error in {call}: {what}; the call failed with EIO and the process goes on \
         (counted as panics_caught in pronghorn stat; later ones are not shown)\n"
    );
    // SAFETY: a plain write(2) of a buffer we own.
    unsafe { crate::real::write(2, line.as_ptr().cast(), line.len()) };
}
