//! How often the kernel took a core away from this process's threads
//! (involuntary context switches, `getrusage(2)`'s `ru_nivcsw`): a timed
//! batch of round trips during which one of the two threads was preempted
//! measured the scheduler of a busy machine, not the data path, and
//! `fastpath demo` times it again.

/// Involuntary context switches of all of this process's threads so far.
pub fn involuntary_switches() -> u64 {
    // SAFETY: `rusage` is plain data, valid when zeroed; getrusage writes
    // it and reads nothing else.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) != 0 {
            return 0;
        }
        u
    };
    usage.ru_nivcsw.max(0) as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_count_never_goes_back() {
        let a = super::involuntary_switches();
        std::thread::yield_now();
        assert!(super::involuntary_switches() >= a);
    }
}
