//! Files written by real TensorFlow (testdata/, made by testdata/make_testdata.py):
//! our writer reproduces them byte for byte, we index and read them, and we pad them.

mod common;

use common::{manifest, manifest_payloads as payloads, testdata};
use prost::Message;
use tfrecord_lirs::example::{Example, Kind};
use tfrecord_lirs::{
    default_table_path, inspect, pad_file, read_table, scan_offsets, Fit, PadOptions, PageSize,
    Reader, ReaderOptions, TFRecordWriter,
};

#[test]
fn manifest_covers_the_required_files() {
    let names: Vec<String> = manifest()
        .iter()
        .map(|e| e["filename"].as_str().unwrap().to_string())
        .collect();
    for needed in [
        "empty.tfrecord",
        "one.tfrecord",
        "sizes.tfrecord",
        "mixed.tfrecord",
        "examples.tfrecord",
    ] {
        assert!(
            names.iter().any(|n| n == needed),
            "{needed} missing from testdata"
        );
    }
}

#[test]
fn our_plain_writer_is_byte_identical_to_tensorflow() {
    for entry in manifest() {
        let name = entry["filename"].as_str().unwrap();
        let tf_bytes = std::fs::read(testdata().join(name)).unwrap();
        let mut w = TFRecordWriter::new(Vec::new(), name);
        for p in payloads(&entry) {
            w.write_instance(&p).unwrap();
        }
        let ours = w.finish().unwrap();
        assert!(
            ours == tf_bytes,
            "{name}: our bytes differ from TensorFlow's"
        );
    }
}

