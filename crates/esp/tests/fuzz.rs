//! Parser fuzzing: random bytes, token soup, and mutated valid programs and
//! specifications never panic; whatever is accepted satisfies the
//! invariants of `esp::ir` (and a specification refers only to statements
//! that exist). Random expressions parse with C's precedence and fold to
//! the value Rust computes.

use esp::ir::*;
use proptest::prelude::*;

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
        }
        #1
      }
      in( hostFetchRequestC, source) { }
    }
  }
}
process translateAddress {
  constant pageSize = 4096;
  var virtualAddress, physicalAddress, size;
  while (true) {
    in( translateRequestC, virtualAddress, size);
    assert( virtualAddress % pageSize == 0);
    assert( size % pageSize == 0);
    while ( size > 0) {
      if ( translationUnavailable(virtualAddress)) { #2 }
      physicalAddress = translate( virtualAddress);
      out( translateReplyC, physicalAddress + 0x10 * 'a', pageSize);
      size = size - pageSize;
    }
    out( translateReplyC, 0, 0); // Done
  }
}
process networkSend {
  var physicalAddress, size, packet;
  while (true) {
    in( dataSendC, physicalAddress, size);
    packet = preparePacket( physicalAddress, size);
    out( networkSendC, -packet); #3
  }
}
"#;

const FIGURE5: &str = r#"
fastpath demo {
  process hostRequest {
    statement  hostSendRequestC as H0, translateRequestC as H1,
               translateReplyC as H2, dataSendC as H3, #1;
    start      H0 ? (size < 10000 && !(virtualAddress & 7));
    follows    H1 ( H2 H3 yield networkSend | H2 ? (size == 0) )* H2? ;
    exit       #1;
  }
  process translateAddress {
    statement  translateRequestC as T1, #2;
    start      T1 <=> H1;
    exit       T1 ? (pageSize > 0);
  }
  process networkSend { statement dataSendC, #3; start dataSendC <=> H3; follows #3+; exit #3; }
}
"#;

/// Checks every invariant `esp::ir` promises.
fn validate(p: &Program) {
    for proc in &p.processes {
        let n = proc.nodes.len() as Pc;
        assert_eq!(proc.entry, 0);
        assert!(n > 0 && proc.nodes.iter().any(|x| x.kind == NodeKind::Halt));
        let nvars = proc.vars.len() as u32;
        let expr = |e: &Expr| {
            e.for_each_var(&mut |v| assert!(v < nvars));
            check_calls(p, e);
        };
        let comm = |c: &Comm| {
            let ch = &p.channels[c.chan() as usize];
            match c {
                Comm::In { vars, .. } => {
                    assert_ne!(ch.kind, ChanKind::ExternalOut);
                    assert_eq!(vars.len() as u32, ch.arity);
                    assert!(vars.iter().all(|&v| v < nvars));
                }
                Comm::Out { args, .. } => {
                    assert_ne!(ch.kind, ChanKind::ExternalIn);
                    assert_eq!(args.len() as u32, ch.arity);
                    assert!(
                        args.iter()
                            .all(|a| !matches!(a, Operand::Var(v) if *v >= nvars))
                    );
                }
            }
        };
        let mut labels = std::collections::HashSet::new();
        for node in &proc.nodes {
            if let Some(l) = node.label {
                assert!(labels.insert(l));
                assert!(matches!(node.kind, NodeKind::Nop { .. }));
            }
            match &node.kind {
                NodeKind::Assign { var, value, next } => {
                    assert!(*var < nvars && *next < n);
                    expr(value);
                }
                NodeKind::Eval { value, next } | NodeKind::Assert { cond: value, next } => {
                    assert!(*next < n);
                    expr(value);
                }
                NodeKind::Branch { cond, then, els } => {
                    assert!(*then < n && *els < n);
                    expr(cond);
                }
                NodeKind::Nop { next } => assert!(*next < n),
                NodeKind::Comm { op, next } => {
                    assert!(*next < n);
                    comm(op);
                }
                NodeKind::Alt { arms } => {
                    assert!(!arms.is_empty());
                    for a in arms {
                        assert!(a.next < n);
                        comm(&a.op);
                    }
                }
                NodeKind::Halt => {}
            }
        }
    }
}

fn check_calls(p: &Program, e: &Expr) {
    match e {
        Expr::Const(_) | Expr::Var(_) => {}
        Expr::Unary(_, a) => check_calls(p, a),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            check_calls(p, a);
            check_calls(p, b);
        }
        Expr::Call(f, args) => {
            assert_eq!(p.externs[*f as usize].arity as usize, args.len());
            args.iter().for_each(|a| check_calls(p, a));
        }
    }
}

/// Checks that a specification refers only to what exists.
fn validate_spec(p: &Program, s: &esp::spec::Spec) {
    use esp::spec::{Element, Regex};
    fn stmt(p: &Program, proc: ProcId, s: StmtRef) {
        let node = &p.processes[proc as usize].nodes[s.pc as usize];
        match (s.arm, &node.kind) {
            (None, _) => {}
            (Some(i), NodeKind::Alt { arms }) => assert!((i as usize) < arms.len()),
            (Some(_), k) => panic!("arm of {k:?}"),
        }
    }
    fn elem(p: &Program, proc: ProcId, e: &Element) {
        stmt(p, proc, e.stmt);
        if let Some((q, s)) = e.partner {
            assert_ne!(q, proc);
            stmt(p, q, s);
        }
        if let Some(pred) = &e.pred {
            pred.for_each_var(&mut |v| {
                assert!((v as usize) < p.processes[proc as usize].vars.len())
            });
        }
    }
    fn regex(p: &Program, proc: ProcId, r: &Regex) {
        match r {
            Regex::Elem(e) => elem(p, proc, e),
            Regex::Seq(rs) | Regex::Alt(rs) => rs.iter().for_each(|r| regex(p, proc, r)),
            Regex::Star(r) | Regex::Plus(r) | Regex::Opt(r) => regex(p, proc, r),
        }
    }
    for fp in &s.fastpaths {
        for ps in &fp.procs {
            elem(p, ps.proc, &ps.start);
            assert!(ps.stmts.contains(&ps.start.stmt));
            ps.stmts.iter().for_each(|&s| stmt(p, ps.proc, s));
            if let Some(r) = &ps.follows {
                regex(p, ps.proc, r);
            }
            if let Some(e) = &ps.exit {
                elem(p, ps.proc, e);
                assert!(ps.stmts.contains(&e.stmt));
            }
        }
    }
}

/// Compiles; whatever is accepted must be valid, whatever is refused must
/// say where.
fn try_program(src: &str) -> Option<Program> {
    match esp::compile(src) {
        Ok(p) => {
            validate(&p);
            Some(p)
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.chars().next().is_some_and(|c| c.is_ascii_digit()),
                "no position: {msg}"
            );
            None
        }
    }
}

