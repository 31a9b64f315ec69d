//! Many files at once (`index|verify|info FILE...`, `pad IN... DIR`), the advice for
//! each kind of mistake, `pad`'s refusal to replace an output, and `--fit auto`.

use std::path::{Path, PathBuf};

use tfrecord_lirs::format;

mod common;

use common::{run, s, stderr, stdout};

/// A plain TFRecord file of `n` records of `len` bytes.
fn write_plain(path: &Path, n: usize, len: usize) {
    let mut bytes = Vec::new();
    for i in 0..n {
        format::encode_record(&vec![(i % 251) as u8 + 1; len], &mut bytes);
    }
    std::fs::write(path, bytes).unwrap();
}

fn gzip(path: &Path, plain: &Path) {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&std::fs::read(plain).unwrap()).unwrap();
    std::fs::write(path, e.finish().unwrap()).unwrap();
}

fn shards(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("d-train.tfrecord-{i:05}-of-{n:05}"));
            write_plain(&p, 100 + i, 300);
            p
        })
        .collect()
}

#[test]
fn index_many_does_every_file_and_names_each_failure() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), 4);
    let missing = dir.path().join("missing.tfrecord");
    let mut args = vec!["index", "--jobs", "2"];
    args.extend(files.iter().map(|f| s(f)));
    args.insert(4, s(&missing));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Every other file was indexed.
    for (i, f) in files.iter().enumerate() {
        assert!(tfrecord_lirs::default_table_path(f).exists(), "{f:?}");
        assert!(
            stdout(&out).contains(&format!("{}: {} instances", f.display(), 100 + i)),
            "{}",
            stdout(&out)
        );
    }
    let err = stderr(&out);
    assert!(
        err.starts_with("error: index: indexed 4 of 5 files; 1 failed:"),
        "{err}"
    );
    assert!(
        err.contains(&format!("\n  {}: ", missing.display())),
        "{err}"
    );

    // All good: the summary on stdout, exit 0; verify and info over the same set.
    let mut args = vec!["verify"];
    args.extend(files.iter().map(|f| s(f)));
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).ends_with("verified 4 of 4 files\n"),
        "{}",
        stdout(&out)
    );
    let mut args = vec!["info", "--json"];
    args.extend(files.iter().map(|f| s(f)));
    let out = run(&args);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts: Vec<u64> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["instances"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, vec![100, 101, 102, 103]);
    // One file keeps the single-file output exactly: the count alone.
    assert_eq!(stdout(&run(&["index", s(&files[0])])), "100\n");
}

#[test]
fn each_mistake_gets_its_own_advice() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("p.tfrecord");
    write_plain(&plain, 50, 200);
    let gz = dir.path().join("p.tfrecord.gz");
    gzip(&gz, &plain);
    let one_line = |args: &[&str]| {
        let out = run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    };
    // Compressed, without a table: compressed, with the pad command, not "no table".
    for cmd in ["verify", "get", "order", "index"] {
        let mut args = vec![cmd, s(&gz)];
        match cmd {
            "get" => args.push("0"),
            "order" => args.extend(["--seed", "1"]),
            _ => {}
        }
        let err = one_line(&args);
        assert!(
            err.contains("GZIP-compressed")
                && err.contains("tfrecord-lirs pad")
                && !err.contains("no offset table"),
            "{cmd}: {err}"
        );
    }
    // A directory is a directory.
    for cmd in ["index", "verify", "info"] {
        let err = one_line(&[cmd, s(dir.path())]);
        assert!(
            err.contains("is a directory, not a TFRecord file"),
            "{cmd}: {err}"
        );
    }
    // A table given as data is named as a table (by name, and by its bytes).
    assert!(run(&["index", s(&plain)]).status.success());
    let table = tfrecord_lirs::default_table_path(&plain);
    let renamed = dir.path().join("t.bin");
    std::fs::copy(&table, &renamed).unwrap();
    for t in [&table, &renamed] {
        for cmd in ["index", "verify", "info"] {
            let err = one_line(&[cmd, s(t)]);
            assert!(err.contains("is an offset table"), "{cmd} {t:?}: {err}");
        }
    }
    // A table that no longer matches: truncated, then rewritten.
    let bytes = std::fs::read(&plain).unwrap();
    std::fs::write(&plain, &bytes[..bytes.len() / 2]).unwrap();
    for args in [
        &["get", s(&plain), "0"][..],
        &["verify", s(&plain)],
        &["info", s(&plain)],
    ] {
        let err = one_line(args);
        assert!(
            err.contains("was truncated after its table was written")
                && err.contains("tfrecord-lirs index"),
            "{args:?}: {err}"
        );
    }
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&table)
        .unwrap()
        .set_modified(old)
        .unwrap();
    write_plain(&plain, 50, 210); // longer records: the entries point mid-record
    let err = one_line(&["get", s(&plain), "0"]);
    assert!(
        err.contains("was rewritten after its table") && err.contains("rebuild the table"),
        "{err}"
    );
}

