//! SIGINT and SIGTERM, blocked in every thread and waited for with
//! `sigwait` on one, so that no handler runs in the middle of anything:
//! `fastpath engine` waits for them to stop serving, `fastpath demo
//! --netns` to remove its network namespaces before it exits.

use std::ffi::c_int;
use std::io;

/// Blocks SIGINT and SIGTERM in this thread (and the threads it
/// starts from now on); the set to wait on.
pub fn block_termination() -> io::Result<libc::sigset_t> {
    // SAFETY: `sigset_t` is plain data; sigemptyset initialises it
    // before use, sigaddset adds valid signal numbers.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    };
    // SAFETY: `set` is initialised; the old mask is not asked for.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(set)
}

/// Waits for one of the signals in `set`; which one.
pub fn wait(set: &libc::sigset_t) -> io::Result<c_int> {
    let mut sig: c_int = 0;
    // SAFETY: `set` is initialised and `sig` is writable.
    let r = unsafe { libc::sigwait(set, &mut sig) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(sig)
}

/// The signal's name.
pub fn name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}
