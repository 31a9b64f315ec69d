//! The CLI's contract on edge cases: exit statuses (1 with one `error:` line naming
//! the file, 2 for usage errors), file modes of atomically written files, and paths
//! that would overwrite an input.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tfrecord_lirs::format;

mod common;

use common::{run, s, BIN};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(name)
}

/// Asserts exit status 1 and one `error:` line; returns that line.
fn failed(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    lines[0].to_string()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Runs the binary under `umask`.
fn run_with_umask(umask: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args);
    cmd.output().unwrap()
}

#[test]
fn index_refuses_a_leading_filler_naming_byte_0() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lead.tfrecord");
    let mut bytes = Vec::new();
    format::encode_filler(64, &mut bytes);
    format::encode_record(b"instance", &mut bytes);
    std::fs::write(&data, &bytes).unwrap();
    let line = failed(&run(&["index", s(&data)]));
    assert!(
        line.contains(s(&data))
            && line.contains("at byte 0")
            && line.contains("filler")
            && line.contains("tfrecord-lirs pad"),
        "{line}"
    );
    assert!(!dir.path().join("lead.tfrecord.offsets").exists());
    // Only fillers: the same.
    let only = dir.path().join("only.tfrecord");
    std::fs::write(&only, &bytes[..64]).unwrap();
    let line = failed(&run(&["index", s(&only)]));
    assert!(
        line.contains("at byte 0") && line.contains("only filler"),
        "{line}"
    );
    // And `pad` repairs it.
    let fixed = dir.path().join("fixed.tfrecord");
    ok(&run(&["pad", s(&data), s(&fixed)]));
    ok(&run(&["verify", s(&fixed)]));
}

/// testdata/mixed.tfrecord padded at `page`, with filler number `drop` removed if
/// given (and re-indexed).
fn padded_mixed(dir: &Path, page: u64, drop: Option<usize>) -> (PathBuf, Option<u64>) {
    let out = dir.join(format!("p{page}.tfrecord"));
    ok(&run(&[
        "pad",
        s(&testdata("mixed.tfrecord")),
        s(&out),
        "--page-size",
        &page.to_string(),
        // Called twice for one page size by a test: pad replaces only with --force.
        "--force",
    ]));
    let Some(drop) = drop else {
        return (out, None);
    };
    let bytes = std::fs::read(&out).unwrap();
    let (mut kept, mut at, mut fillers, mut dropped) = (Vec::new(), 0usize, 0, None);
    while at < bytes.len() {
        let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        let end = at + len + 16;
        let filler = bytes[at + 12..end - 4].starts_with(format::FILLER_MAGIC);
        if filler && fillers == drop {
            dropped = Some(at as u64);
        } else {
            kept.extend_from_slice(&bytes[at..end]);
        }
        fillers += usize::from(filler);
        at = end;
    }
    std::fs::write(&out, kept).unwrap();
    ok(&run(&["index", s(&out)]));
    (out, dropped)
}

#[test]
fn verify_without_page_size_checks_the_page_size_of_the_fillers() {
    let dir = tempfile::tempdir().unwrap();
    for page in [512u64, 4096, 65536] {
        let (data, _) = padded_mixed(dir.path(), page, None);
        let text = ok(&run(&["verify", s(&data)]));
        assert!(
            text.contains(&format!("padded for page size {page}")),
            "{text}"
        );
        let info = ok(&run(&["info", s(&data)]));
        assert!(
            info.contains(&format!("padded: yes, for page size {page}")),
            "{info}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&ok(&run(&["info", s(&data), "--json"]))).unwrap();
        assert_eq!(json["padded_page_size"], page);
        assert_eq!(json["page_size"], page);
    }
    // The reproduction: a 4096-padded file missing its first filler used to verify
    // as "padded for page size 262144".
    let (data, dropped) = padded_mixed(dir.path(), 4096, Some(0));
    let dropped = dropped.unwrap();
    let table: Vec<u64> = std::fs::read(format!("{}.offsets", data.display()))
        .unwrap()
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let id = table.iter().position(|&o| o == dropped).unwrap();
    let line = failed(&run(&["verify", s(&data)]));
    assert!(
        line.contains(s(&data))
            && line.contains("invariant (b)")
            && line.contains("page size 4096")
            && line.contains(&format!("instance {id} at byte {dropped}")),
        "{line}"
    );
    let info = ok(&run(&["info", s(&data)]));
    assert!(
        info.contains("padded: no (") && info.contains("invariant (b)"),
        "{info}"
    );
    // A plain file has no fillers: not padded, verify checks framing and table only.
    let plain = dir.path().join("plain.tfrecord");
    std::fs::copy(testdata("mixed.tfrecord"), &plain).unwrap();
    ok(&run(&["index", s(&plain)]));
    assert!(ok(&run(&["verify", s(&plain)])).contains("not padded"));
    assert!(ok(&run(&["info", s(&plain)])).contains("padded: no\n"));
}

#[test]
fn written_files_follow_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let src = testdata("mixed.tfrecord");
    for (umask, want) in [("022", 0o644), ("077", 0o600), ("002", 0o664)] {
        let out = dir.path().join(format!("out{umask}.tfrecord"));
        let table = dir.path().join(format!("out{umask}.tfrecord.offsets"));
        ok(&run_with_umask(umask, &["pad", s(&src), s(&out)]));
        assert_eq!(mode(&out), want, "pad data, umask {umask}");
        assert_eq!(mode(&table), want, "pad table, umask {umask}");
        let t2 = dir.path().join(format!("idx{umask}.offsets"));
        ok(&run_with_umask(
            umask,
            &["index", s(&src), "--out", s(&t2), "--sync"],
        ));
        assert_eq!(mode(&t2), want, "index table, umask {umask}");
    }
}

