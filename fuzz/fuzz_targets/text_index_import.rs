//! The `text_index_import` target: its input and oracles are in
//! `crates/tfrecord-lirs-fuzz-oracles/src/text_index_import.rs`, shared with the regression replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tfrecord_lirs_fuzz_oracles::text_index_import;

fuzz_target!(|input: text_index_import::Input| {
    text_index_import::check(&input);
});
