//! Generated functions whose results say which key and version they are.
#![allow(dead_code)]

use codecache::Emit;
use vcode::{Callee, Class, Code, Func, L, Leaf};

/// The constant a function for `key` at `version` adds to its argument.
pub fn tag(key: u64, version: u64) -> i64 {
    (key as i64) * 1_000_003 + version as i64
}

/// `long f(long x) { return x + tag(key, version); }`, padded with `pad`
/// extra instructions so that code sizes vary.
pub fn value_fn(
    key: u64,
    version: u64,
    pad: usize,
) -> impl FnMut(&mut Emit<'_>) -> vcode::Result<Code> {
    move |e| {
        let mut f = Func::new();
        let p = f.lambda("%l", Leaf::Yes)?;
        let x = p.get::<L>(0)?;
        for _ in 0..pad {
            f.add(x, x, 1);
            f.sub(x, x, 1);
        }
        f.add(x, x, tag(key, version));
        f.ret(x);
        f.end_in(e.mem())
    }
}

/// The helper every linked function calls: `3 * x`, in any version.
pub fn helper_fn(version: u64) -> impl FnMut(&mut Emit<'_>) -> vcode::Result<Code> {
    move |e| {
        let mut f = Func::new();
        let p = f.lambda("%l", Leaf::Yes)?;
        let x = p.get::<L>(0)?;
        let y = f.getreg::<L>(Class::Temp)?;
        // Versions differ in code, not in meaning.
        f.set(y, version as i64);
        f.sub(y, y, version as i64);
        f.add(y, y, x);
        f.add(y, y, x);
        f.add(y, y, x);
        f.ret(y);
        f.end_in(e.mem())
    }
}

/// What calls through a link go to when the helper is not published.
pub extern "C" fn helper_fallback(x: i64) -> i64 {
    3 * x
}

/// `long f(long x) { return helper(x) + tag(key, version); }` where
/// `helper` is reached through a link to `helper_key`.
pub fn linked_fn(
    key: u64,
    version: u64,
    helper_key: u64,
) -> impl FnMut(&mut Emit<'_>) -> Result<Code, codecache::Error> {
    move |e| {
        let site = e.link(helper_key, helper_fallback as *const () as usize)?;
        let mut f = Func::new();
        let p = f.lambda("%l", Leaf::No)?;
        let x = p.get::<L>(0)?;
        let r = f.getreg::<L>(Class::Persistent)?;
        f.call(r, Callee::Native(site), &[x.into()]);
        f.add(r, r, tag(key, version));
        f.ret(r);
        Ok(f.end_in(e.mem())?)
    }
}

/// Every mapping of this process that is writable and executable at once.
pub fn wx_mappings() -> Vec<String> {
    vcode::debug::wx_mappings().expect("/proc/self/maps is readable")
}
