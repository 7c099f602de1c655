//! Links between blocks (paper §9.1): patchable direct jumps.
//!
//! A [`Link`] is a small site in cache memory that generated code calls
//! (or jumps to) in place of another block, found by key:
//!
//! ```text
//!  +0  0f 1f 00          nop (3 bytes): aligns the rel32 below
//!  +3  e9 <rel32>        jmp target      (linked)  or  jmp +8 (unlinked)
//!  +8  57                push rdi        \
//!  +9  48 bf <site>      mov rdi, site    | the exit: back to the runtime
//! +19  48 b8 <resolver>  mov rax, tramp   |
//! +29  ff e0             jmp rax         /
//! ```
//!
//! The site is a 64-byte block aligned to 64 bytes, so the rel32 at +4 is
//! 4-byte aligned and inside one cache line: repatching it is one aligned
//! atomic 4-byte store through the write view, and a thread fetching the
//! jump sees either the old or the new target, never a mix. (Intel's SDM
//! asks cross-modifying code to serialize the executing processor; the
//! paper, and every DBT since, relies on the weaker, observed property that
//! an aligned store within a line is atomic with respect to instruction
//! fetch, and nothing depends on *when* a thread sees the patch: both
//! targets are valid code until the old target is freed, which waits for
//! every thread's synchronization point.)
//!
//! Unlinked, the site jumps to its exit, which passes the site to the
//! resolver trampoline: it saves the argument registers (integer and
//! `xmm0`-`xmm7`), calls `resolve` (Rust), which looks the key up in the
//! table, relinks the site to the current code under the link lock, and
//! returns its address; the trampoline restores the arguments and jumps
//! there. So a call through a link always reaches the key's current code
//! (or the site's fallback when the key is absent), whatever its state.
//!
//! Unlinking a block (step one of deletion) takes the link lock, marks the
//! block unlinked (so no resolver links to it again) and repatches every
//! site that jumps into it back to its exit. Together with the removal
//! from the table, no thread can newly enter the block afterwards.
//!
//! This is one of the small modules that own `unsafe`.

use crate::arena::{AllocError, Arena, RawBlock};
use crate::cache::{Core, Entry};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Offset of the patchable rel32 in a site.
pub const REL32_AT: usize = 4;
/// Offset of the exit (the unlinked target) in a site.
const EXIT_AT: usize = 8;

/// The link state of one cache: which sites jump into which block.
pub(crate) struct Links {
    /// Entry id to the addresses of the [`Site`]s linked to it.
    incoming: Mutex<HashMap<u64, Vec<usize>>>,
    pub(crate) contention: AtomicU64,
    pub(crate) resolves: AtomicU64,
    pub(crate) patches: AtomicU64,
}

impl Links {
    pub(crate) fn new() -> Links {
        Links {
            incoming: Mutex::new(HashMap::new()),
            contention: AtomicU64::new(0),
            resolves: AtomicU64::new(0),
            patches: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<usize>>> {
        match self.incoming.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                self.contention.fetch_add(1, Ordering::Relaxed);
                self.incoming.lock().unwrap_or_else(|p| p.into_inner())
            }
        }
    }

