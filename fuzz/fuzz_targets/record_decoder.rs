//! The `record_decoder` target: its input and oracles are in
//! `crates/tfrecord-lirs-fuzz-oracles/src/record_decoder.rs`, shared with the regression replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tfrecord_lirs_fuzz_oracles::record_decoder;

fuzz_target!(|data: &[u8]| {
    record_decoder::check(data);
});
