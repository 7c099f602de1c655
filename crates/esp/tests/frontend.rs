//! The front end read as a specification: what ESP source and fast-path
//! specifications mean once parsed, and the errors bad ones get.

use esp::ir::*;

/// Figure 2 of the paper with `extern` declarations added and the omitted
/// code filled in minimally.
const FIGURE2: &str = r#"
channel hostSendRequestC( int, int ) external in;
channel hostFetchRequestC( int ) external in;
channel translateRequestC( int, int );
channel translateReplyC( int, int );
channel dataSendC( int, int );
channel networkSendC( int ) external out;
extern translationUnavailable(int);
extern translate(int);
extern preparePacket(int, int);

process hostRequest {
  var virtualAddress, physicalAddress, size, source;
  while (true) {
    alt {
      in( hostSendRequestC, virtualAddress, size) {
        out( translateRequestC, virtualAddress, size);
        while ( true) {
          in( translateReplyC, physicalAddress, size);
          if ( size == 0) break;
          out( dataSendC, physicalAddress, size);
        } // while
        #1
      } // in
      in( hostFetchRequestC, source) {
        // Code omitted
      } // in
    } // alt
  } // while
}

process translateAddress {
  constant pageSize = 4096;
  var virtualAddress, physicalAddress, size;
  while (true) {
    in( translateRequestC, virtualAddress, size);
    assert( virtualAddress % pageSize == 0);
    assert( size % pageSize == 0);
    while ( size > 0) {
      if ( translationUnavailable(virtualAddress)) { #2
        // Code to fetch the translation entry
      } // if
      physicalAddress = translate( virtualAddress);
      out( translateReplyC, physicalAddress, pageSize);
      size = size - pageSize;
    } // while
    out( translateReplyC, 0, 0); // Done
  } // while
}

process networkSend {
  var physicalAddress, size, packet;
  while (true) {
    in( dataSendC, physicalAddress, size);
    packet = preparePacket( physicalAddress, size);
    out( networkSendC, packet); #3
  } // while
}
"#;

fn compile(src: &str) -> Program {
    esp::compile(src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn error(src: &str) -> String {
    match esp::compile(src) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e.to_string(),
    }
}

fn spec(program: &Program, src: &str) -> esp::spec::Spec {
    esp::spec::parse(src, program).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn spec_error(program: &str, src: &str) -> String {
    match esp::spec::parse(src, &compile(program)) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e.to_string(),
    }
}

fn proc<'p>(p: &'p Program, name: &str) -> &'p Process {
    &p.processes[p.process(name).unwrap() as usize]
}

/// The pc of the node carrying label `#n`.
fn label(p: &Process, n: u32) -> Pc {
    p.nodes
        .iter()
        .position(|node| node.label == Some(n))
        .unwrap() as Pc
}

fn var(p: &Process, name: &str) -> u32 {
    p.vars.iter().position(|v| v.name == name).unwrap() as u32
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::Binary(op, Box::new(a), Box::new(b))
}

// ---- lowering -----------------------------------------------------------------

