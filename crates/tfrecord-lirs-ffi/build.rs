// Generates the C++ side of the bridge. The header lands in
// $CARGO_TARGET_DIR/cxxbridge/tfrecord-lirs-ffi/src/lib.rs.h (plus
// $CARGO_TARGET_DIR/cxxbridge/rust/cxx.h); the shim object is bundled into the
// staticlib, so tf_op/ only needs the headers and libtfrecord_lirs_ffi.a.
//
// With the feature `fault-injection`, the second bridge src/fault_injection.rs
// (test entry points) is generated and compiled too; without it, it does not exist.
fn main() {
    let mut bridges = vec!["src/lib.rs"];
    if std::env::var_os("CARGO_FEATURE_FAULT_INJECTION").is_some() {
        bridges.push("src/fault_injection.rs");
    }
    // With the feature `tensorflow`, the bridge to TensorFlow's file systems: its C++
    // side is declared in tf_op/lirs_tf_file.h (no TensorFlow header needed here) and
    // defined in tf_op/lirs_tf_file.cc, which only the op library compiles.
    let tensorflow = std::env::var_os("CARGO_FEATURE_TENSORFLOW").is_some();
    if tensorflow {
        bridges.push("src/tf_fs.rs");
        println!("cargo:rerun-if-changed=../../tf_op/lirs_tf_file.h");
    }
    cxx_build::bridges(&bridges)
        .include("../../tf_op")
        .std("c++17")
        .flag_if_supported("-fPIC")
        .compile("tfrecord_lirs_ffi_bridge");
    for bridge in &bridges {
        println!("cargo:rerun-if-changed={bridge}");
    }
}
