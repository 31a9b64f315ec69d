//! Without the cargo feature `object-store` the CLI reads local files only: a URL
//! argument is a usage error (exit 2) that says so and names the URL, never a "No such
//! file or directory" for a local path. With it, URLs of schemes object storage does not
//! serve are such usage errors (object storage itself: tests/without_tf/test_object_store.py).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tfrecord-lirs");

#[test]
#[cfg(not(feature = "object-store"))]
fn url_arguments_are_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("x.tfrecord");
    std::fs::write(&local, b"").unwrap();
    let local = local.to_str().unwrap();
    for args in [
        vec!["index", "gs://bucket/x.tfrecord"],
        vec!["info", "ram://x.tfrecord"],
        vec!["get", "s3://b/x", "0"],
        vec!["pad", local, "gs://bucket/out.tfrecord"],
        vec!["index", local, "--out=hdfs://nn/x.offsets"],
        vec!["verify", local, "--offsets", "gs://b/x.offsets"],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let url = args
            .iter()
            .map(|a| a.trim_start_matches("--out="))
            .find(|a| a.contains("://"));
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(url.unwrap()),
            "{args:?}: {err}"
        );
        assert!(first.contains("local files only"), "{args:?}: {err}");
    }
}

/// Built with object storage, the URLs it does not serve are still usage errors that
/// say where they can be read.
#[test]
#[cfg(feature = "object-store")]
fn unserved_url_schemes_are_refused_as_such() {
    for args in [
        vec!["info", "ram://x.tfrecord"],
        vec!["index", "hdfs://nn/x.tfrecord"],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains(args[1]), "{args:?}: {err}");
        assert!(
            first.contains("TensorFlow's file systems"),
            "{args:?}: {err}"
        );
    }
}