#[test]
fn figure2_lowers_to_the_process_graphs() {
    let p = compile(FIGURE2);
    assert_eq!(p.channels.len(), 6);
    assert_eq!(p.channels[0].kind, ChanKind::ExternalIn);
    assert_eq!(p.channels[5].kind, ChanKind::ExternalOut);
    assert_eq!(
        p.externs.iter().map(|e| e.arity).collect::<Vec<_>>(),
        [1, 1, 2]
    );
    let req = p.channel("translateRequestC").unwrap();
    let reply = p.channel("translateReplyC").unwrap();
    let data = p.channel("dataSendC").unwrap();

    // hostRequest: `while (true)` needs no node, so the `alt` is the entry
    // and `#1` loops straight back to it.
    let h = proc(&p, "hostRequest");
    assert_eq!(h.entry, 0);
    let (va, size, pa) = (
        var(h, "virtualAddress"),
        var(h, "size"),
        var(h, "physicalAddress"),
    );
    let NodeKind::Alt { arms } = &h.nodes[0].kind else {
        panic!("{:?}", h.nodes[0])
    };
    assert_eq!(arms.len(), 2);
    assert_eq!(
        arms[0].op,
        Comm::In {
            chan: 0,
            vars: vec![va, size]
        }
    );
    assert_eq!(arms[0].pos, Pos { line: 16, col: 7 });
    assert_eq!(
        arms[1].next, 0,
        "an empty arm body goes back to the loop head"
    );
    let send = arms[0].next as usize;
    assert_eq!(
        h.nodes[send].kind,
        NodeKind::Comm {
            op: Comm::Out {
                chan: req,
                args: vec![Operand::Var(va), Operand::Var(size)]
            },
            next: send as Pc + 1
        }
    );
    let NodeKind::Comm {
        op: Comm::In { chan, .. },
        next: test,
    } = &h.nodes[send + 1].kind
    else {
        panic!()
    };
    assert_eq!(*chan, reply);
    let NodeKind::Branch { cond, then, els } = &h.nodes[*test as usize].kind else {
        panic!()
    };
    assert_eq!(*cond, bin(BinOp::Eq, Expr::Var(size), Expr::Const(0)));
    assert_eq!(*then, label(h, 1), "`break` leaves the inner loop to #1");
    assert_eq!(
        h.nodes[*els as usize].kind,
        NodeKind::Comm {
            op: Comm::Out {
                chan: data,
                args: vec![Operand::Var(pa), Operand::Var(size)]
            },
            next: send as Pc + 1
        }
    );
    assert_eq!(
        h.nodes[label(h, 1) as usize].kind,
        NodeKind::Nop { next: 0 }
    );
    assert_eq!(h.nodes.last().unwrap().kind, NodeKind::Halt);
    assert_eq!(h.vars.len(), 4, "no temporaries were needed");

    // translateAddress: the constant is folded and takes no slot.
    let t = proc(&p, "translateAddress");
    assert_eq!(t.vars.len(), 3);
    assert!(
        p.constants
            .iter()
            .any(|c| c.name == "pageSize" && c.value == 4096 && c.proc == 1)
    );
    let reply_out = t
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Comm {
                op: Comm::Out { args, .. },
                ..
            } => Some(args.clone()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(
        reply_out,
        [
            vec![
                Operand::Var(var(t, "physicalAddress")),
                Operand::Const(4096)
            ],
            vec![Operand::Const(0), Operand::Const(0)]
        ]
    );
    // `#2` is at the end of the `if` body: a Nop joining the `if`'s exit.
    let two = label(t, 2) as usize;
    let NodeKind::Nop { next } = t.nodes[two].kind else {
        panic!()
    };
    let NodeKind::Branch { then, els, .. } = &t.nodes[two - 1].kind else {
        panic!()
    };
    assert_eq!((*then as usize, *els), (two, next));

    // networkSend: `#3` after the `out`, looping back to the `in`.
    let n = proc(&p, "networkSend");
    assert_eq!(
        n.nodes[label(n, 3) as usize].kind,
        NodeKind::Nop { next: 0 }
    );
    assert_eq!(n.nodes[label(n, 3) as usize].pos, Pos { line: 56, col: 33 });
}

#[test]
fn out_arguments_that_are_not_variables_or_constants_go_through_temporaries() {
    let p = compile(
        "channel c(int, int, int); channel d(int) external out;
         process P { var a; constant K = 3;
           out(c, a + 1, K * 2, a);
           alt { out(c, a * a, a, 0) { } out(d, -a) { } }
         }
         process Q { var x, y, z; while (true) { in(c, x, y, z); } }",
    );
    let pr = proc(&p, "P");
    assert_eq!(
        pr.vars,
        [
            VarInfo {
                name: "a".into(),
                temp: false
            },
            VarInfo {
                name: "$t0".into(),
                temp: true
            },
            VarInfo {
                name: "$t1".into(),
                temp: true
            },
        ]
    );
    let k = |i: usize| &pr.nodes[i].kind;
    assert_eq!(
        *k(0),
        NodeKind::Assign {
            var: 1,
            value: bin(BinOp::Add, Expr::Var(0), Expr::Const(1)),
            next: 1
        }
    );
    assert_eq!(
        *k(1),
        NodeKind::Comm {
            op: Comm::Out {
                chan: 0,
                args: vec![Operand::Var(1), Operand::Const(6), Operand::Var(0)]
            },
            next: 2
        }
    );
    // In an `alt`, all the arms' temporaries are assigned before the `Alt`.
    assert_eq!(
        *k(2),
        NodeKind::Assign {
            var: 1,
            value: bin(BinOp::Mul, Expr::Var(0), Expr::Var(0)),
            next: 3
        }
    );
    assert_eq!(
        *k(3),
        NodeKind::Assign {
            var: 2,
            value: Expr::Unary(UnOp::Neg, Box::new(Expr::Var(0))),
            next: 4
        }
    );
    let NodeKind::Alt { arms } = k(4) else {
        panic!()
    };
    assert_eq!(
        arms[0].op,
        Comm::Out {
            chan: 0,
            args: vec![Operand::Var(1), Operand::Var(0), Operand::Const(0)]
        }
    );
    assert_eq!(
        arms[1].op,
        Comm::Out {
            chan: 1,
            args: vec![Operand::Var(2)]
        }
    );
    assert_eq!(*k(5), NodeKind::Halt);
    assert_eq!((arms[0].next, arms[1].next), (5, 5));
}

#[test]
fn loops_and_conditionals() {
    let p = compile(
        "process P { var a, b;
           while (a < 3) { a = a + 1; }
           if (a) b = 1; else if (b) b = 2; else ;
           while (1 + 1) { }
         }",
    );
    let k: Vec<_> = proc(&p, "P").nodes.iter().map(|n| n.kind.clone()).collect();
    let one = |v| Expr::Const(v);
    assert_eq!(
        k[0],
        NodeKind::Branch {
            cond: bin(BinOp::Lt, Expr::Var(0), one(3)),
            then: 1,
            els: 2
        }
    );
    assert_eq!(
        k[1],
        NodeKind::Assign {
            var: 0,
            value: bin(BinOp::Add, Expr::Var(0), one(1)),
            next: 0
        }
    );
    assert_eq!(
        k[2],
        NodeKind::Branch {
            cond: Expr::Var(0),
            then: 3,
            els: 4
        }
    );
    assert_eq!(
        k[3],
        NodeKind::Assign {
            var: 1,
            value: one(1),
            next: 6
        }
    );
    assert_eq!(
        k[4],
        NodeKind::Branch {
            cond: Expr::Var(1),
            then: 5,
            els: 6
        }
    );
    assert_eq!(
        k[5],
        NodeKind::Assign {
            var: 1,
            value: one(2),
            next: 6
        }
    );
    // An empty infinite loop is a Nop looping to itself; the Halt after it
    // is unreachable.
    assert_eq!(k[6], NodeKind::Nop { next: 6 });
    assert_eq!(k[7], NodeKind::Halt);
}

