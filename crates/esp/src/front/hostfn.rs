//! Host functions written as ESP expressions, for hosts that have no Rust
//! code to bind (the `fastpath esp run --extern 'f(a)=a+1'` command line).

use crate::error::{Error, Result};
use crate::ir::{Expr, NodeKind, Pos};

/// A host function defined by an expression of its parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct HostFn {
    name: String,
    params: usize,
    /// The parameters, the result and the temporaries.
    slots: usize,
    /// Assignments run in order; the last one to slot `params` is the value.
    body: Vec<(u32, Expr)>,
}

impl HostFn {
    /// Parses `NAME(A, B, ...) = EXPR`, where `EXPR` is an ESP expression
    /// over the parameters (no host calls). Errors give the column within
    /// `def`.
    ///
    /// ```
    /// let f = esp::hostfn::HostFn::parse("translate(a) = a + 0x1000")?;
    /// assert_eq!((f.name(), f.arity()), ("translate", 1));
    /// assert_eq!(f.call(&[5]), Ok(0x1005));
    /// # Ok::<(), esp::Error>(())
    /// ```
    pub fn parse(def: &str) -> Result<HostFn> {
        let at = |col: usize, msg: String| Error::Syntax {
            pos: Pos {
                line: 1,
                col: col as u32 + 1,
            },
            msg,
        };
        let eq = def
            .find('=')
            .ok_or_else(|| at(def.len(), "expected `NAME(PARAMS) = EXPRESSION`".into()))?;
        let (head, body) = (&def[..eq], &def[eq + 1..]);
        let open = head
            .find('(')
            .ok_or_else(|| at(eq, "expected `(` and the parameters before `=`".into()))?;
        let name = head[..open].trim();
        let valid = |s: &str| {
            s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !valid(name) {
            return Err(at(0, format!("{name:?} is not a function name")));
        }
        let close = head
            .rfind(')')
            .filter(|&c| c > open && head[c + 1..].trim().is_empty())
            .ok_or_else(|| at(eq, "expected `)` after the parameters".into()))?;
        let params: Vec<&str> = head[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        if let Some(bad) = params.iter().find(|p| !valid(p) || **p == "result") {
            return Err(at(open + 1, format!("{bad:?} is not a parameter name")));
        }
        // The body is checked as the right-hand side of an assignment in a
        // one-process program; its columns map back into `def`.
        let prefix = format!(
            "process host {{ var {} result; result = ",
            params.iter().map(|p| format!("{p}, ")).collect::<String>()
        );
        let src = format!("{prefix}{body}; }}");
        let shift = |pos: Pos| Pos {
            line: 1,
            col: (pos.col as usize).saturating_sub(prefix.len()) as u32 + eq as u32 + 1,
        };
        let program = crate::compile(&src).map_err(|e| match e {
            Error::Syntax { pos, msg } => Error::Syntax {
                pos: shift(pos),
                msg,
            },
            Error::Check { pos, msg } => Error::Check {
                pos: shift(pos),
                msg,
            },
            other => other,
        })?;
        let process = &program.processes[0];
        let result = params.len() as u32;
        // The assignments in order: a long chain is lowered to steps into
        // temporaries before the one to `result`.
        let body: Vec<(u32, Expr)> = process
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                NodeKind::Assign { var, value, .. } => Some((*var, value.clone())),
                _ => None,
            })
            .collect();
        if !body.iter().any(|(var, _)| *var == result) {
            return Err(at(eq + 1, "expected an expression".into()));
        }
        if body.iter().any(|(_, v)| v.has_call()) {
            return Err(at(
                eq + 1,
                "a host function defined here cannot call host functions".into(),
            ));
        }
        Ok(HostFn {
            name: name.to_string(),
            params: params.len(),
            slots: process.vars.len(),
            body,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many parameters it takes.
    pub fn arity(&self) -> usize {
        self.params
    }

    /// Evaluates it; a division by zero is an error.
    pub fn call(&self, args: &[i64]) -> std::result::Result<i64, String> {
        let mut vars = args.to_vec();
        vars.resize(self.slots.max(self.params + 1), 0);
        for (var, value) in &self.body {
            vars[*var as usize] = value
                .eval(&vars, &mut |_, _| 0)
                .ok_or_else(|| "division by zero".to_string())?;
        }
        Ok(vars[self.params])
    }
}
