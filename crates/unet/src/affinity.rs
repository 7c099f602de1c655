//! The CPUs a thread may run on (`sched_getaffinity`, `sched_setaffinity`),
//! for measurements whose two threads must each have a core of their own,
//! and a thread's priority ([`lower_priority`]), for the daemon's threads
//! that must leave the engine's the CPU.
//!
//! Left to the scheduler, two threads that hand messages back and forth
//! sometimes share one core: the kernel tends to wake a task on its waker's
//! CPU, and a waiting thread that yields its core ([`crate::wait`]) does
//! not look busy enough to be moved. Every hand-off then waits for the
//! other thread to be scheduled, and the same figure comes out 2-5x slower
//! in some runs than in others. `fastpath demo` and the idl benchmark pin
//! their two threads to two CPUs ([`two_cpus`], [`pin`]).
//!
//! ```
//! if let Some([a, _]) = unet::affinity::two_cpus() {
//!     let old = unet::affinity::pin(a).expect("a CPU this process may use");
//!     // ... this thread runs on CPU `a` only ...
//!     unet::affinity::restore(&old);
//! }
//! ```

use std::mem::size_of;

/// A thread's set of allowed CPUs, as [`pin`] found it.
#[derive(Clone, Copy)]
pub struct Mask(libc::cpu_set_t);

impl std::fmt::Debug for Mask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(cpus_in(&self.0)).finish()
    }
}

/// The calling thread's allowed CPUs.
fn current() -> Option<libc::cpu_set_t> {
    // SAFETY: `cpu_set_t` is plain data for which all zeroes is the empty
    // set; `sched_getaffinity` writes at most `size_of::<cpu_set_t>()`
    // bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) == 0).then_some(set)
    }
}

fn cpus_in(set: &libc::cpu_set_t) -> impl Iterator<Item = usize> + '_ {
    // SAFETY: `CPU_ISSET` reads bit `c` of the set, and `c` is below
    // `CPU_SETSIZE`, the set's size in bits.
    (0..libc::CPU_SETSIZE as usize).filter(move |&c| unsafe { libc::CPU_ISSET(c, set) })
}

/// The first two CPUs the calling thread may run on, if it may run on two.
pub fn two_cpus() -> Option<[usize; 2]> {
    let set = current()?;
    let mut it = cpus_in(&set);
    Some([it.next()?, it.next()?])
}

/// Pins the calling thread to `cpu`; returns the mask it had (for
/// [`restore`]), or `None` if the system refused (a CPU the thread may not
/// use, or one past `CPU_SETSIZE`).
pub fn pin(cpu: usize) -> Option<Mask> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return None;
    }
    let old = current()?;
    // SAFETY: as in `current`; `CPU_ZERO` and `CPU_SET` (with `cpu` below
    // `CPU_SETSIZE`) write only the set, and `sched_setaffinity` reads
    // `size_of::<cpu_set_t>()` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        (libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) == 0).then_some(Mask(old))
    }
}

/// Gives the calling thread the CPUs of `mask` again.
pub fn restore(mask: &Mask) {
    // SAFETY: `mask.0` is a valid set of `size_of::<cpu_set_t>()` bytes.
    unsafe {
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &mask.0);
    }
}

/// Lowers the calling thread's priority to the nice value `nice` (Linux
/// keeps one a thread: `setpriority(PRIO_PROCESS, gettid())`); a thread
/// already at `nice` or lower in priority is left as it is, as raising a
/// priority takes a privilege. Returns the thread's nice value after.
pub fn lower_priority(nice: i32) -> std::io::Result<i32> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // getpriority returns -1 both for the value -1 and on failure: errno,
    // cleared before, tells them apart.
    // SAFETY: __errno_location returns this thread's errno; getpriority
    // only reads its arguments.
    let now = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, tid)
    };
    if now == -1 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(0) {
            return Err(e);
        }
    }
    if nice <= now {
        return Ok(now);
    }
    // SAFETY: setpriority only reads its arguments.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(nice.min(19))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_lowers_its_own_priority_only() {
        // SAFETY: getpriority only reads its arguments (0: this process,
        // whose main thread's value the new thread started from).
        let before = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let after = std::thread::spawn(move || {
            let nice = lower_priority(before + 5).unwrap();
            assert_eq!(nice, (before + 5).min(19));
            // Asking for a higher priority leaves it.
            assert_eq!(lower_priority(before).unwrap(), nice);
            // SAFETY: as above, for this thread's id.
            let mine = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as u32) };
            assert_eq!(mine, nice);
        })
        .join();
        after.unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, before);
    }

    #[test]
    fn a_pinned_thread_runs_on_its_cpu_and_gets_its_mask_back() {
        let before: Vec<usize> = cpus_in(&current().unwrap()).collect();
        let cpu = before[0];
        std::thread::spawn(move || {
            let old = pin(cpu).expect("an allowed CPU");
            assert_eq!(cpus_in(&current().unwrap()).collect::<Vec<_>>(), [cpu]);
            // SAFETY: sched_getcpu has no preconditions.
            assert_eq!(unsafe { libc::sched_getcpu() }, cpu as i32);
            restore(&old);
            assert_eq!(cpus_in(&current().unwrap()).collect::<Vec<_>>(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_past_the_set_is_refused() {
        assert!(pin(libc::CPU_SETSIZE as usize).is_none());
    }
}
