// Generates the C++ side of the bridge. The header lands in
// $CARGO_TARGET_DIR/cxxbridge/tfrecord-lirs-ffi/src/lib.rs.h (plus
// $CARGO_TARGET_DIR/cxxbridge/rust/cxx.h); the shim object is bundled into the
// staticlib, so tf_op/ only needs the headers and libtfrecord_lirs_ffi.a.
fn main() {
    cxx_build::bridge("src/lib.rs")
        .std("c++17")
        .flag_if_supported("-fPIC")
        .compile("tfrecord_lirs_ffi_bridge");
    println!("cargo:rerun-if-changed=src/lib.rs");
}
