//! `fastpath esp` end to end: `run` feeds external channels from stdin or
//! files and prints what the program sends, on every backend, with and
//! without a fast-path specification; host functions come from `--extern`;
//! `check` finds a planted deadlock and proves a filter program free of
//! them; `dump` prints the extracted fast path and its machine code; bad
//! input is an error with a position and a failing exit status.

mod common;

use std::path::{Path, PathBuf};

use common::{fastpath_input, fastpath_with_input as fastpath};

fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../esp/programs")
}

fn program(name: &str) -> String {
    programs().join(name).to_str().unwrap().to_string()
}

/// A test's scratch directory, removed with everything in it when the
/// test ends (pass or fail).
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Scratch {
        Scratch(
            tempfile::Builder::new()
                .prefix("fastpath-esp-cli-")
                .tempdir()
                .unwrap(),
        )
    }

    /// The path of `name` in the directory.
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Writes `text` to `name` in the directory; its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    }
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
                if with_spec && backend == "automata" {
                    // The automaton has no fast paths: refused, not ignored.
                    assert!(
                        !ok && err.contains("cannot be used with the automata backend"),
                        "{err}"
                    );
                    continue;
                }
                assert!(ok, "{} {args:?}: {err}", p.name);
                let (bytes, ends) = output(&out);
                assert_eq!(bytes, want, "{} {args:?}", p.name);
                assert_eq!(ends, vec![want.len() as i64], "{} {args:?}", p.name);
                if with_spec {
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
    let tmp = Scratch::new();
    let requests = tmp.file("requests", "# address size\n0 8192\n0x10000, 4096\n");
    let out = tmp.file("sent", "");
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
    let tmp = Scratch::new();
    let dl = tmp.file(
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
    let tmp = Scratch::new();
    let bad = tmp.file(
        "bad.esp",
        "channel a(int);\nprocess P { var x; in(a, x, x); }\nprocess Q { out(a, 1); }\n",
    );
    let (ok, _, err) = fastpath(&["esp", "run", &bad], "");
    assert!(!ok);
    assert!(err.contains("bad.esp:2:"), "{err}");
    let spec = tmp.file("bad.fp", "fastpath f {\n  process Nobody { start x; }\n}\n");
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

const TWO_INPUTS: &str = "channel a(int) external in; channel b(int, int) external in;
channel o(int) external out;
process P { var x, y, z; while (true) { in(a, x); in(b, y, z); out(o, x + y + z); } }
";

#[test]
fn several_external_in_channels_read_lines_that_name_their_channel() {
    let tmp = Scratch::new();
    let src = tmp.file("two_inputs.esp", TWO_INPUTS);
    let (ok, out, err) = fastpath(
        &["esp", "run", &src],
        "# channel and fields\na 1\nb 2, 3\nb 20 30\na 10\n",
    );
    assert!(ok, "{err}");
    assert_eq!(out, "o 6\no 60\n");
    // Untagged tuples are refused, and the error says what to write.
    let (ok, out, err) = fastpath(&["esp", "run", &src], "1\n2 3\n");
    assert!(!ok && out.is_empty());
    assert!(
        err.contains("stdin:1:1: `1` is not an external in channel"),
        "{err}"
    );
    assert!(
        err.contains("(a, b)") && err.contains("--in CHAN=PATH"),
        "{err}"
    );
    let (ok, _, err) = fastpath(&["esp", "run", &src], "b 1\n");
    assert!(
        !ok && err.contains("stdin:1: 1 fields, but channel b carries 2"),
        "{err}"
    );
    let (help_ok, help, _) = fastpath(&["esp", "run", "--help"], "");
    assert!(help_ok && help.contains("CHAN v1 v2"), "{help}");
}

#[test]
fn a_program_without_processes_is_an_error() {
    let tmp = Scratch::new();
    let empty = tmp.file("empty.esp", "");
    let (ok, out, err) = fastpath(&["esp", "run", &empty], "");
    assert!(!ok && out.is_empty());
    assert!(
        err.contains("declares no process") && err.contains("the file is empty"),
        "{err}"
    );
    let only = tmp.file("only_channels.esp", "channel c(int);\n");
    let (ok, _, err) = fastpath(&["esp", "check", &only], "");
    assert!(!ok && err.contains("declares no process"), "{err}");
}

#[test]
fn invalid_utf8_names_the_file_line_and_column() {
    let tmp = Scratch::new();
    let src = tmp.path("latin1.esp");
    std::fs::write(&src, b"process P {\n  var a; // caf\xe9\n}\n").unwrap();
    let src = src.to_str().unwrap();
    let (ok, _, err) = fastpath(&["esp", "check", src], "");
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "{src}:2:16: invalid UTF-8 (byte 0xe9 at byte offset 27)"
        )),
        "{err}"
    );
    // Input tuples too.
    let echo = tmp.file(
        "echo_utf8.esp",
        "channel i(int) external in; channel o(int) external out;
         process P { var x; while (true) { in(i, x); out(o, x); } }",
    );
    // Valid UTF-8 that is not a number is a different error.
    let (ok, _, err) = fastpath(&["esp", "run", &echo], "1\n\u{e9}\n");
    assert!(
        !ok && err.contains("stdin:2:1: `\u{e9}` is not an integer"),
        "{err}"
    );
    let input = tmp.path("bad_input.txt");
    std::fs::write(&input, b"1\n2 \xff\n").unwrap();
    let arg = format!("i={}", input.display());
    let (ok, _, err) = fastpath(&["esp", "run", &echo, "--in", &arg], "");
    assert!(!ok && err.contains(":2:3: invalid UTF-8"), "{err}");
}