#[test]
fn the_entry_is_node_0_even_when_the_first_node_is_skipped() {
    let p = compile("process P { var a; while (true) { break; a = 5; } a = 1; }");
    let pr = proc(&p, "P");
    assert_eq!(pr.entry, 0);
    assert_eq!(
        pr.nodes[0].kind,
        NodeKind::Assign {
            var: 0,
            value: Expr::Const(1),
            next: 2
        }
    );
    assert_eq!(pr.nodes[2].kind, NodeKind::Halt);
    // The unreachable `a = 5` loops to itself.
    assert_eq!(
        pr.nodes[1].kind,
        NodeKind::Assign {
            var: 0,
            value: Expr::Const(5),
            next: 1
        }
    );
}

#[test]
fn constants_and_literals_fold() {
    let p = compile(
        "process P { constant A = 0x10, B = A * 2 + 'a'; constant C = -9223372036854775808 / -1; var x;
           x = B; x = C; x = true + false * 2; x = (1 << 70) + (7 % -3) + (-7 >> 1);
           x = 0 && f(1); x = 1 || f(1); x = x + (2 * 3); x = 1 / 0; }
         extern f(int);",
    );
    let pr = proc(&p, "P");
    let values: Vec<_> = pr
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Assign { value, .. } => Some(value.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(values[0], Expr::Const(32 + 97));
    assert_eq!(values[1], Expr::Const(i64::MIN), "division wraps");
    assert_eq!(values[2], Expr::Const(1));
    assert_eq!(
        values[3],
        Expr::Const(64 + 1 - 4),
        "shift counts are modulo 64"
    );
    assert_eq!(values[4], Expr::Const(0));
    assert_eq!(values[5], Expr::Const(1));
    assert_eq!(values[6], bin(BinOp::Add, Expr::Var(0), Expr::Const(6)));
    assert_eq!(
        values[7],
        bin(BinOp::Div, Expr::Const(1), Expr::Const(0)),
        "left for the run-time error"
    );
    assert_eq!(pr.vars.len(), 1);
}

#[test]
fn labels_become_nops_where_they_are() {
    let p = compile("process P { var a; #1 a = 1; { #2 } if (a) { a = 2; #3 } #4 }");
    let pr = proc(&p, "P");
    for n in 1..=4 {
        let node = &pr.nodes[label(pr, n) as usize];
        assert!(matches!(node.kind, NodeKind::Nop { .. }), "#{n}: {node:?}");
    }
    assert_eq!(label(pr, 1), 0);
    assert_eq!(
        pr.nodes[label(pr, 3) as usize].kind,
        NodeKind::Nop { next: label(pr, 4) }
    );
    assert_eq!(
        pr.nodes[label(pr, 4) as usize].kind,
        NodeKind::Nop {
            next: pr.nodes.len() as Pc - 1
        }
    );
}

#[test]
fn the_filter_programs_and_figure2_in_programs_compile_with_their_specs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("programs");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut seen = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "esp") {
            let src = std::fs::read_to_string(&path).unwrap();
            let program = esp::compile(&src).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let stem = path
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .replace("figure2", "figure5");
            if let Ok(s) = std::fs::read_to_string(dir.join(format!("{stem}.fp"))) {
                esp::spec::parse(&s, &program).unwrap_or_else(|e| panic!("{stem}.fp: {e}"));
            }
            seen += 1;
        }
    }
    assert!(seen > 0);
}