    /// Step one of deletion, for links: marks `e` unlinked and points every
    /// site that jumps into it back at its exit.
    pub(crate) fn unlink(&self, e: &Entry) {
        let mut inc = self.lock();
        e.unlinked.store(true, Ordering::Relaxed);
        for site in inc.remove(&e.id).unwrap_or_default() {
            // SAFETY: a site removes its address from this map (under this
            // lock) before it is freed, so every address here is live.
            let site = unsafe { &*(site as *const Site) };
            site.block.store_u32(REL32_AT, 0); // jmp +8: the exit
            site.linked_to.store(0, Ordering::Relaxed);
            self.patches.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Points `site` at `e` unless `e` was unlinked.
    fn link(&self, site: &Site, e: &Entry) {
        let mut inc = self.lock();
        if e.unlinked.load(Ordering::Relaxed) || site.linked_to.load(Ordering::Relaxed) == e.id {
            return;
        }
        let from = site.block.exec() + EXIT_AT;
        let Ok(rel) = i32::try_from(e.code().addr() as i64 - from as i64) else {
            return; // out of rel32 range: stays on the resolver path
        };
        let old = site.linked_to.load(Ordering::Relaxed);
        if old != 0
            && let Some(v) = inc.get_mut(&old)
        {
            v.retain(|&s| s != site as *const Site as usize);
        }
        site.block.store_u32(REL32_AT, rel as u32);
        site.linked_to.store(e.id, Ordering::Relaxed);
        inc.entry(e.id)
            .or_default()
            .push(site as *const Site as usize);
        self.patches.fetch_add(1, Ordering::Relaxed);
    }
}

/// A link site, owned (through [`Link`]) by the block whose code uses it.
pub(crate) struct Site {
    block: RawBlock,
    target: u64,
    fallback: usize,
    core: *const Core,
    links: Arc<Links>,
    /// The entry id the site jumps to, 0 when unlinked; changed under the
    /// link lock.
    linked_to: AtomicU64,
}

/// A patchable direct jump to whatever code the cache holds under a key.
/// Made by [`crate::Emit::link`]; the block being built owns it, and it is
/// freed with that block.
pub struct Link {
    site: Box<Site>,
}

// SAFETY: `core` is only dereferenced by `resolve`, called from generated
// code that runs inside a scope of a thread holding the core alive; every
// other field is Send + Sync.
unsafe impl Send for Link {}
// SAFETY: as above; shared access reads immutable fields or atomics.
unsafe impl Sync for Link {}

impl Link {
    /// Makes an unlinked site for `target` in `arena`.
    pub(crate) fn new(
        arena: &Arena,
        core: &Core,
        links: &Arc<Links>,
        target: u64,
        fallback: usize,
        trampoline: usize,
    ) -> Result<Link, AllocError> {
        let block = arena.raw(64)?;
        let mut site = Box::new(Site {
            block,
            target,
            fallback,
            core,
            links: links.clone(),
            linked_to: AtomicU64::new(0),
        });
        let me = &*site as *const Site as u64;
        let mut code = Vec::with_capacity(32);
        code.extend_from_slice(&[0x0f, 0x1f, 0x00, 0xe9, 0, 0, 0, 0]);
        code.push(0x57); // push rdi
        code.extend_from_slice(&[0x48, 0xbf]); // mov rdi, imm64
        code.extend_from_slice(&me.to_le_bytes());
        code.extend_from_slice(&[0x48, 0xb8]); // mov rax, imm64
        code.extend_from_slice(&(trampoline as u64).to_le_bytes());
        code.extend_from_slice(&[0xff, 0xe0]); // jmp rax
        site.block.write(0, &code);
        Ok(Link { site })
    }

    /// The address to call or jump to.
    pub fn addr(&self) -> usize {
        self.site.block.exec()
    }

    /// The key the link goes to.
    pub fn target(&self) -> u64 {
        self.site.target
    }

    /// True while the site jumps straight to the target's code.
    pub fn is_linked(&self) -> bool {
        self.site.linked_to.load(Ordering::Relaxed) != 0
    }

    /// Bytes of cache memory the site takes.
    pub fn bytes(&self) -> usize {
        64
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let mut inc = self.links.lock();
        let t = self.linked_to.load(Ordering::Relaxed);
        if t != 0
            && let Some(v) = inc.get_mut(&t)
        {
            v.retain(|&s| s != self as *const Site as usize);
            if v.is_empty() {
                inc.remove(&t);
            }
        }
    }
}

/// Called by the trampoline with the site whose exit was taken: returns
/// the address to continue at.
extern "C" fn resolve(site: *const Site) -> usize {
    // SAFETY: the exit passes its own site, which lives as long as the
    // block that called it, and that block is running.
    let site = unsafe { &*site };
    // SAFETY: the core outlives every block in it, and a block runs only
    // while a thread holding the core is inside a scope.
    let core = unsafe { &*site.core };
    site.links.resolves.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the calling thread is running generated code from the cache,
    // which it may only do inside a scope: it is registered, not flagged
    // out, and passes no synchronization point until the code returns.
    match unsafe { core.table.get_unchecked(site.target) } {
        Some(e) => {
            site.links.link(site, e);
            e.code().addr()
        }
        None => site.fallback,
    }
}

/// The machine code of the resolver trampoline: entered from a site's exit
/// with the caller's `rdi` pushed and the site in `rdi`.
pub(crate) fn trampoline_code() -> Vec<u8> {
    let mut c = Vec::with_capacity(160);
    // Stack on entry: the caller's return address, then the pushed rdi:
    // rsp is 16-byte aligned here (8 for the return address + 8).
    c.push(0x56); // push rsi
    c.push(0x52); // push rdx
    c.push(0x51); // push rcx
    c.extend_from_slice(&[0x41, 0x50]); // push r8
    c.extend_from_slice(&[0x41, 0x51]); // push r9
    c.push(0x50); // push rax (al: vector count of a variadic call)
    // 6 pushes: aligned again. Room for xmm0-7.
    c.extend_from_slice(&[0x48, 0x81, 0xec, 0x80, 0, 0, 0]); // sub rsp, 128
    for k in 0..8u8 {
        // movdqu [rsp + 16k], xmmk
        c.extend_from_slice(&[0xf3, 0x0f, 0x7f, 0x44 | (k << 3), 0x24, 16 * k]);
    }
    c.extend_from_slice(&[0x48, 0xb8]); // mov rax, resolve
    c.extend_from_slice(
        &(resolve as extern "C" fn(*const Site) -> usize as usize as u64).to_le_bytes(),
    );
    c.extend_from_slice(&[0xff, 0xd0]); // call rax
    c.extend_from_slice(&[0x49, 0x89, 0xc3]); // mov r11, rax
    for k in 0..8u8 {
        // movdqu xmmk, [rsp + 16k]
        c.extend_from_slice(&[0xf3, 0x0f, 0x6f, 0x44 | (k << 3), 0x24, 16 * k]);
    }
    c.extend_from_slice(&[0x48, 0x81, 0xc4, 0x80, 0, 0, 0]); // add rsp, 128
    c.push(0x58); // pop rax
    c.extend_from_slice(&[0x41, 0x59]); // pop r9
    c.extend_from_slice(&[0x41, 0x58]); // pop r8
    c.push(0x59); // pop rcx
    c.push(0x5a); // pop rdx
    c.push(0x5e); // pop rsi
    c.push(0x5f); // pop rdi (the caller's)
    c.extend_from_slice(&[0x41, 0xff, 0xe3]); // jmp r11
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};

    fn listing(code: &[u8]) -> Vec<String> {
        let mut d = Decoder::new(64, code, DecoderOptions::NONE);
        let mut f = IntelFormatter::new();
        d.iter()
            .map(|i| {
                let mut s = String::new();
                f.format(&i, &mut s);
                s
            })
            .collect()
    }

    #[test]
    fn trampoline_saves_and_restores_the_argument_registers() {
        let l = listing(&trampoline_code());
        let text = l.join("\n");
        for want in [
            "push rsi",
            "push r9",
            "sub rsp,80h",
            "movdqu [rsp],xmm0",
            "movdqu [rsp+70h],xmm7",
            "call rax",
            "mov r11,rax",
            "movdqu xmm7,[rsp+70h]",
            "add rsp,80h",
            "pop rdi",
            "jmp r11",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
        assert!(!text.contains("(bad)"), "{text}");
        // Pushes and pops pair up.
        let pushes = l.iter().filter(|s| s.starts_with("push")).count();
        let pops = l.iter().filter(|s| s.starts_with("pop")).count();
        assert_eq!(pushes, 6);
        assert_eq!(pops, 7); // and the rdi the site pushed
    }
}