fn try_spec(src: &str, p: &Program) {
    match esp::spec::parse(src, p) {
        Ok(s) => validate_spec(p, &s),
        Err(e) => assert!(matches!(e, esp::Error::Spec { .. }), "{e:?}"),
    }
}

const WORDS: &[&str] = &[
    "channel",
    "extern",
    "external",
    "in",
    "out",
    "int",
    "process",
    "constant",
    "var",
    "if",
    "else",
    "while",
    "break",
    "alt",
    "assert",
    "true",
    "false",
    "fastpath",
    "statement",
    "start",
    "follows",
    "exit",
    "as",
    "yield",
    "a",
    "b",
    "c",
    "P",
    "Q",
    "f",
    "K",
    "hostRequest",
    "dataSendC",
    "size",
    "H1",
    "#1",
    "#2",
    "0",
    "1",
    "0x7E",
    "'a'",
    "9223372036854775807",
    "{",
    "}",
    "(",
    ")",
    ";",
    ",",
    "=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "<<",
    ">>",
    "<",
    "<=",
    ">",
    ">=",
    "==",
    "!=",
    "&",
    "|",
    "^",
    "&&",
    "||",
    "!",
    "~",
    "?",
    "<=>",
    "/*",
    "*/",
    "//",
    "\n",
    "'",
    "#",
    "$",
];

