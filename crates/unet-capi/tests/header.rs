//! `include/unet.h` against the Rust signatures in `src/ffi.rs`.
//!
//! The header is written by hand, so this test derives each exported
//! function's C prototype from its Rust signature and compiles (with
//! `-Werror`) and links a C file that includes the header and assigns
//! every function to a pointer of the derived type: a parameter or return
//! type that differs is an incompatible-pointer error, a function the
//! library does not export a link error. It also checks that the header
//! declares exactly the exported functions, that its structs have the
//! Rust structs' sizes, alignments and field offsets, and that its
//! `UNET_E*` codes are the library's.

mod support;

use std::collections::BTreeSet;
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::Command;

use support::{Scratch, compile, have_cc};
use unet::TxStatus;
use unet::layout::{INLINE_MAX, RX_BUFFERS_MAX};
use unet_capi::api::{CODES, Code};
use unet_capi::ffi::{
    unet_addr, unet_channel_options, unet_client, unet_config, unet_counts, unet_endpoint,
    unet_engine, unet_engine_counters, unet_layout, unet_rx_desc,
};

/// One exported function: name, C parameter types, C return type.
struct Sig {
    name: String,
    params: Vec<String>,
    ret: String,
}

/// The C spelling of a Rust FFI type.
fn c_type(rust: &str) -> String {
    let t = rust.trim();
    if let Some(inner) = t.strip_prefix("*const ") {
        let c = c_type(inner);
        return if c.ends_with('*') {
            format!("{c} const *")
        } else {
            format!("const {c} *")
        };
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{} *", c_type(inner));
    }
    match t {
        "c_int" => "int",
        "c_uint" => "unsigned int",
        "c_char" => "char",
        "c_void" => "void",
        "usize" => "size_t",
        "u8" => "uint8_t",
        "u16" => "uint16_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "i32" => "int32_t",
        s if s.starts_with("unet_") => s,
        other => panic!("src/ffi.rs: no C spelling for the Rust type `{other}`"),
    }
    .to_string()
}

/// Every `extern "C" fn` in `src/ffi.rs`.
fn rust_signatures() -> Vec<Sig> {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ffi.rs"))
        .expect("reading src/ffi.rs");
    let mut out = Vec::new();
    let mut rest = src.as_str();
    while let Some(at) = rest.find("extern \"C\" fn ") {
        rest = &rest[at + "extern \"C\" fn ".len()..];
        let open = rest.find('(').expect("a parameter list");
        let name = rest[..open].trim().to_string();
        let close = rest.find(')').expect("the end of the parameter list");
        let params: Vec<String> = rest[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (_, ty) = p.split_once(':').expect("`name: type`");
                c_type(ty)
            })
            .collect();
        let body = rest.find('{').expect("a body");
        let between = rest[close + 1..body].trim();
        let ret = match between.strip_prefix("->") {
            Some(r) => c_type(r),
            None => "void".into(),
        };
        out.push(Sig { name, params, ret });
    }
    out
}

/// Every callback type in `src/ffi.rs` (`pub type unet_x_fn =
/// Option<unsafe extern "C" fn(..)>`): name and C parameter types.
fn rust_callbacks() -> Vec<(String, Vec<String>)> {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ffi.rs"))
        .expect("reading src/ffi.rs");
    let mut out = Vec::new();
    let mut rest = src.as_str();
    while let Some(at) = rest.find("pub type ") {
        rest = &rest[at + "pub type ".len()..];
        let end = rest.find(';').expect("the end of the type alias");
        let def = &rest[..end];
        let (name, ty) = def.split_once('=').expect("`name = type`");
        let ty = ty.trim();
        let params = ty
            .strip_prefix("Option<unsafe extern \"C\" fn(")
            .and_then(|t| t.strip_suffix(")>"))
            .unwrap_or_else(|| panic!("src/ffi.rs: `{ty}` is not an optional C callback"));
        let params = params
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| c_type(p.split_once(':').expect("`name: type`").1))
            .collect();
        out.push((name.trim().to_string(), params));
    }
    out
}

fn header() -> String {
    std::fs::read_to_string(support::include_dir().join("unet.h")).expect("reading unet.h")
}

