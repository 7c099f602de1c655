//! (being written)

/// Parses and checks a program.
pub fn compile(_src: &str) -> crate::Result<crate::ir::Program> {
    todo!()
}
