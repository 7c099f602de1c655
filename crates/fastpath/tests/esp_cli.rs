//! `fastpath esp` end to end: `run` feeds external channels from stdin or
//! files and prints what the program sends, on every backend, with and
//! without a fast-path specification; host functions come from `--extern`;
//! `check` finds a planted deadlock and proves a filter program free of
//! them; `dump` prints the extracted fast path and its machine code; bad
//! input is an error with a position and a failing exit status.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fastpath(args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs fastpath");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../esp/programs")
}

fn program(name: &str) -> String {
    programs().join(name).to_str().unwrap().to_string()
}

fn scratch(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("fastpath-esp-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// The bytes a run printed on `arrayOut`, and the count on `arrayEnd`.
fn output(stdout: &str) -> (Vec<u8>, Vec<i64>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    for line in stdout.lines() {
        let mut f = line.split_whitespace();
        match (f.next(), f.next().map(|v| v.parse::<i64>().unwrap())) {
            (Some("arrayOut"), Some(v)) => bytes.push(u8::try_from(v).unwrap()),
            (Some("arrayEnd"), Some(v)) => ends.push(v),
            other => panic!("unexpected line {other:?} in {stdout}"),
        }
    }
    (bytes, ends)
}

#[test]
fn run_streams_stdin_through_each_filter_program_on_every_backend() {
    let input: Vec<u8> = (0..300u32)
        .map(|i| [0x7E, 0x7D, 7, 7, 7, (i * 37) as u8][(i % 6) as usize])
        .collect();
    let mut stdin = format!("{}\n", input.len());
    for b in &input {
        stdin.push_str(&format!("{b}\n"));
    }
    for (i, p) in esp::filters::PROGRAMS.iter().enumerate() {
        let want = esp::filters::reference(i, &input);
        let src = program(&format!("program{}.esp", i + 1));
        let spec = program(&format!("program{}.fp", i + 1));
        for backend in ["interp", "native", "automata"] {
            for with_spec in [false, true] {
                let mut args = vec!["esp", "run", &src, "--backend", backend, "--stats"];
                if with_spec {
                    args.extend(["--fastpath", &spec]);
                }
                let (ok, out, err) = fastpath(&args, &stdin);
                assert!(ok, "{} {args:?}: {err}", p.name);
                let (bytes, ends) = output(&out);
                assert_eq!(bytes, want, "{} {args:?}", p.name);
                assert_eq!(ends, vec![want.len() as i64], "{} {args:?}", p.name);
                if with_spec && backend != "automata" {
                    assert!(
                        !err.contains("fast paths: 0 entered"),
                        "{} {args:?}: the fast path was never entered: {err}",
                        p.name
                    );
                }
            }
        }
    }
}

#[test]
fn run_binds_files_and_host_functions_for_figure_2() {
    let requests = scratch("requests", "# address size\n0 8192\n0x10000, 4096\n");
    let out = scratch("sent", "");
    let src = program("figure2.esp");
    let spec = program("figure5.fp");
    for backend in ["interp", "native"] {
        let (ok, stdout, err) = fastpath(
            &[
                "esp",
                "run",
                &src,
                "--fastpath",
                &spec,
                "--backend",
                backend,
                "--in",
                &format!("hostSendRequestC={requests}"),
                "--out",
                &format!("networkSendC={out}"),
                "--extern",
                "translationUnavailable(v) = 0",
                "--extern",
                "translate(v) = v + 0x100000",
                "--extern",
                "preparePacket(p, s) = p * 2 + s / 4096",
            ],
            "",
        );
        assert!(ok, "{backend}: {err}");
        assert_eq!(stdout, "", "{backend}: the output went to the file");
        // Three pages: two of the first request, one of the second. As in
        // the figure, translateAddress translates the request's first
        // address for every page.
        let pages: Vec<i64> = [0x100000i64, 0x100000, 0x110000]
            .iter()
            .map(|p| p * 2 + 1)
            .collect();
        let sent: Vec<i64> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        assert_eq!(sent, pages, "{backend}");
    }
    // A host function that fails stops the run with its name and reason.
    let (ok, _, err) = fastpath(
        &[
            "esp",
            "run",
            &src,
            "--in",
            &format!("hostSendRequestC={requests}"),
            "--extern",
            "translationUnavailable(v) = 0",
            "--extern",
            "translate(v) = v / 0",
            "--extern",
            "preparePacket(p, s) = p",
        ],
        "",
    );
    assert!(!ok);
    assert!(
        err.contains("host function translate: division by zero"),
        "{err}"
    );
    // One left unbound is named.
    let (ok, _, err) = fastpath(
        &[
            "esp",
            "run",
            &src,
            "--in",
            &format!("hostSendRequestC={requests}"),
        ],
        "",
    );
    assert!(!ok);
    assert!(err.contains("translationUnavailable is not bound"), "{err}");
}

#[test]
fn check_reports_a_planted_deadlock_with_its_trace_and_proves_program_1() {
    let dl = scratch(
        "deadlock.esp",
        "channel req(int) external in;\nchannel a(int);\nchannel b(int);\n\
         process P { var x; while (true) { in(req, x); if (x == 2) { in(b, x); } out(a, x); } }\n\
         process Q { var y; while (true) { in(a, y); out(b, y); } }\n",
    );
    let (ok, out, _) = fastpath(&["esp", "check", &dl], "");
    assert!(!ok, "{out}");
    assert!(out.contains("deadlock"), "{out}");
    // The shortest trace feeds the 2 that sends P down the wrong branch.
    assert!(out.contains("(2)"), "{out}");
    let (ok, out, err) = fastpath(
        &[
            "esp",
            "check",
            &program("program1.esp"),
            "--domain",
            "0,2,126",
            "--max-inputs",
            "3",
        ],
        "",
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains("exhaustive"), "{out}");
}

#[test]
fn dump_prints_the_fast_path_and_its_machine_code() {
    let (ok, out, err) = fastpath(
        &[
            "esp",
            "dump",
            &program("program2.esp"),
            "--fastpath",
            &program("program2.fp"),
        ],
        "",
    );
    assert!(ok, "{err}");
    assert!(out.contains("control states"), "{out}");
    assert!(
        out.contains("leave"),
        "the pseudo-code shows its exits: {out}"
    );
    let n: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("-- machine code: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("an instruction count");
    assert!(n > 10, "{out}");
}

#[test]
fn bad_sources_and_specifications_fail_with_a_position() {
    let bad = scratch(
        "bad.esp",
        "channel a(int);\nprocess P { var x; in(a, x, x); }\nprocess Q { out(a, 1); }\n",
    );
    let (ok, _, err) = fastpath(&["esp", "run", &bad], "");
    assert!(!ok);
    assert!(err.contains("bad.esp:2:"), "{err}");
    let spec = scratch("bad.fp", "fastpath f {\n  process Nobody { start x; }\n}\n");
    let (ok, _, err) = fastpath(
        &["esp", "run", &program("program1.esp"), "--fastpath", &spec],
        "",
    );
    assert!(!ok);
    assert!(err.contains("bad.fp:2:"), "{err}");
    // A message with the wrong number of fields names the line.
    let (ok, _, err) = fastpath(&["esp", "run", &program("program1.esp")], "3\n1 2\n");
    assert!(!ok);
    assert!(err.contains("stdin:2"), "{err}");
}
