//! vcode: in-place dynamic code generation (work in progress).
