//! The inputs and oracles of the fuzz targets in `fuzz/`, in one place for the two
//! callers: the libFuzzer targets (`fuzz/fuzz_targets/*.rs`, each a one-line call into
//! a module here) and `tests/regressions.rs`, which replays every input under
//! `fuzz/regressions/TARGET/` through the same oracle in a plain `cargo test`.
//!
//! An oracle reports a violation by panicking (what libFuzzer records as a crash).
//! Each module has the target's `Input` (decoded from libFuzzer's bytes as
//! `libfuzzer-sys` does, see [`replay`]) and its `check`.
//!
//! `publish = false` and no shipped crate depends on it: nothing here reaches users.

pub mod common;
pub mod cursor_state;
pub mod pad_compressed;
pub mod padded_writer;
pub mod record_decoder;
pub mod table_open_read;
pub mod text_index_import;

use arbitrary::{Arbitrary, Unstructured};

/// The fuzz targets, by the name of their binary in `fuzz/Cargo.toml` (and of their
/// directory under `fuzz/regressions/`).
pub const TARGETS: [&str; 6] = [
    "record_decoder",
    "table_open_read",
    "padded_writer",
    "text_index_import",
    "pad_compressed",
    "cursor_state",
];

/// `bytes` as `libfuzzer-sys`' `fuzz_target!(|input: T| ...)` decodes them: `None`
/// (the input is skipped) when there are fewer bytes than `T` needs at least, or they
/// do not decode.
pub fn decode<T: for<'a> Arbitrary<'a>>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < T::size_hint(0).0 {
        return None;
    }
    T::arbitrary_take_rest(Unstructured::new(bytes)).ok()
}

/// Runs one libFuzzer input of `target` through that target's oracle, exactly as the
/// fuzz target does. Panics on a violation; `Err` for an unknown target.
pub fn replay(target: &str, bytes: &[u8]) -> Result<(), String> {
    fn typed<T: for<'a> Arbitrary<'a>>(bytes: &[u8], check: fn(&T)) {
        if let Some(input) = decode::<T>(bytes) {
            check(&input);
        }
    }
    match target {
        "record_decoder" => record_decoder::check(bytes),
        "table_open_read" => typed(bytes, table_open_read::check),
        "padded_writer" => typed(bytes, padded_writer::check),
        "text_index_import" => typed(bytes, text_index_import::check),
        "pad_compressed" => typed(bytes, pad_compressed::check),
        "cursor_state" => typed(bytes, cursor_state::check),
        other => return Err(format!("no fuzz target {other:?} (known: {TARGETS:?})")),
    }
    Ok(())
}
