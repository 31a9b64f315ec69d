//! The `pad_compressed` target: its input and oracles are in
//! `crates/tfrecord-lirs-fuzz-oracles/src/pad_compressed.rs`, shared with the regression replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tfrecord_lirs_fuzz_oracles::pad_compressed;

fuzz_target!(|input: pad_compressed::Input| {
    pad_compressed::check(&input);
});