#[test]
fn pad_refuses_to_replace_and_pads_many_into_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), 3);
    let out = dir.path().join("one.tfrecord");
    assert!(run(&["pad", s(&files[0]), s(&out)]).status.success());
    let again = run(&["pad", s(&files[0]), s(&out)]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("exists (a file): pad would replace it"),
        "{}",
        stderr(&again)
    );
    assert!(run(&["pad", "--force", s(&files[0]), s(&out)])
        .status
        .success());

    let outdir = dir.path().join("padded");
    std::fs::create_dir(&outdir).unwrap();
    let mut args = vec!["pad", "--jobs", "2", "--fit", "best"];
    args.extend(files.iter().map(|f| s(f)));
    args.push(s(&outdir));
    let res = run(&args);
    assert!(res.status.success(), "{}", stderr(&res));
    assert!(
        stdout(&res).ends_with("padded 3 of 3 files\n"),
        "{}",
        stdout(&res)
    );
    for f in &files {
        let copy = outdir.join(f.file_name().unwrap());
        assert!(run(&["verify", s(&copy)]).status.success(), "{copy:?}");
    }
}

/// The page reads `pad` reports, and `--fit auto`'s choice: small records are padded
/// (one page each instead of ~1.1), ~9 KB records are not (3.0 instead of ~3.2 pages
/// is not worth the bytes).
#[test]
fn fit_auto_pads_only_when_it_pays() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.tfrecord");
    write_plain(&small, 2000, 362);
    let big = dir.path().join("big.tfrecord");
    write_plain(&big, 300, 9000);
    let pad = |input: &Path, fit: &str| {
        let out = dir.path().join(format!(
            "{}.{fit}",
            input.file_name().unwrap().to_str().unwrap()
        ));
        let res = run(&["pad", "--fit", fit, s(input), s(&out)]);
        assert!(res.status.success(), "{}", stderr(&res));
        (stdout(&res), out)
    };
    let (text, _) = pad(&small, "next");
    assert!(
        text.contains("page reads per instance: 1.000 (unpadded: 1.0"),
        "{text}"
    );
    let (text, out) = pad(&small, "auto");
    assert!(text.starts_with("fit auto: chose best ("), "{text}");
    assert!(stdout(&run(&["verify", s(&out)])).contains("padded for page size 4096"));
    let (text, out) = pad(&big, "auto");
    assert!(text.starts_with("fit auto: chose no padding ("), "{text}");
    assert!(text.contains("overhead: 0.00%"), "{text}");
    assert!(stdout(&run(&["verify", s(&out)])).contains("not padded"));
    let (text, _) = pad(&big, "best");
    assert!(
        text.contains("page reads per instance: 3.000 (unpadded: 3.2"),
        "{text}"
    );
}
