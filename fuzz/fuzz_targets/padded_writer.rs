//! The `padded_writer` target: its input and oracles are in
//! `crates/tfrecord-lirs-fuzz-oracles/src/padded_writer.rs`, shared with the regression replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tfrecord_lirs_fuzz_oracles::padded_writer;

fuzz_target!(|input: padded_writer::Input| {
    padded_writer::check(&input);
});