/// A valid little program with every construct, for mutation.
const SMALL: &str = "channel c(int, int); channel i(int) external in; channel o(int) external out; extern f(int);
process P { constant K = 3; var a, b; while (true) { in(i, a); #1 if (a > K) { out(c, a, f(a)); } else { out(c, -a, 0); } } }
process Q { var x, y; while (x < 100) { alt { in(c, x, y) { out(o, x + y); } in(i, y) { break; } } assert(x != 7); } #2 }";

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize, usize),
    Duplicate(usize, usize),
    Insert(usize, usize),
    Replace(usize, usize),
}

fn mutate(src: &str, muts: &[Mutation]) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for m in muts {
        let len = chars.len().max(1);
        match *m {
            Mutation::Delete(at, n) => {
                let at = at % len;
                let end = (at + n % 8).min(chars.len());
                chars.drain(at.min(chars.len())..end);
            }
            Mutation::Duplicate(at, n) => {
                let at = (at % len).min(chars.len());
                let end = (at + n % 16).min(chars.len());
                let piece: Vec<char> = chars[at..end].to_vec();
                chars.splice(at..at, piece);
            }
            Mutation::Insert(at, w) => {
                let at = (at % len).min(chars.len());
                let word: Vec<char> = format!(" {} ", WORDS[w % WORDS.len()]).chars().collect();
                chars.splice(at..at, word);
            }
            Mutation::Replace(at, w) => {
                let at = at % len;
                if at < chars.len() {
                    chars[at] = WORDS[w % WORDS.len()].chars().next().unwrap_or(' ');
                }
            }
        }
    }
    chars.into_iter().collect()
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, n)| Mutation::Duplicate(a, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, n)| Mutation::Insert(a, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, n)| Mutation::Replace(a, n)),
    ]
}