// ---- static checks ------------------------------------------------------------

#[test]
fn static_errors_say_what_and_where() {
    let cases: &[(&str, &str)] = &[
        (
            "process P {\n  var a;\n  in(foo, a);\n}",
            "3:6: channel `foo` is not declared",
        ),
        (
            "channel c(int);\nprocess P { var a; out(c, a); }\nprocess Q { var b; in(c, b, b); }",
            "3:23: channel `c` carries 1 field (declared at 1:1), but this `in` has 2",
        ),
        (
            "channel c(int);\nprocess P { out(c); }",
            "2:17: channel `c` carries 1 field (declared at 1:1), but this `out` has 0",
        ),
        (
            "channel c(int); channel c(int);",
            "1:25: `c` is already declared as a channel at 1:9",
        ),
        (
            "channel c(int); extern c(int);",
            "1:24: `c` is already declared as a channel at 1:9",
        ),
        (
            "process P {} process P {}",
            "1:22: `P` is already declared as a process at 1:9",
        ),
        (
            "process P { var a; var a; }",
            "1:24: `a` is already declared at 1:17 in process `P`",
        ),
        (
            "process P { var a; constant a = 1; }",
            "1:29: `a` is already declared at 1:17 in process `P`",
        ),
        (
            "process P { var a; a = b; }",
            "1:24: variable `b` is not declared",
        ),
        (
            "channel c(int);\nprocess P { var a; a = c; }",
            "2:24: `c` is a channel (declared at 1:9), not a variable",
        ),
        (
            "process P { var a; b = 1; }",
            "1:20: variable `b` is not declared",
        ),
        (
            "channel c(int) external in;\nprocess P { constant K = 1; in(c, K); }",
            "2:35: cannot receive into constant `K` (declared at 2:22)",
        ),
        (
            "process P { constant K = 1; K = 2; }",
            "1:29: cannot assign to constant `K` (declared at 1:22)",
        ),
        (
            "channel c(int) external in;\nprocess P { out(c, 1); }",
            "2:17: channel `c` is external in: the host is its only writer, so process `P` cannot `out` on it",
        ),
        (
            "channel c(int) external out;\nprocess P { var a; in(c, a); }",
            "2:23: channel `c` is external out: the host is its only reader, so process `P` cannot `in` from it",
        ),
        (
            "channel c(int) external out;\nchannel d(int);\nprocess P { var a; in(d, a); out(c, a); }\nprocess Q { out(c, 1); }",
            "3:20: channel `d` is read by process `P` at 3:20 but no process writes it",
        ),
        (
            "channel d(int);\nprocess P { out(d, 1); }",
            "2:13: channel `d` is written by process `P` at 2:13 but no process reads it",
        ),
        (
            "channel c(int);\nchannel d(int);\nchannel o(int) external out;\nprocess P { var a; in(c, a); out(d, a); out(c, a); in(d, a); }\nprocess Q { out(o, 1); }",
            "4:1: process `P` is unreachable: none of its channel operations can ever complete, since no other process uses `c`, `d` the other way",
        ),
        (
            "channel o(int) external out;\nprocess P { out(o, 1); }\nprocess Q { var a; a = 1; }",
            "3:1: process `Q` is unreachable: it has no channel operation, so no other process can interact with it",
        ),
        ("process P { break; }", "1:13: `break` outside a loop"),
        (
            "process P { while (true) { } break; }",
            "1:30: `break` outside a loop",
        ),
        (
            "process P { #1 #2 #1 }",
            "1:19: label #1 is already used at 1:13 in process `P`",
        ),
        (
            "extern f(int);\nprocess P { var a; a = f(1, 2); }",
            "2:24: host function `f` takes 1 argument, but 2 are given",
        ),
        (
            "extern f();\nprocess P { f(1); }",
            "2:13: host function `f` takes 0 arguments, but 1 is given",
        ),
        (
            "process P { var a; a = g(1); }",
            "1:24: host function `g` is not declared (declare it with `extern g(int, ...);`)",
        ),
        (
            "channel c(int);\nprocess P { c(1); }",
            "2:13: `c` is a channel (declared at 1:9), not a host function",
        ),
        (
            "process P { var a; constant K = a; }",
            "1:33: constant `K` cannot use variable `a`: constants are folded at compile time",
        ),
        (
            "process P { constant K = 1 / 0; }",
            "1:28: constant `K` must be a constant expression (it divides by zero)",
        ),
        (
            "extern f();\nprocess P { constant K = f(); }",
            "2:26: constant `K` cannot call host function `f`: constants are folded at compile time",
        ),
        (
            "process P { var a; in(a, a); }",
            "1:23: `a` is a variable (declared at 1:17), not a channel",
        ),
    ];
    for (src, want) in cases {
        assert_eq!(&error(src), want, "\n{src}");
    }
}

