//! `examples/c/echo.c`, built with `cc -std=c11 -Wall -Werror` against
//! `libunet_capi.a` and run against a daemon on a temporary socket: every
//! echo comes back byte for byte (the program checks and exits 1
//! otherwise), and it reports its round trips and both endpoints' counters.

mod support;

use std::process::Command;

use support::{Daemon, Scratch, compile, have_cc, workspace};

#[test]
fn the_c_echo_example_runs_against_the_daemon() {
    if !have_cc("the_c_echo_example_runs_against_the_daemon") {
        return;
    }
    let dir = Scratch::new("echo");
    let exe = dir.0.join("echo");
    compile(&[&workspace().join("examples/c/echo.c")], &exe);
    let socket = dir.0.join("engine.sock");
    let _daemon = Daemon::start(&socket, 1);

    let out = Command::new(&exe)
        .arg(&socket)
        .args(["500", "200"])
        .output()
        .expect("running echo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "echo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("echo: 500 round trips of 200 bytes: median "),
        "{stdout}"
    );
    // The client sent 100 warm-up rounds, 500 measured and the empty
    // message that stops the server; it received 600 echoes. The server
    // received those 601 and sent 600.
    assert!(
        stdout.contains("client counters: tx_descriptors 601, tx_frames 601, rx_delivered 600,"),
        "{stdout}"
    );
    assert!(
        stdout.contains("server counters: tx_descriptors 600, tx_frames 600, rx_delivered 601,"),
        "{stdout}"
    );
}

#[test]
fn the_c_echo_example_reports_a_missing_daemon_with_unets_message() {
    if !have_cc("the_c_echo_example_reports_a_missing_daemon_with_unets_message") {
        return;
    }
    let dir = Scratch::new("echo-missing");
    let exe = dir.0.join("echo");
    compile(&[&workspace().join("examples/c/echo.c")], &exe);
    let socket = dir.0.join("nobody.sock");
    let out = Command::new(&exe)
        .arg(&socket)
        .output()
        .expect("running echo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("unet_connect")
            && stderr.contains(&format!("connecting to {}", socket.display())),
        "{stderr}"
    );
}
