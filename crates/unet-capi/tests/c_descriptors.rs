//! `tests/c/descriptors.c`, built with `cc -std=c11 -Wall -Werror` against
//! `libunet_capi.a` and run against a daemon on a temporary socket: the
//! descriptors and buffers managed by hand (the layout and the mapped
//! area, `unet_write_area`, `unet_push_tx`, `unet_tx_status`,
//! `unet_tx_pushed`, `unet_flush`, `unet_recv_desc`, `unet_give_buffer`,
//! `unet_pending`, `unet_is_closed`, `unet_set_drive`,
//! `unet_poll_engine`, `unet_endpoint_bad_descriptors`), channel options
//! and an in-process engine's counters, each from C with what it must do
//! and what it must refuse with which code: a descriptor number without
//! a status, a buffer given back twice or never handed out, an offset or
//! length outside the area, a closed handle, a huge length. It ends with
//! 400 round trips by hand through the daemon, the echo sent back from
//! the receive buffer it arrived in. The program checks each of these
//! itself and exits 1 naming the first that failed.

mod support;

use std::process::Command;

use support::{Daemon, Scratch, compile, have_cc};

#[test]
fn descriptors_and_buffers_by_hand_from_c() {
    if !have_cc("descriptors_and_buffers_by_hand_from_c") {
        return;
    }
    let dir = Scratch::new("descriptors");
    let exe = dir.0.join("descriptors");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/descriptors.c");
    compile(&[&src], &exe);
    let socket = dir.0.join("engine.sock");
    let _daemon = Daemon::start(&socket, 1);
    let out = Command::new(&exe)
        .arg(&socket)
        .output()
        .expect("running descriptors");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "descriptors failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" checks passed"), "{stdout}");
}