#[test]
fn syntax_errors_say_what_and_where() {
    let cases: &[(&str, &str)] = &[
        (
            "process P { var a; a = 1 }",
            "1:26: syntax error: expected `;`, found `}`",
        ),
        (
            "process P { var a; if a {} }",
            "1:23: syntax error: expected `(`, found `a`",
        ),
        (
            "process P {\n  var a;\n  a = ;\n}",
            "3:7: syntax error: expected an expression, found `;`",
        ),
        (
            "process P { a = 1; var b; }",
            "1:20: syntax error: `var` declarations must come before the statements of a process",
        ),
        (
            "process in { }",
            "1:9: syntax error: expected a process name, found keyword `in`",
        ),
        (
            "channel c(int) external;",
            "1:24: syntax error: expected `in` or `out` after `external`, found `;`",
        ),
        (
            "channel c(int, long);",
            "1:16: syntax error: expected `int`, found `long`",
        ),
        (
            "process P { alt { a = 1; } }",
            "1:19: syntax error: expected an `in(...)` or `out(...)` arm, or `}` closing the `alt`, found `a`",
        ),
        (
            "process P { else a = 1; }",
            "1:13: syntax error: `else` without a matching `if`",
        ),
        (
            "process P { var a;",
            "1:19: syntax error: process `P` is not closed by `}`",
        ),
        (
            "process P { $ }",
            "1:13: syntax error: unexpected character `$`",
        ),
        (
            "/* never closed",
            "1:1: syntax error: unterminated block comment",
        ),
        (
            "int x;",
            "1:1: syntax error: expected `channel`, `extern` or `process`, found `int`",
        ),
    ];
    for (src, want) in cases {
        let got = esp::compile(src).unwrap_err();
        assert!(matches!(got, esp::Error::Syntax { .. }), "{got:?}");
        assert_eq!(&got.to_string(), want, "\n{src}");
    }
}

// ---- specifications ---------------------------------------------------------

const FIGURE5: &str = r#"
fastpath demo {
  process hostRequest {
    statement  hostSendRequestC as H0,
               translateRequestC as H1,
               translateReplyC as H2,
               dataSendC as H3,
               #1;
    start      H0 ? (size < 10000);
    follows    H1 ( H2 H3 )* ;
    exit       #1;
  }
  process translateAddress {
    statement  translateRequestC as T1, #2;
    start      T1 <=> H1;
    exit       T1;
  }
  process networkSend {
    statement  dataSendC, #3;
    start      dataSendC;
    exit       #3;
  }
}
"#;

#[test]
fn figure5_resolves_against_figure2() {
    use esp::spec::Regex;
    let p = compile(FIGURE2);
    let s = spec(&p, FIGURE5);
    assert_eq!(s.fastpaths.len(), 1);
    let fp = &s.fastpaths[0];
    assert_eq!(fp.name, "demo");
    assert_eq!(
        fp.procs.iter().map(|q| q.proc).collect::<Vec<_>>(),
        [0, 1, 2]
    );

    let h = proc(&p, "hostRequest");
    let hr = &fp.procs[0];
    let h0 = StmtRef {
        pc: 0,
        arm: Some(0),
    };
    let h1 = StmtRef { pc: 1, arm: None };
    let h2 = StmtRef { pc: 2, arm: None };
    let h3 = StmtRef { pc: 4, arm: None };
    let one = StmtRef {
        pc: label(h, 1),
        arm: None,
    };
    assert_eq!(hr.stmts, [h0, h1, h2, h3, one]);
    assert_eq!(hr.start.stmt, h0);
    assert_eq!(
        hr.start.pred,
        Some(bin(
            BinOp::Lt,
            Expr::Var(var(h, "size")),
            Expr::Const(10000)
        ))
    );
    assert_eq!(hr.start.pos, Pos { line: 9, col: 16 });
    let Some(Regex::Seq(items)) = &hr.follows else {
        panic!("{:?}", hr.follows)
    };
    assert!(matches!(&items[0], Regex::Elem(e) if e.stmt == h1));
    let Regex::Star(body) = &items[1] else {
        panic!()
    };
    let Regex::Seq(body) = &**body else { panic!() };
    assert!(matches!(&body[..], [Regex::Elem(a), Regex::Elem(b)] if a.stmt == h2 && b.stmt == h3));
    assert_eq!(hr.exit.as_ref().map(|e| e.stmt), Some(one));

    let t = proc(&p, "translateAddress");
    let ta = &fp.procs[1];
    let t1 = StmtRef { pc: 0, arm: None };
    assert_eq!(
        ta.stmts,
        [
            t1,
            StmtRef {
                pc: label(t, 2),
                arm: None
            }
        ]
    );
    assert_eq!(ta.start.stmt, t1);
    assert_eq!(
        ta.start.partner,
        Some((0, h1)),
        "the alias of another process is visible"
    );
    assert_eq!(ta.exit.as_ref().map(|e| e.stmt), Some(t1));
    assert!(ta.follows.is_none());

    let n = proc(&p, "networkSend");
    let ns = &fp.procs[2];
    assert_eq!(
        ns.stmts,
        [
            StmtRef { pc: 0, arm: None },
            StmtRef {
                pc: label(n, 3),
                arm: None
            }
        ]
    );
    assert_eq!(ns.start.stmt, StmtRef { pc: 0, arm: None });
}

