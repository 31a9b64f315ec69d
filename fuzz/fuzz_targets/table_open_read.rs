//! The `table_open_read` target: its input and oracles are in
//! `crates/tfrecord-lirs-fuzz-oracles/src/table_open_read.rs`, shared with the regression replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tfrecord_lirs_fuzz_oracles::table_open_read;

fuzz_target!(|input: table_open_read::Input| {
    table_open_read::check(&input);
});
