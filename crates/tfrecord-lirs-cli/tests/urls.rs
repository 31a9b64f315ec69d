//! The CLI reads local files and object storage (s3://, gs://, az://, http(s)://,
//! through the core's object_store client; tested against a real S3 server from
//! Python, tests/test_cli_object_store.py). A URL of any other scheme (TensorFlow's
//! `ram://`, `hdfs://`) is a usage error (exit 2) that says so and names the URL, never
//! a "No such file or directory" for a local path.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tfrecord-lirs");

#[test]
fn urls_of_schemes_object_storage_does_not_serve_are_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("x.tfrecord");
    std::fs::write(&local, b"").unwrap();
    let local = local.to_str().unwrap();
    for args in [
        vec!["index", "ram://bucket/x.tfrecord"],
        vec!["info", "ram://x.tfrecord"],
        vec!["get", "hdfs://nn/x", "0"],
        vec!["pad", local, "ram://out.tfrecord"],
        vec!["index", local, "--out=hdfs://nn/x.offsets"],
        vec!["verify", local, "--offsets", "zz://b/x.offsets"],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let url = args
            .iter()
            .map(|a| a.trim_start_matches("--out="))
            .find(|a| a.contains("://"))
            .unwrap();
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && first.contains(url),
            "{args:?}: {err}"
        );
        assert!(
            first.contains("local files and object storage only"),
            "{args:?}: {err}"
        );
        let scheme = url.split("://").next().unwrap();
        assert!(first.contains(&format!("{scheme}://")), "{args:?}: {err}");
    }
}

#[test]
fn text_index_import_takes_local_files_only() {
    let out = Command::new(BIN)
        .args(["index", "s3://b/x.tfrecord", "x.idx", "--from", "dali"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--from FORMAT reads a local data file"),
        "{err}"
    );
}