/// The function names the header declares (`name(` outside comments,
/// macros and typedefs).
fn header_functions() -> BTreeSet<String> {
    let text = header();
    let mut names = BTreeSet::new();
    let mut in_comment = false;
    let mut decl = String::new();
    for line in text.lines() {
        let mut l = line.to_string();
        if in_comment {
            match l.find("*/") {
                Some(e) => {
                    l = l[e + 2..].to_string();
                    in_comment = false;
                }
                None => continue,
            }
        }
        while let Some(s) = l.find("/*") {
            match l[s..].find("*/") {
                Some(e) => l.replace_range(s..s + e + 2, ""),
                None => {
                    l.truncate(s);
                    in_comment = true;
                }
            }
        }
        let t = l.trim();
        if t.starts_with('#') || t.starts_with("typedef") {
            continue;
        }
        decl.push_str(t);
        decl.push(' ');
        if t.ends_with(';') {
            if let Some(p) = decl.find('(') {
                let head = &decl[..p];
                if let Some(n) = head
                    .rsplit(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
                    && n.starts_with("unet_")
                {
                    names.insert(n.to_string());
                }
            }
            decl.clear();
        }
    }
    names
}

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    let rust: BTreeSet<String> = rust_signatures().into_iter().map(|s| s.name).collect();
    let c = header_functions();
    assert!(
        rust.len() >= 20,
        "only {} functions found in src/ffi.rs",
        rust.len()
    );
    let only_rust: Vec<_> = rust.difference(&c).collect();
    let only_c: Vec<_> = c.difference(&rust).collect();
    assert!(
        only_rust.is_empty() && only_c.is_empty(),
        "exported but not in unet.h: {only_rust:?}; in unet.h but not exported: {only_c:?}"
    );
}

/// The header's name for each code.
const CODE_NAMES: [(Code, &str); 14] = [
    (Code::Null, "UNET_ENULL"),
    (Code::BadHandle, "UNET_EBADHANDLE"),
    (Code::Invalid, "UNET_EINVAL"),
    (Code::Engine, "UNET_EENGINE"),
    (Code::Again, "UNET_EAGAIN"),
    (Code::TooLong, "UNET_ETOOLONG"),
    (Code::Closed, "UNET_ECLOSED"),
    (Code::TimedOut, "UNET_ETIMEDOUT"),
    (Code::NoSpace, "UNET_ENOSPC"),
    (Code::Corrupt, "UNET_ECORRUPT"),
    (Code::Panic, "UNET_EPANIC"),
    (Code::Range, "UNET_ERANGE"),
    (Code::NotHeld, "UNET_ENOTHELD"),
    (Code::Deadlock, "UNET_EDEADLK"),
];

/// The header's name for each transmit status.
const TX_STATUS_NAMES: [(TxStatus, &str); 5] = [
    (TxStatus::Pending, "UNET_TX_PENDING"),
    (TxStatus::Sent, "UNET_TX_SENT"),
    (TxStatus::Rejected, "UNET_TX_REJECTED"),
    (TxStatus::Dropped, "UNET_TX_DROPPED"),
    (TxStatus::Closed, "UNET_TX_CLOSED"),
];

