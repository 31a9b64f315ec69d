//! The CLI reads local files only: a URL argument is a usage error (exit 2) that says
//! so and names the URL, never a "No such file or directory" for a local path.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tfrecord-lirs");

#[test]
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
