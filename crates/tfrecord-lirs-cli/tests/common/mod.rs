//! What every CLI test needs: the built binary, run with arguments, and its output as text.
// Each test file uses its own subset.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_tfrecord-lirs");

/// Runs `tfrecord-lirs ARGS...` to completion.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// A test path as the `&str` argument a command takes.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
