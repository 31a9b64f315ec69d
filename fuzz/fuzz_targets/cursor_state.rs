//! The `cursor_state` target: its input and oracles are in
//! `crates/tfrecord-lirs-fuzz-oracles/src/cursor_state.rs`, shared with the regression replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tfrecord_lirs_fuzz_oracles::cursor_state;

fuzz_target!(|input: cursor_state::Input| {
    cursor_state::check(&input);
});