#[test]
fn input_files_hold_the_whole_i64_range() {
    let tmp = Scratch::new();
    let echo = tmp.file(
        "echo.esp",
        "channel i(int) external in; channel o(int) external out;
         process P { var x; while (true) { in(i, x); out(o, x); } }",
    );
    let (ok, out, err) = fastpath(
        &["esp", "run", &echo],
        "-9223372036854775808\n9223372036854775807\n-0x8000000000000000\n0x7fffffffffffffff\n",
    );
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "o -9223372036854775808\no 9223372036854775807\no -9223372036854775808\no 9223372036854775807\n"
    );
    let (ok, _, err) = fastpath(&["esp", "run", &echo], "1\n  9223372036854775808\n");
    assert!(!ok);
    assert!(
        err.contains("stdin:2:3: `9223372036854775808` is out of range: integers are 64-bit, -9223372036854775808 to 9223372036854775807"),
        "{err}"
    );
    let (ok, _, err) = fastpath(&["esp", "run", &echo], "0x\n");
    assert!(
        !ok && err.contains("stdin:1:1: `0x` is not an integer"),
        "{err}"
    );
}

#[test]
fn check_has_a_settable_step_limit_for_local_loops() {
    let tmp = Scratch::new();
    let src = tmp.file(
        "finite_loop.esp",
        "channel c(int) external out;
         process P { var i; while (i < 20000) { i = i + 1; } out(c, i); }",
    );
    let (ok, out, _) = fastpath(&["esp", "check", &src, "--max-local-steps", "10000"], "");
    assert!(!ok);
    assert!(
        out.contains("ran more than 10000 steps without a channel operation")
            && out.contains("--max-local-steps"),
        "{out}"
    );
    let (ok, out, _) = fastpath(&["esp", "check", &src, "--max-local-steps", "100000"], "");
    assert!(ok, "{out}");
    let (_, help, _) = fastpath(&["esp", "check", "--help"], "");
    assert!(
        help.contains("--max-local-steps")
            && help.contains("--max-memory")
            && help.contains("--json"),
        "{help}"
    );
}

#[test]
fn check_json_is_one_object_for_scripts() {
    let tmp = Scratch::new();
    let (ok, out, err) = fastpath(
        &[
            "esp",
            "check",
            &program("program1.esp"),
            "--domain",
            "0,2",
            "--max-inputs",
            "2",
            "--json",
        ],
        "",
    );
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON value");
    assert_eq!(v["ok"], true);
    assert_eq!(v["exhaustive"], true);
    assert!(v["states"].as_u64().unwrap() > 0);
    assert!(v["violation"].is_null() && v["stopped_by"].is_null());
    let dl = tmp.file(
        "deadlock_json.esp",
        "channel a(int); channel b(int);
         process P { var x; out(a, 1); in(b, x); }
         process Q { var y; out(b, 2); in(a, y); }",
    );
    let (ok, out, _) = fastpath(&["esp", "check", &dl, "--json"], "");
    assert!(!ok);
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON value");
    assert_eq!(v["violation"]["kind"], "deadlock");
    assert_eq!(v["violation"]["stuck"][0]["process"], "P");
    assert_eq!(v["violation"]["stuck"][0]["line"], 2);
    assert_eq!(v["trace"].as_array().unwrap().len(), 1);
    // The search stops at the first violation: not exhaustive, and says so.
    assert_eq!(v["exhaustive"], false);
    assert_eq!(v["stopped_by"], "violation");
    let asrt = tmp.file(
        "asrt.esp",
        "channel i(int) external in; channel o(int) external out;
         process P { var a; while (true) { in(i, a); assert(a != 2); out(o, a); } }",
    );
    let (ok, out, _) = fastpath(&["esp", "check", &asrt, "--json"], "");
    assert!(!ok);
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON value");
    assert_eq!(v["violation"]["kind"], "assertion_failed");
    assert_eq!(
        (&v["exhaustive"], &v["stopped_by"]),
        (&false.into(), &"violation".into())
    );
    let (ok, out, _) = fastpath(&["esp", "check", &asrt], "");
    assert!(!ok);
    assert!(
        out.contains("3 states, ")
            && out.contains("NOT exhaustive: stopped at the first violation after 3 states")
            && !out.contains("exhaustive within the bounds"),
        "{out}"
    );
}