/// A random expression over constants, and its value (`None`: a division
/// by zero somewhere that is evaluated).
#[derive(Clone, Debug)]
enum E {
    Lit(i64),
    Un(&'static str, Box<E>),
    Bin(&'static str, Box<E>, Box<E>),
}

const BINS: &[(&str, u32)] = &[
    ("||", 1),
    ("&&", 2),
    ("|", 3),
    ("^", 4),
    ("&", 5),
    ("==", 6),
    ("!=", 6),
    ("<", 7),
    ("<=", 7),
    (">", 7),
    (">=", 7),
    ("<<", 8),
    (">>", 8),
    ("+", 9),
    ("-", 9),
    ("*", 10),
    ("/", 10),
    ("%", 10),
];

fn prec(op: &str) -> u32 {
    BINS.iter().find(|b| b.0 == op).map_or(11, |b| b.1)
}

impl E {
    fn eval(&self) -> Option<i64> {
        Some(match self {
            E::Lit(v) => *v,
            E::Un(op, a) => {
                let a = a.eval()?;
                match *op {
                    "-" => a.wrapping_neg(),
                    "!" => (a == 0) as i64,
                    _ => !a,
                }
            }
            E::Bin("&&", a, b) => (a.eval()? != 0 && b.eval()? != 0) as i64,
            E::Bin("||", a, b) => (a.eval()? != 0 || b.eval()? != 0) as i64,
            E::Bin(op, a, b) => {
                let (a, b) = (a.eval()?, b.eval()?);
                match *op {
                    "|" => a | b,
                    "^" => a ^ b,
                    "&" => a & b,
                    "==" => (a == b) as i64,
                    "!=" => (a != b) as i64,
                    "<" => (a < b) as i64,
                    "<=" => (a <= b) as i64,
                    ">" => (a > b) as i64,
                    ">=" => (a >= b) as i64,
                    "<<" => a.wrapping_shl((b & 63) as u32),
                    ">>" => a.wrapping_shr((b & 63) as u32),
                    "+" => a.wrapping_add(b),
                    "-" => a.wrapping_sub(b),
                    "*" => a.wrapping_mul(b),
                    "/" => a.checked_div(b).or(if b == -1 {
                        Some(a.wrapping_neg())
                    } else {
                        None
                    })?,
                    _ => a.checked_rem(b).or(if b == -1 { Some(0) } else { None })?,
                }
            }
        })
    }

    /// C text with only the parentheses precedence needs.
    fn show(&self, min: u32) -> String {
        match self {
            E::Lit(v) if *v < 0 => {
                format!("({v})").replace("(-9223372036854775808)", "(-9223372036854775807 - 1)")
            }
            E::Lit(v) => v.to_string(),
            E::Un(op, a) => format!("{op}{}", a.show(11)),
            E::Bin(op, a, b) => {
                let p = prec(op);
                let s = format!("{} {op} {}", a.show(p), b.show(p + 1));
                if p < min { format!("({s})") } else { s }
            }
        }
    }
}

fn expr() -> impl Strategy<Value = E> {
    let leaf = prop_oneof![
        (-3i64..70).prop_map(E::Lit),
        any::<i64>().prop_map(E::Lit),
        Just(E::Lit(i64::MIN)),
        Just(E::Lit(-1)),
    ];
    leaf.prop_recursive(6, 40, 2, |inner| {
        prop_oneof![
            (prop::sample::select(vec!["-", "!", "~"]), inner.clone())
                .prop_map(|(op, a)| E::Un(op, Box::new(a))),
            (
                prop::sample::select(BINS.iter().map(|b| b.0).collect::<Vec<_>>()),
                inner.clone(),
                inner
            )
                .prop_map(|(op, a, b)| E::Bin(op, Box::new(a), Box::new(b))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let src = String::from_utf8_lossy(&bytes);
        try_program(&src);
        try_spec(&src, &esp::compile(FIGURE2).unwrap());
    }

    #[test]
    fn token_soup_never_panics(words in prop::collection::vec(0..WORDS.len(), 0..80)) {
        let src: String = words.iter().map(|&w| WORDS[w]).collect::<Vec<_>>().join(" ");
        try_program(&src);
        let program = esp::compile(FIGURE2).unwrap();
        try_spec(&src, &program);
        try_spec(&format!("fastpath f {{ process hostRequest {{ {src} }} }}"), &program);
    }

    #[test]
    fn mutated_programs_never_panic(base in 0..2usize, muts in prop::collection::vec(mutation(), 1..6)) {
        let src = mutate([FIGURE2, SMALL][base], &muts);
        if let Some(p) = try_program(&src) {
            try_spec(FIGURE5, &p);
        }
    }

    #[test]
    fn mutated_specs_never_panic(muts in prop::collection::vec(mutation(), 1..6)) {
        let program = esp::compile(FIGURE2).unwrap();
        try_spec(&mutate(FIGURE5, &muts), &program);
    }

    #[test]
    fn expressions_parse_with_c_precedence_and_fold_exactly(e in expr()) {
        let src = format!("channel o(int) external out; process P {{ var x; x = {}; out(o, x); }}", e.show(0));
        let p = esp::compile(&src).unwrap();
        let NodeKind::Assign { value, .. } = &p.processes[0].nodes[0].kind else { panic!() };
        match e.eval() {
            Some(v) => prop_assert_eq!(value, &Expr::Const(v), "{}", e.show(0)),
            // A division by zero is left for run time, and evaluates to the error.
            None => prop_assert_eq!(value.eval(&[], &mut |_, _| 0), None),
        }
    }
}

#[test]
fn the_fuzzed_bases_are_valid() {
    let p = try_program(FIGURE2).unwrap();
    let s = esp::spec::parse(FIGURE5, &p).unwrap();
    validate_spec(&p, &s);
    assert!(try_program(SMALL).is_some());
}