#[test]
fn outputs_that_would_replace_an_input_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("m.tfrecord");
    std::fs::copy(testdata("mixed.tfrecord"), &data).unwrap();
    let before = std::fs::read(&data).unwrap();
    let table = dir.path().join("m.tfrecord.offsets");
    // index DATA --out DATA, also spelled differently.
    let dotted = format!("{}/./m.tfrecord", dir.path().display());
    for out in [s(&data), dotted.as_str()] {
        let line = failed(&run(&["index", s(&data), "--out", out]));
        assert!(line.contains(out) && line.contains(s(&data)), "{line}");
    }
    // pad m ./m: run from the directory, so the paths differ only literally.
    let res = Command::new(BIN)
        .current_dir(dir.path())
        .args(["pad", "m.tfrecord", "./m.tfrecord"])
        .output()
        .unwrap();
    let line = failed(&res);
    assert!(
        line.contains("./m.tfrecord") && line.contains("m.tfrecord is"),
        "{line}"
    );
    // pad X X.offsets: the output would replace the input's table.
    let line = failed(&run(&["pad", s(&data), s(&table)]));
    assert!(
        line.contains(s(&table)) && line.contains(s(&data)),
        "{line}"
    );
    assert!(!dir.path().join("m.tfrecord.offsets.offsets").exists());
    // pad X.offsets X: the output's table would be the input.
    let line = failed(&run(&["pad", s(&table), s(&data)]));
    assert!(line.contains(s(&table)), "{line}");
    assert_eq!(std::fs::read(&data).unwrap(), before);
}

#[test]
fn out_of_range_arguments_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("m.tfrecord");
    std::fs::copy(testdata("mixed.tfrecord"), &data).unwrap();
    ok(&run(&["index", s(&data)]));
    let d = s(&data);
    let out = dir.path().join("o.tfrecord");
    let o = s(&out);
    let cases: &[&[&str]] = &[
        &["pad", d, o, "--page-size", "1000"],
        &["pad", d, o, "--page-size", "256"],
        &["pad", d, o, "--page-size", "33554432"],
        &["order", d, "--seed", "1", "--page-size", "1000"],
        &["verify", d, "--page-size", "1000"],
        &["info", d, "--page-size", "1000"],
        &["pad", d, o, "--fit", "best", "--window", "0"],
        &["pad", d, o, "--window", "8"],
        &["pad", d, o, "--fit", "next", "--window", "8"],
        &[
            "order",
            d,
            "--seed",
            "1",
            "--num-shards",
            "3",
            "--shard-index",
            "3",
        ],
        &[
            "order",
            d,
            "--seed",
            "1",
            "--num-shards",
            "3",
            "--shard-index",
            "7",
        ],
        &["order", d, "--seed", "1", "--shard-index", "0"],
        &["order", d, "--seed", "1", "--num-shards", "2"],
        &[
            "order",
            d,
            "--seed",
            "1",
            "--num-shards",
            "0",
            "--shard-index",
            "0",
        ],
    ];
    for args in cases {
        let res = run(args);
        let stderr = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!out.exists());
    // The in-range neighbours work.
    ok(&run(&[
        "pad", d, o, "--fit", "best", "--window", "1", "--sync",
    ]));
    ok(&run(&["verify", o, "--page-size", "4096"]));
    ok(&run(&["info", d, "--page-size", "16777216"]));
    ok(&run(&[
        "order",
        d,
        "--seed",
        "1",
        "--num-shards",
        "3",
        "--shard-index",
        "2",
    ]));
}