#[test]
fn we_index_and_read_what_tensorflow_wrote() {
    let dir = tempfile::tempdir().unwrap();
    for entry in manifest() {
        let name = entry["filename"].as_str().unwrap();
        let data = dir.path().join(name);
        std::fs::copy(testdata().join(name), &data).unwrap();
        let offsets = scan_offsets(&data, |_| {}).unwrap();
        let expected: Vec<u64> = entry["offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(offsets, expected, "{name}");
        let table = default_table_path(&data);
        assert_eq!(
            tfrecord_lirs::build_offset_table(&data, &table).unwrap(),
            expected.len() as u64
        );
        assert_eq!(
            std::fs::metadata(&table).unwrap().len(),
            8 * expected.len() as u64
        );
        for backend in [tfrecord_lirs::Backend::Pread, tfrecord_lirs::Backend::Mmap] {
            let opts = ReaderOptions {
                backend,
                mmap_opt_in: common::mmap_opt_in(),
                ..Default::default()
            };
            let reader = Reader::open_one(&data, None, &opts).unwrap();
            for (id, p) in payloads(&entry).iter().enumerate() {
                assert_eq!(&reader.read(id as u64).unwrap(), p, "{name} instance {id}");
            }
        }
        let found = inspect(&data, Some((&table, &read_table(&table).unwrap())), None).unwrap();
        assert_eq!(found.instances, expected.len() as u64);
        assert_eq!(found.padded_for(), None, "{name}: TF files have no fillers");
    }
}

#[test]
fn tensorflow_examples_decode_with_prost() {
    let entry = manifest()
        .into_iter()
        .find(|e| e["filename"] == "examples.tfrecord")
        .unwrap();
    let data = testdata().join("examples.tfrecord");
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("examples.offsets");
    tfrecord_lirs::build_offset_table(&data, &table).unwrap();
    let reader = Reader::open_one(&data, Some(&table), &ReaderOptions::default()).unwrap();
    for (id, want) in entry["examples"].as_array().unwrap().iter().enumerate() {
        let ex = Example::decode(reader.read(id as u64).unwrap().as_slice()).unwrap();
        let features = ex.features.unwrap().feature;
        match &features["label"].kind {
            Some(Kind::Int64List(l)) => assert_eq!(l.value, vec![want["label"].as_i64().unwrap()]),
            other => panic!("label: {other:?}"),
        }
        match &features["weights"].kind {
            Some(Kind::FloatList(l)) => {
                let w: Vec<f32> = want["weights"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap() as f32)
                    .collect();
                assert_eq!(l.value, w);
            }
            other => panic!("weights: {other:?}"),
        }
        match &features["name"].kind {
            Some(Kind::BytesList(l)) => assert_eq!(
                l.value,
                vec![want["name"].as_str().unwrap().as_bytes().to_vec()]
            ),
            other => panic!("name: {other:?}"),
        }
    }
}

#[test]
fn tensorflow_files_pad_at_every_page_size_and_policy() {
    let dir = tempfile::tempdir().unwrap();
    for entry in manifest() {
        let name = entry["filename"].as_str().unwrap();
        let expected = payloads(&entry);
        for page_size in [512u64, 4096, 65536] {
            for fit in [Fit::Next, Fit::Best { lookahead: 16 }] {
                let out = dir.path().join(format!("{name}.{page_size}.padded"));
                let summary = pad_file(
                    &testdata().join(name),
                    &out,
                    &PadOptions {
                        page_size,
                        fit,
                        sync: false,
                        ..Default::default()
                    },
                )
                .unwrap();
                assert_eq!(summary.instances, expected.len() as u64);
                let table_path = default_table_path(&out);
                let table = read_table(&table_path).unwrap();
                inspect(
                    &out,
                    Some((&table_path, &table)),
                    Some(PageSize::new(page_size).unwrap()),
                )
                .unwrap();
                let reader = Reader::open_one(&out, None, &ReaderOptions::default()).unwrap();
                for (input, p) in expected.iter().enumerate() {
                    let id = summary.instance_of(input as u64).unwrap();
                    assert_eq!(
                        &reader.read(id).unwrap(),
                        p,
                        "{name} P={page_size} {fit:?} input {input}"
                    );
                }
                // Padding a padded file again drops its fillers and gives the same file.
                let again = dir.path().join("again");
                let summary2 = pad_file(
                    &out,
                    &again,
                    &PadOptions {
                        page_size,
                        fit: Fit::Next,
                        sync: false,
                        ..Default::default()
                    },
                )
                .unwrap();
                assert_eq!(summary2.instances, summary.instances);
                if fit == Fit::Next {
                    assert!(std::fs::read(&again).unwrap() == std::fs::read(&out).unwrap());
                }
            }
        }
    }
}

#[test]
fn created_files_appear_whole_on_finish_and_stay_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    for entry in manifest() {
        let name = entry["filename"].as_str().unwrap();
        let tf_bytes = std::fs::read(testdata().join(name)).unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, b"old contents").unwrap();
        let mut w = TFRecordWriter::create(&path).unwrap();
        for p in payloads(&entry) {
            w.write_instance(&p).unwrap();
        }
        w.flush().unwrap();
        // Nothing replaces the old file before finish.
        assert_eq!(std::fs::read(&path).unwrap(), b"old contents");
        w.finish_synced(true).unwrap();
        assert!(std::fs::read(&path).unwrap() == tf_bytes, "{name}");
        // Plain finish renames too.
        let mut w = TFRecordWriter::create(&path).unwrap();
        w.write_instance(b"x").unwrap();
        w.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap().len(), 17);
        // A writer dropped unfinished leaves the old file alone.
        let mut w = TFRecordWriter::create(&path).unwrap();
        w.write_instance(b"abandoned").unwrap();
        drop(w);
        assert_eq!(std::fs::read(&path).unwrap().len(), 17);
        std::fs::remove_file(&path).unwrap();
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temporaries left"
    );
}

#[test]
fn tables_can_be_written_synced() {
    let dir = tempfile::tempdir().unwrap();
    let data = testdata().join("mixed.tfrecord");
    let table = dir.path().join("mixed.offsets");
    let n = tfrecord_lirs::build_offset_table_with(&data, &table, true, |_| {}).unwrap();
    let offsets = read_table(&table).unwrap();
    assert_eq!(offsets.len() as u64, n);
    let mut b = tfrecord_lirs::OffsetTableBuilder::new(None);
    b.calc_offset(3);
    let again = dir.path().join("b.offsets");
    b.write_synced(&again, true).unwrap();
    assert_eq!(read_table(&again).unwrap(), vec![0]);
}
