//! pthread_create: a thread started from inside the runtime (DPDK's interrupt thread, started as
//! the NIC opens within a socket call) is the runtime's from its first instruction, so that its
//! own epoll_wait and reads go to the kernel, never through the runtime (`runtime::threads`).
//! Every other thread starts as the program asked, untouched.

use libc::{c_int, c_void};
use runtime::real;

type StartFn = extern "C" fn(*mut c_void) -> *mut c_void;

/// What a runtime thread runs once marked: the start routine and argument it was created with.
struct Start {
    routine: StartFn,
    arg: *mut c_void,
}

extern "C" fn runtime_thread(start: *mut c_void) -> *mut c_void {
    // SAFETY: `start` is the Box that pthread_create below leaked for this thread alone.
    let start = unsafe { Box::from_raw(start.cast::<Start>()) };
    runtime::runtime_thread_starts();
    (start.routine)(start.arg)
}

#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartFn,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: pthread_create(3)'s contract, the caller's; the boxed start goes to the new thread,
    // or back here when none was made.
    unsafe {
        if !runtime::starting_runtime_thread() {
            return real::pthread_create(thread, attr, routine, arg);
        }
        let start = Box::into_raw(Box::new(Start { routine, arg }));
        let rc = real::pthread_create(thread, attr, runtime_thread, start.cast());
        if rc != 0 {
            drop(Box::from_raw(start));
        }
        rc
    }
}

#[cfg(test)]
mod tests {
    /// The test harness's threads start through the hook above (this crate's `pthread_create`
    /// is the one the test binary links).
    #[test]
    fn a_thread_started_inside_the_runtime_is_the_runtimes_and_others_are_not() {
        let plain = std::thread::spawn(runtime::starting_runtime_thread).join().unwrap();
        assert!(!plain, "a thread the program starts is the program's");
        let started_inside = std::thread::spawn(|| {
            runtime::runtime_thread_starts();
            std::thread::spawn(runtime::starting_runtime_thread).join().unwrap()
        })
        .join()
        .unwrap();
        assert!(started_inside, "a thread started from inside the runtime is inside from its start");
    }
}