#[test]
fn compressed_files_without_a_table_are_named_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("c.tfrecord");
    // A GZIP header followed by deflate bytes (what TF writes with GZIP options).
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6]).unwrap();
    for args in [
        vec!["get", s(&gz), "0"],
        vec!["verify", s(&gz)],
        vec!["order", s(&gz), "--seed", "1"],
    ] {
        let line = failed(&run(&args));
        assert!(
            line.contains("GZIP") && line.contains(s(&gz)),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn an_unwritable_output_directory_is_named_without_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("m.tfrecord");
    std::fs::copy(testdata("mixed.tfrecord"), &data).unwrap();
    let missing = dir.path().join("no-such-dir").join("t.offsets");
    let line = failed(&run(&["index", s(&data), "--out", s(&missing)]));
    assert!(
        line.contains(s(&missing)) && !line.contains(".lirs-tmp"),
        "{line}"
    );
    let line = failed(&run(&["pad", s(&data), s(&missing)]));
    assert!(!line.contains(".lirs-tmp"), "{line}");
}

#[test]
fn order_version_selects_the_algorithm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("m.tfrecord");
    std::fs::copy(testdata("mixed.tfrecord"), &data).unwrap();
    ok(&run(&["index", s(&data)]));
    let d = s(&data);
    for bad in ["0", "3", "v2", "-1"] {
        let res = run(&["order", d, "--seed", "1", "--order-version", bad]);
        let stderr = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(2), "{bad}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let ids = |args: &[&str]| -> Vec<u64> {
        let mut all = vec!["order", d, "--seed", "5", "--epoch", "2"];
        all.extend_from_slice(args);
        ok(&run(&all)).lines().map(|l| l.parse().unwrap()).collect()
    };
    assert_eq!(ids(&[]), ids(&["--order-version", "1"]));
    let reader =
        tfrecord_lirs::Reader::open_one(&data, None, &tfrecord_lirs::ReaderOptions::default())
            .unwrap();
    for page_aware in [false, true] {
        let aware: &[&str] = if page_aware { &["--page-aware"] } else { &[] };
        for (k, i) in [(1u64, 0u64), (3, 0), (3, 2)] {
            let params = tfrecord_lirs::OrderParams {
                seed: 5,
                epoch: 2,
                page_aware,
                num_shards: k,
                shard_index: i,
            };
            let order = reader.order_v2(&params).unwrap();
            let mut expected = Vec::new();
            order.ids_into(0..order.len(), &mut expected).unwrap();
            let (k, i) = (k.to_string(), i.to_string());
            let mut args = vec!["--order-version", "2"];
            args.extend_from_slice(aware);
            if k != "1" {
                args.extend_from_slice(&["--num-shards", &k, "--shard-index", &i]);
            }
            assert_eq!(ids(&args), expected, "{args:?}");
            assert_ne!(ids(&args[2..]), expected, "version 1 differs: {args:?}");
        }
    }
}

#[test]
fn reuse_factor_prints_the_refurbish_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("m.tfrecord");
    std::fs::copy(testdata("mixed.tfrecord"), &data).unwrap();
    ok(&run(&["index", s(&data)]));
    let d = s(&data);
    let reader =
        tfrecord_lirs::Reader::open_one(&data, None, &tfrecord_lirs::ReaderOptions::default())
            .unwrap();
    let lines = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["order", d, "--seed", "5", "--epoch", "2"];
        all.extend_from_slice(args);
        ok(&run(&all)).lines().map(str::to_string).collect()
    };
    for (r, batch, k, i) in [(3u64, 4u64, 1u64, 0u64), (2, 3, 3, 1), (1, 5, 2, 1)] {
        let params = tfrecord_lirs::RefurbishParams {
            seed: 5,
            reuse_factor: r,
            batch_size: batch,
            num_shards: k,
            shard_index: i,
            order_version: tfrecord_lirs::OrderVersion::V1,
        };
        let expected: Vec<String> = tfrecord_lirs::RefurbishSchedule::new(reader.len(), &params)
            .unwrap()
            .epoch(2)
            .unwrap()
            .map(|u| {
                let what = if u.refresh { "refresh" } else { "reuse" };
                format!("{}\t{what}\t{}", u.id, u.generation)
            })
            .collect();
        let (r, batch, k, i) = (
            r.to_string(),
            batch.to_string(),
            k.to_string(),
            i.to_string(),
        );
        let args = [
            "--reuse-factor",
            &r,
            "--batch-size",
            &batch,
            "--num-shards",
            &k,
            "--shard-index",
            &i,
        ];
        assert_eq!(lines(&args), expected, "{args:?}");
    }
    // r = 1 is the plain order's ids, every one a refresh of this epoch.
    let plain = lines(&[]);
    let once: Vec<String> = lines(&["--reuse-factor", "1"])
        .iter()
        .map(|l| {
            assert!(l.ends_with("\trefresh\t2"), "{l}");
            l.split('\t').next().unwrap().to_string()
        })
        .collect();
    assert_eq!(once, plain);
    // Wrong use: a usage error (exit 2) naming the parameter, never a panic.
    for bad in [
        &["--reuse-factor", "0"][..],
        &["--reuse-factor", "1.5"],
        &["--reuse-factor", "2", "--batch-size", "0"],
        &["--batch-size", "4"],
        &["--reuse-factor", "2", "--page-aware"],
    ] {
        let mut all = vec!["order", d, "--seed", "5"];
        all.extend_from_slice(bad);
        let res = run(&all);
        let stderr = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let res = run(&["order", d, "--seed", "5", "--reuse-factor", "1.5"]);
    assert!(String::from_utf8_lossy(&res.stderr).contains("reuse_factor"));
}