/// `check --json` on a program that does not compile: the CLI's JSON
/// error object on stdout, with the message stderr gets (a violation is a
/// report, above; this is a failure before there is one).
#[test]
fn check_json_on_an_error_prints_the_error_object() {
    let tmp = Scratch::new();
    let bad = tmp.file("bad_json.esp", "process P { var x; x = ; }");
    let (ok, out, err) = fastpath(&["esp", "check", &bad, "--json"], "");
    assert!(!ok);
    let v: serde_json::Value = serde_json::from_str(&out).expect("an error object on stdout");
    assert_eq!(v["error"]["command"], "esp check");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("bad_json.esp:1:"), "{message}");
    assert_eq!(err.trim_end(), format!("fastpath esp: {message}"));
}

#[test]
fn check_stops_at_its_memory_budget_with_a_partial_report() {
    // Program 4 with up to 1000 input messages has far more states than
    // 1 MiB holds: the check stops there, says so, and says how deep it
    // is complete.
    let (ok, out, err) = fastpath(
        &[
            "esp",
            "check",
            &program("program4.esp"),
            "--max-inputs",
            "1000",
            "--max-memory",
            "1",
            "--json",
        ],
        "",
    );
    assert!(!ok, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("one JSON value");
    assert_eq!(v["stopped_by"], "memory");
    assert_eq!(v["exhaustive"], false);
    assert!(v["complete_depth"].as_u64().unwrap() > 0, "{out}");
    let (_, text, _) = fastpath(
        &[
            "esp",
            "check",
            &program("program4.esp"),
            "--max-inputs",
            "1000",
            "--max-memory",
            "1",
        ],
        "",
    );
    assert!(
        text.contains("NOT exhaustive: the memory budget of 1 MiB was reached (raise it with --max-memory); every state within"),
        "{text}"
    );
}

/// A user's merge program whose deterministic specification narrows the
/// `alt` to `inA`'s arm: with 300,000 values on `inA` and one on `inB`, B's
/// value used to come out at line 300,001 (each entry ended at the
/// repetition bound and the next began before the process-based `alt`
/// ran). The entry after an abort is refused, so it comes out within the
/// bound docs/esp.md states: one path entry of at most 65,536 iterations,
/// then two executions of the two-armed `alt`.
#[test]
fn a_narrowing_fast_path_lets_the_other_arm_through_after_its_bound() {
    let tmp = Scratch::new();
    let esp = tmp.file(
        "merge.esp",
        "channel inA(int) external in; channel inB(int) external in; channel a(int); channel b(int); channel o(int,int) external out;
process SrcA { var v; while (true) { in(inA, v); out(a, v); } }
process SrcB { var v; while (true) { in(inB, v); out(b, v); } }
process Merge { var v; while (true) { #1 alt { in(a, v) { out(o, 0, v); } in(b, v) { out(o, 1, v); } } } }
",
    );
    let fp = tmp.file(
        "merge.fp",
        "fastpath onlyA { process SrcA { statement inA, a as OA; start OA; follows (inA OA)*; } process Merge { statement a as MA, b, #1; start #1; follows (MA #1)*; } }",
    );
    let a: String = (1..=300_000).map(|v| format!("{v}\n")).collect();
    let a = tmp.file("merge-a.txt", &a);
    let b = tmp.file("merge-b.txt", "7\n");
    for backend in ["native", "interp"] {
        let (ok, out, err) = fastpath(
            &[
                "esp",
                "run",
                &esp,
                "--fastpath",
                &fp,
                "--backend",
                backend,
                "--stats",
                "--in",
                &format!("inA={a}"),
                "--in",
                &format!("inB={b}"),
            ],
            "",
        );
        assert!(ok, "{err}");
        assert_eq!(out.lines().count(), 300_001);
        let line = 1 + out
            .lines()
            .position(|l| l == "o 1 7")
            .expect("B's value comes out");
        assert!(
            line <= 65_536 + 1 + 2,
            "{backend}: B's value came out at line {line}"
        );
        assert!(err.contains("1 refused for fairness"), "{err}");
    }
}

/// A `follows` of many stacked repetitions: 2,000 copies of `#1*` (an 8 KB
/// specification) once took cubic time to build the path automaton (27 s
/// at 1,200 copies); equal neighbours are one repetition now, and the path
/// runs. Copies that differ (`#1* #1?`, each element may follow every
/// earlier one) make an automaton quadratic in the specification's length:
/// past the construction's work budget it is a specification error at a
/// position of the specification file, not a long wait.
#[test]
fn stacked_repetitions_in_a_specification_stay_bounded() {
    let tmp = Scratch::new();
    let spec = |name: &str, part: &str, n: usize| {
        tmp.file(
            name,
            &format!(
                "fastpath s {{\n process ReadFromArray {{ statement #1, #2; start #1; follows {}; exit #2; }}\n}}\n",
                vec![part; n].join(" ")
            ),
        )
    };
    let stars = spec("stars.fp", "#1*", 2000);
    let (ok, out, err) = fastpath(
        &[
            "esp",
            "run",
            &program("program1.esp"),
            "--fastpath",
            &stars,
            "--stats",
        ],
        "4\n1\n2\n3\n4\n",
    );
    assert!(ok, "{err}");
    assert_eq!(output(&out).1, vec![8], "{out}");
    assert!(
        err.contains("fast paths: ") && !err.contains("fast paths: 0 entered"),
        "{err}"
    );
    let mixed = spec("mixed.fp", "#1* #1?", 1000);
    for cmd in ["run", "dump"] {
        let (ok, _, err) = fastpath(
            &["esp", cmd, &program("program1.esp"), "--fastpath", &mixed],
            "4\n1\n2\n3\n4\n",
        );
        assert!(!ok);
        assert!(
            err.contains("mixed.fp:2:") && err.contains("path expression too large"),
            "{cmd}: {err}"
        );
    }
}

/// Flags that would be silently ignored are refused: a specification with
/// the automaton backend (as `dump --automaton --fastpath`), a second
/// `--out`, `--in` or `--extern` for one channel or function, and `--in`
/// on a channel the program writes (named as such, before its file is read).
#[test]
fn run_refuses_flags_it_would_ignore() {
    let tmp = Scratch::new();
    let p1 = program("program1.esp");
    let spec = program("program1.fp");
    let (ok, _, err) = fastpath(
        &[
            "esp",
            "run",
            &p1,
            "--backend",
            "automata",
            "--fastpath",
            &spec,
        ],
        "1\n5\n",
    );
    assert!(!ok);
    // The library refuses it (esp::Error::SpecWithAutomata), naming the
    // specification's file and saying what to do instead.
    assert!(
        err.contains("program1.fp: a fast-path specification (stream) cannot be used with the automata backend")
            && err.contains("run the specification on the native or interp backend"),
        "{err}"
    );
    let (o1, o2) = (tmp.path("o1"), tmp.path("o2"));
    let (ok, _, err) = fastpath(
        &[
            "esp",
            "run",
            &p1,
            "--out",
            &format!("arrayOut={}", o1.display()),
            "--out",
            &format!("arrayOut={}", o2.display()),
        ],
        "1\n5\n",
    );
    assert!(!ok);
    assert!(err.contains("channel arrayOut is given twice"), "{err}");
    assert!(!o1.exists() && !o2.exists());
    let input = tmp.file("in.txt", "1\n5\n");
    let (ok, _, err) = fastpath(
        &[
            "esp",
            "run",
            &p1,
            "--in",
            &format!("arrayIn={input}"),
            "--in",
            &format!("arrayIn={input}"),
        ],
        "",
    );
    assert!(!ok);
    assert!(err.contains("channel arrayIn is given twice"), "{err}");
    let (ok, _, err) = fastpath(
        &["esp", "run", &p1, "--in", &format!("arrayOut={input}")],
        "",
    );
    assert!(!ok);
    assert!(
        err.contains("channel arrayOut is not an external in channel") && !err.contains("fields"),
        "{err}"
    );
    let ext = tmp.file(
        "ext.esp",
        "channel i(int) external in; channel o(int) external out;
         extern f(int);
         process P { var a; while (true) { in(i, a); out(o, f(a)); } }",
    );
    let (ok, out, err) = fastpath(&["esp", "run", &ext, "--extern", "f(a)=a+1"], "1\n");
    assert!(ok, "{err}");
    assert_eq!(out, "o 2\n");
    let (ok, _, err) = fastpath(
        &[
            "esp", "run", &ext, "--extern", "f(a)=a+1", "--extern", "f(b)=b",
        ],
        "1\n",
    );
    assert!(!ok);
    assert!(err.contains("f is defined twice"), "{err}");
}

/// A process looping for ever without a channel operation (which `esp
/// check` reports) stops `esp run` on every backend, with and without a
/// fast path whose graph contains the loop: an error at the loop, exit
/// status 1 as for the other run-time errors, the output before it
/// printed. `--max-local-iterations` sets the bound, exactly on the
/// process-based backends (the automaton aborts past it to them); without
/// it the default bound applies.
#[test]
fn run_stops_a_loop_that_never_yields_on_every_backend() {
    let tmp = Scratch::new();
    let src = tmp.file(
        "spin.esp",
        "channel o(int) external out;
process P {
  var x;
  out(o, 1);
  while (true) { x = x + 1; }
}
",
    );
    let spec = tmp.file(
        "spin.fp",
        "fastpath f { process P { statement o; start o; } }",
    );
    let want = format!(
        "{src}:5:18: process P ran more than 1000 loop iterations without a channel operation"
    );
    for backend in ["interp", "native", "automata"] {
        for with_spec in [false, true] {
            if with_spec && backend == "automata" {
                continue;
            }
            let mut args = vec![
                "esp",
                "run",
                &src,
                "--backend",
                backend,
                "--max-local-iterations",
                "1000",
            ];
            if with_spec {
                args.extend(["--fastpath", &spec]);
            }
            let (code, out, err) = fastpath_input(&args, "");
            assert_eq!(code, Some(1), "{args:?}: {err}");
            assert_eq!(out, "o 1\n", "{args:?}");
            assert!(err.contains(&want), "{args:?}: {err}");
            assert!(err.contains("--max-local-iterations"), "{err}");
        }
    }
    let (code, _, err) = fastpath_input(&["esp", "run", &src], "");
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!(
            "process P ran more than {} loop iterations",
            esp::ir::DEFAULT_MAX_LOCAL_ITERATIONS
        )),
        "{err}"
    );
    // A finite loop of 5,000 iterations passes with a bound of 5,000 and
    // is reported with 4,999.
    let finite = tmp.file(
        "finite.esp",
        "channel o(int) external out;
process P { var i, s; while (i < 5000) { s = s + i; i = i + 1; } out(o, s); }
",
    );
    let run = |backend: &str, n: &str| {
        fastpath_input(
            &[
                "esp",
                "run",
                &finite,
                "--backend",
                backend,
                "--max-local-iterations",
                n,
            ],
            "",
        )
    };
    for backend in ["interp", "native"] {
        let run = |n: &str| run(backend, n);
        let (code, out, err) = run("5000");
        assert_eq!((code, out.as_str()), (Some(0), "o 12497500\n"), "{err}");
        let (code, out, err) = run("4999");
        assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
        assert!(err.contains("2:23: process P ran more than 4999"), "{err}");
    }
    // The automaton charges the counted loop once at its entry and, past
    // the bound, aborts at the loop's head to the process-based code,
    // which goes on with a full budget: 5,000 iterations pass with a bound
    // of 2,500 (2,501 in the graph, 2,499 after it) and are reported with
    // 2,499.
    let run = |n: &str| run("automata", n);
    let (code, out, err) = run("2500");
    assert_eq!((code, out.as_str()), (Some(0), "o 12497500\n"), "{err}");
    let (code, out, err) = run("2499");
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("2:23: process P ran more than 2499"), "{err}");
    let (_, help, _) = fastpath_input(&["esp", "run", "--help"], "");
    assert!(
        help.contains("--max-local-iterations <N>")
            && help.contains(&format!(
                "[default: {}]",
                esp::ir::DEFAULT_MAX_LOCAL_ITERATIONS
            )),
        "{help}"
    );
}