const PIPE: &str = "
channel src(int) external in;
channel mid(int, int);
channel dst(int) external out;
process A { constant LIMIT = 10; var x, n;
  while (true) { in(src, x); #1 out(mid, x, n); n = n + 1; if (n == LIMIT) { #2 n = 0; } }
}
process B { var a, b;
  while (true) { in(mid, a, b); out(dst, a + b); }
}";

#[test]
fn spec_syntax_optional_predicates_partners_and_yield() {
    use esp::spec::Regex;
    let p = compile(PIPE);
    let s = spec(
        &p,
        "// two fast paths in one file
         fastpath one {
           process A { statement src as S, mid as M, #2;
                       start S ? (x != LIMIT);
                       follows (#1 M yield B | M ? (n > 0))+ #2? M?;
                       exit #2 ? (n == LIMIT); }
           process B { start mid <=> M yield A; follows dst*; }
         }
         fastpath two { process B { statement dst; start mid ? (a) <=> mid; } process A { start mid; } }",
    );
    assert_eq!(s.fastpaths.len(), 2);
    let a = &s.fastpaths[0].procs[0];
    let pa = proc(&p, "A");
    let m = StmtRef { pc: 2, arm: None };
    let src_stmt = StmtRef { pc: 0, arm: None };
    let two = StmtRef {
        pc: label(pa, 2),
        arm: None,
    };
    let one = StmtRef {
        pc: label(pa, 1),
        arm: None,
    };
    assert_eq!(
        a.stmts,
        [src_stmt, m, two, one],
        "start/follows/exit statements are added"
    );
    assert_eq!(
        a.start.pred,
        Some(bin(BinOp::Ne, Expr::Var(0), Expr::Const(10))),
        "constants fold"
    );
    let Some(Regex::Seq(items)) = &a.follows else {
        panic!()
    };
    assert_eq!(items.len(), 3);
    let Regex::Plus(alt) = &items[0] else {
        panic!("{:?}", items[0])
    };
    let Regex::Alt(arms) = &**alt else { panic!() };
    let Regex::Seq(first) = &arms[0] else {
        panic!()
    };
    assert!(matches!(&first[1], Regex::Elem(e) if e.stmt == m && e.yield_to == Some(1)));
    assert!(matches!(&arms[1], Regex::Elem(e) if e.stmt == m && e.pred.is_some()));
    assert!(matches!(&items[1], Regex::Opt(r) if matches!(&**r, Regex::Elem(e) if e.stmt == two)));
    assert!(matches!(&items[2], Regex::Opt(r) if matches!(&**r, Regex::Elem(e) if e.stmt == m)));
    assert!(a.exit.as_ref().unwrap().pred.is_some());

    let b = &s.fastpaths[0].procs[1];
    assert_eq!(b.start.partner, Some((0, m)));
    assert_eq!(b.start.yield_to, Some(0));
    assert_eq!(b.stmts.len(), 2);

    let b2 = &s.fastpaths[1].procs[0];
    assert_eq!(
        b2.start.partner,
        Some((0, m)),
        "a partner named by its channel"
    );
    assert_eq!(b2.start.pred, Some(Expr::Var(0)));
    assert_eq!(s.fastpaths[1].procs[1].proc, 0);
}

#[test]
fn question_mark_is_a_predicate_only_right_after_the_statement() {
    use esp::spec::Regex;
    let p = compile(PIPE);
    let s = spec(
        &p,
        "fastpath f { process A { statement mid as M; start src; }
                      process B { start mid; follows mid <=> M ? (dst)* dst ? (b > 0) (dst)?; } }",
    );
    let Some(Regex::Seq(items)) = &s.fastpaths[0].procs[1].follows else {
        panic!()
    };
    assert_eq!(items.len(), 4, "{items:?}");
    assert!(
        matches!(&items[0], Regex::Opt(r) if matches!(&**r, Regex::Elem(e) if e.partner.is_some() && e.pred.is_none()))
    );
    assert!(matches!(&items[1], Regex::Star(_)));
    assert!(matches!(&items[2], Regex::Elem(e) if e.pred.is_some()));
    assert!(matches!(&items[3], Regex::Opt(r) if matches!(&**r, Regex::Elem(_))));
}

#[test]
fn alt_arms_are_statements_of_their_own() {
    let p = compile(
        "channel a(int) external in; channel b(int) external in; channel c(int);
         process P { var x; while (true) { alt { in(a, x) { out(c, x); } in(b, x) { out(c, x); } } } }
         process Q { var y; while (true) { in(c, y); } }",
    );
    let s = spec(
        &p,
        "fastpath f { process P { statement a, b; start a; follows b*; } }",
    );
    let pp = &s.fastpaths[0].procs[0];
    assert_eq!(
        pp.stmts,
        [
            StmtRef {
                pc: 0,
                arm: Some(0)
            },
            StmtRef {
                pc: 0,
                arm: Some(1)
            }
        ]
    );
    let e = esp::spec::parse("fastpath f { process P { start c; } }", &p).unwrap_err();
    assert_eq!(
        e.to_string(),
        "1:32: fast-path specification: channel `c` names 2 statements of process `P` (at 2:61, 2:85); put a `#N` label just before the one you mean and name `#N`: its event is control reaching that statement, before the communication (so it cannot be a `<=>` partner)"
    );
}

#[test]
fn spec_errors_say_what_and_where() {
    let cases: &[(&str, &str)] = &[
        (
            "fastpath f { process C { start src; } }",
            "1:22: process `C` is not declared in the program",
        ),
        (
            "fastpath f { process A { start nope; } }",
            "1:32: `nope` is neither a channel nor an alias of fast path `f`",
        ),
        (
            "fastpath f { process A { start dst; } }",
            "1:32: process `A` has no `in` or `out` on channel `dst`",
        ),
        (
            "fastpath f { process A { start #7; } }",
            "1:32: process `A` has no label #7",
        ),
        (
            "fastpath f { process A { statement src; } }",
            "1:14: process `A` of fast path `f` has no `start` field",
        ),
        (
            "fastpath f { process A { start src; start src; } }",
            "1:37: process `A` has a second `start` field",
        ),
        (
            "fastpath f { process A { start src; } process A { start mid; } }",
            "1:47: process `A` appears twice in fast path `f` (first at 1:14)",
        ),
        (
            "fastpath f { process A { start src; } } fastpath f { process A { start src; } }",
            "1:50: fast path `f` is already defined at 1:1",
        ),
        (
            "fastpath f { process A { statement src as S, mid as S; start S; } }",
            "1:53: alias `S` is already defined at 1:43",
        ),
        (
            "fastpath f { process A { statement src as mid; start src; } }",
            "1:43: alias `mid` is the name of a channel",
        ),
        (
            "fastpath f { process A { statement src as S; start S; } process B { start S; } }",
            "1:75: `S` names a statement of process `A`, not of `B`",
        ),
        (
            "fastpath f { process A { start src ? (y > 0); } }",
            "1:39: variable `y` is not declared",
        ),
        (
            "fastpath f { process A { start src ? (f(x)); } }",
            "1:39: a predicate cannot call host function `f`",
        ),
        (
            "fastpath f { process A { start src yield B; } }",
            "1:42: `yield B`: process `B` is not on fast path `f`",
        ),
        (
            "fastpath f { process A { start #1 <=> mid; } process B { start mid; } }",
            "1:32: `<=>` needs a channel statement, and `#1` is not one (a `#N` label names a point, reached before any communication); name the statement by its channel or an alias of it",
        ),
        (
            "fastpath f { process A { start mid <=> src; } process B { start mid; } }",
            "1:40: no other process of fast path `f` has a matching operation on channel `src`",
        ),
        (
            "fastpath f { process A { statement src as S; start mid <=> S; } process B { start mid; } }",
            "1:60: `S` is a statement of the same process; a partner is in another process",
        ),
        (
            "fastpath f { process A { start mid <=> dst; } process B { statement dst as D; start mid; } }",
            "1:40: no other process of fast path `f` has a matching operation on channel `dst`",
        ),
        (
            "fastpath f { process A { start mid <=> D; } process B { statement dst as D; start mid; } }",
            "1:40: `D` is on channel `dst` but `mid` is on channel `mid`",
        ),
        (
            "fastpath f { process A { start mid <=> #1; } }",
            "1:40: a `<=>` partner is a channel statement of another process, named by its channel or an alias of it; a `#N` label names a point, not a communication",
        ),
        (
            "fastpath f { process A { start src; follows ; } }",
            "1:45: expected a statement element or `(`, found `;`",
        ),
        (
            "fastpath f { process A { start src; follows (src | ); } }",
            "1:52: expected a statement element or `(`, found `)`",
        ),
        (
            "fastpath f { process A { start src ? (x) ? (x); } }",
            "1:42: expected `;`, found `?`",
        ),
        (
            "fastpath f { process A { begin src; } }",
            "1:26: expected `statement`, `start`, `follows`, `exit` or `}`, found `begin`",
        ),
        ("fastpath f { }", "1:1: fast path `f` names no process"),
        (
            "fastpath f { process A { start src } }",
            "1:36: expected `;`, found `}`",
        ),
        (
            "fastpath f { process A { start src; } } $",
            "1:41: unexpected character `$`",
        ),
        ("process A { }", "1:1: expected `fastpath`, found `process`"),
    ];
    for (src, want) in cases {
        let got = spec_error(PIPE, src);
        assert_eq!(
            got,
            format!(
                "{}: fast-path specification: {}",
                &want[..want.find(": ").unwrap()],
                &want[want.find(": ").unwrap() + 2..]
            ),
            "\n{src}"
        );
    }
}

#[test]
fn an_empty_specification_has_no_fast_paths() {
    let p = compile(PIPE);
    assert!(spec(&p, "  // nothing\n").fastpaths.is_empty());
}

#[test]
fn schedule_chooses_the_policy_of_symbolic_execution() {
    use esp::spec::Schedule;
    let p = compile(PIPE);
    let body = "process A { start src; } process B { start mid; }";
    let default = spec(&p, &format!("fastpath f {{ {body} }}"));
    assert_eq!(default.fastpaths[0].schedule, Schedule::Fifo);
    let fifo = spec(&p, &format!("fastpath f {{ schedule fifo; {body} }}"));
    assert_eq!(fifo.fastpaths[0].schedule, Schedule::Fifo);
    let down = spec(&p, &format!("fastpath f {{ schedule downstream; {body} }}"));
    assert_eq!(down.fastpaths[0].schedule, Schedule::DownstreamFirst);
    assert_eq!(
        spec_error(
            PIPE,
            "fastpath f {\n  schedule sideways;\n  process A { start src; }\n}"
        ),
        "2:12: fast-path specification: expected `fifo` or `downstream` after `schedule`, found `sideways`"
    );
    // `yield` steers the default policy only.
    assert_eq!(
        spec_error(
            PIPE,
            "fastpath f {\n  schedule downstream;\n  process A { start src; follows mid yield B; }\n  process B { start mid; }\n}"
        ),
        "2:3: fast-path specification: fast path `f` uses `yield`, which only steers the default schedule: drop `schedule downstream;` or the `yield`s"
    );
}

/// `#N` names a point, a no-op where the label stands, whose event is control
/// reaching it. The advice of the ambiguous-channel error works: a label put
/// just before the meant statement names it as an event, and the program
/// runs the same with that specification. A label, directly or through an
/// alias, is refused as a `<=>` partner with what to use instead.
#[test]
fn a_label_names_a_point_and_is_refused_as_a_partner() {
    let text = "channel i(int) external in; channel c(int); channel o(int) external out;
         process P { var x; while (true) { in(i, x); out(c, x); #1 out(c, x + 1); } }
         process Q { var y; while (true) { in(c, y); #2 out(o, y); } }";
    let p = compile(text);
    let e = esp::spec::parse("fastpath f { process P { start c; } }", &p).unwrap_err();
    assert!(
        e.to_string()
            .contains("put a `#N` label just before the one you mean"),
        "{e}"
    );
    // The advice followed: `#1` stands for the second `out` as an event.
    let s = spec(
        &p,
        "fastpath f { process P { statement i, #1; start i; follows #1; exit i; } process Q { statement c as QC, #2; start QC; follows (#2 QC)*; } }",
    );
    let pp = &s.fastpaths[0].procs[0];
    let label_pc = p.processes[0]
        .nodes
        .iter()
        .position(|n| n.label == Some(1))
        .unwrap() as u32;
    assert!(pp.stmts.contains(&StmtRef {
        pc: label_pc,
        arm: None
    }));
    let run = |spec: Option<esp::spec::Spec>| {
        let mut m = esp::runtime::Machine::new(
            compile(text),
            esp::runtime::Options {
                spec,
                ..esp::runtime::Options::default()
            },
        )
        .unwrap();
        for v in 0..50 {
            m.push("i", &[v * 10]).unwrap();
        }
        m.run().unwrap();
        m.take_output("o").unwrap()
    };
    assert_eq!(run(Some(s)), run(None));
    // An alias of a label as a partner: refused, saying what to use.
    let e = esp::spec::parse(
        "fastpath f { process P { statement #1 as TO; start i; } process Q { start c <=> TO; } }",
        &p,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "1:81: fast-path specification: `TO` names label #1 of process `P`, a point and not a communication; a `<=>` partner is a channel statement, named by its channel or an alias of it"
    );
}