#[test]
fn the_header_matches_the_rust_signatures_layouts_and_codes() {
    if !have_cc("the_header_matches_the_rust_signatures_layouts_and_codes") {
        return;
    }
    let sigs = rust_signatures();
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include \"unet.h\"\n\n");
    for s in &sigs {
        let params = if s.params.is_empty() {
            "void".to_string()
        } else {
            s.params.join(", ")
        };
        c += &format!(
            "typedef {} (*{n}_t)({params});\nstatic {n}_t const p_{n} = {n};\n",
            s.ret,
            n = s.name
        );
    }
    let callbacks = rust_callbacks();
    assert_eq!(callbacks.len(), 2, "unet_fill_fn and unet_piece_fn");
    for (name, params) in &callbacks {
        // A cast null pointer is no null pointer constant: assigning one of
        // the header's type to the derived type is checked like any other.
        c += &format!(
            "typedef void (*{name}_rust)({});\nstatic {name}_rust const alias_{name} = ({name})0;\n",
            params.join(", ")
        );
    }
    macro_rules! layout {
        ($t:ident: $($f:ident),*) => {{
            c += &format!(
                "_Static_assert(sizeof({t}) == {s} && _Alignof({t}) == {a}, \"{t}: size or alignment differs from Rust's\");\n",
                t = stringify!($t), s = size_of::<$t>(), a = align_of::<$t>()
            );
            $(c += &format!(
                "_Static_assert(offsetof({t}, {f}) == {o}, \"{t}.{f}: offset differs from Rust's\");\n",
                t = stringify!($t), f = stringify!($f), o = offset_of!($t, $f)
            );)*
        }};
    }
    layout!(unet_client: id);
    layout!(unet_endpoint: id);
    layout!(unet_engine: id);
    layout!(unet_addr: ip, port);
    layout!(unet_config: buffers, buffer_size, tx_depth, rx_depth, free_depth);
    layout!(unet_counts: tx_descriptors, tx_frames, tx_rejected, tx_closed, rx_delivered,
        rx_no_buffer, rx_queue_full, rx_too_long, rx_bad_checksum, applet_traps, applet_drops,
        free_invalid, queue_corrupt, applet_overruns, applet_throttled);
    assert_eq!(
        size_of::<unet_counts>(),
        15 * 8,
        "unet_counts has every PortCounts field"
    );
    layout!(unet_layout: config, max_message, area_len, tx_region);
    layout!(unet_rx_desc: len, chan, nbufs, offsets, data);
    layout!(unet_channel_options: checksum);
    layout!(unet_engine_counters: frames_in, unmatched, malformed, frames_out, send_errors,
        transport_no_route, transport_queue_full, transport_overruns, transport_not_unet, closed);
    assert_eq!(
        size_of::<unet_engine_counters>(),
        size_of::<unet::EngineCounts>(),
        "unet_engine_counters has every EngineCounts field"
    );
    for (status, name) in TX_STATUS_NAMES {
        assert_eq!(TxStatus::from_u16(status as u16), status);
        c += &format!(
            "_Static_assert({name} == {}, \"{name} differs from the engine's status\");\n",
            status as u16
        );
    }
    c += &format!(
        "_Static_assert(UNET_INLINE_MAX == {INLINE_MAX} && UNET_RX_BUFFERS_MAX == {RX_BUFFERS_MAX}, \"descriptor sizes\");\n"
    );
    assert_eq!(CODE_NAMES.len(), CODES.len());
    c += "_Static_assert(UNET_OK == 0, \"UNET_OK\");\n";
    for (code, name) in CODE_NAMES {
        assert!(CODES.contains(&code));
        c += &format!(
            "_Static_assert({name} == {}, \"{name} differs from the library's code\");\n",
            code as i32
        );
    }
    c += "\nint main(void) {\n    void (*const all[])(void) = {\n";
    for s in &sigs {
        c += &format!("        (void (*)(void))p_{},\n", s.name);
    }
    c += "    };\n";
    for (name, _) in &callbacks {
        c += &format!("    (void)alias_{name};\n");
    }
    c += "    size_t n = 0;\n    for (size_t i = 0; i < sizeof all / sizeof *all; i++)\n        n += all[i] != NULL;\n    printf(\"%zu\\n\", n);\n    return 0;\n}\n";

    let dir = Scratch::new("header");
    let src = dir.0.join("check.c");
    std::fs::write(&src, &c).expect("writing the check");
    let exe = dir.0.join("check");
    compile(&[&src], &exe);
    let out = Command::new(&exe).output().expect("running the check");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        sigs.len().to_string(),
        "every function linked"
    );
}

#[test]
fn every_code_has_its_own_description() {
    let mut seen = BTreeSet::new();
    for code in CODES {
        let d = unet_capi::api::strerror(code as i32).to_str().unwrap();
        assert_ne!(d, "unknown unet error code", "{}", code as i32);
        assert!(seen.insert(d), "two codes share `{d}`");
    }
    assert_eq!(
        unet_capi::api::strerror(-1000).to_str().unwrap(),
        "unknown unet error code"
    );
}
