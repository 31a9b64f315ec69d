//! Limits: offsets past 4 GiB (a sparse data file, so the test writes only a few KiB)
//! and page sizes at both ends of the allowed range.

mod common;

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use common::{payload, write_sparse_filler};
use tfrecord_lirs::format::{self, PageSize};
use tfrecord_lirs::{
    default_table_path, encode_table, inspect, read_table, Backend, Fit, OrderParams, PadOptions,
    PaddedWriter, Reader, ReaderOptions,
};

const FOUR_GIB: u64 = 1 << 32;

/// A sparse file: instance 0 at byte 0 (its span runs over the hole, one filler, to the cluster),
/// then a cluster of instances and fillers whose first record straddles byte 2^32.
/// Returns the offsets and the payloads.
fn sparse_file(path: &Path) -> (Vec<u64>, Vec<Vec<u8>>) {
    let file = std::fs::File::create(path).unwrap();
    let mut payloads = vec![payload(0, 100)];
    let mut offsets = vec![0u64];
    let mut head = Vec::new();
    format::encode_record(&payloads[0], &mut head);
    file.write_all_at(&head, 0).unwrap();

    let start = FOUR_GIB - 60; // the first cluster record crosses the 4 GiB line
    write_sparse_filler(&file, head.len() as u64, start);
    let mut cluster = Vec::new();
    for i in 1..40usize {
        let p = payload(i, 50 + i * 13);
        offsets.push(start + cluster.len() as u64);
        format::encode_record(&p, &mut cluster);
        if i % 3 == 0 {
            format::encode_filler(24 + i as u64, &mut cluster);
        }
        payloads.push(p);
    }
    file.write_all_at(&cluster, start).unwrap();
    assert_eq!(file.metadata().unwrap().len(), start + cluster.len() as u64);
    (offsets, payloads)
}

fn allocated_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn offsets_beyond_4_gib_in_a_sparse_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sparse.tfrecord");
    let (offsets, payloads) = sparse_file(&data);
    let size = std::fs::metadata(&data).unwrap().len();
    assert!(size > FOUR_GIB);
    let on_disk = allocated_bytes(&data);
    println!("sparse file: {size} bytes, {on_disk} allocated");
    assert!(
        on_disk < 64 << 20,
        "the file must stay sparse ({on_disk} bytes allocated)"
    );

    let table_path = default_table_path(&data);
    std::fs::write(&table_path, encode_table(&offsets)).unwrap();
    assert_eq!(read_table(&table_path).unwrap(), offsets);

    for backend in [Backend::Pread, Backend::Mmap] {
        let options = ReaderOptions {
            backend,
            mmap_opt_in: common::mmap_opt_in(),
            ..ReaderOptions::default()
        };
        let reader = Reader::open_one(&data, None, &options).unwrap();
        assert_eq!(reader.len(), payloads.len() as u64);
        // Instance 0's span runs over the 4 GiB hole: the reader reads its record only.
        for id in 0..reader.len() {
            assert_eq!(
                reader.read(id).unwrap(),
                payloads[id as usize],
                "{backend:?} {id}"
            );
            let (_, at) = reader.location(id).unwrap();
            assert_eq!(at, offsets[id as usize]);
        }
        let stats = reader.io_stats();
        // One read per record, plus one small probe of the filler after instance 0's
        // record (its span is too long to read whole, so its tail is checked apart).
        assert_eq!(stats.reads, reader.len() + 1);
        assert!(stats.bytes_read < 2 << 20, "{stats:?}");
        assert_eq!(stats.data_pages, size.div_ceil(4096));

        // Orders over ids whose offsets exceed u32.
        for page_aware in [false, true] {
            let mut ids: Vec<u64> = reader
                .epoch_order(&OrderParams {
                    seed: 9,
                    epoch: 1,
                    page_aware,
                    num_shards: 1,
                    shard_index: 0,
                })
                .unwrap()
                .collect();
            ids.sort_unstable();
            assert_eq!(ids, (0..reader.len()).collect::<Vec<_>>());
        }
    }

    // Damage past 4 GiB is reported at its full 64-bit offset.
    let id = 20usize;
    let at = offsets[id] + 12 + 3;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&data)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x40], at).unwrap();
    let reader = Reader::open_one(&data, None, &ReaderOptions::default()).unwrap();
    let err = reader.read(id as u64).unwrap_err().to_string();
    assert!(err.contains(&format!("byte {}", offsets[id])), "{err}");
    assert!(err.contains("payload CRC"), "{err}");
    file.write_all_at(&byte, at).unwrap();

    // A table entry moved by a few bytes past 4 GiB.
    let mut moved = offsets.clone();
    moved[5] += 3;
    std::fs::write(&table_path, encode_table(&moved)).unwrap();
    let reader = Reader::open_one(&data, None, &ReaderOptions::default()).unwrap();
    let err = reader.read(5).unwrap_err().to_string();
    assert!(err.contains(&format!("byte {}", moved[5])), "{err}");
    assert!(err.contains("instance 5"), "{err}");
    // The last entry past the end of the file (beyond 4 GiB too).
    let mut past = offsets.clone();
    past.push(size + 8);
    std::fs::write(&table_path, encode_table(&past)).unwrap();
    let err = Reader::open_one(&data, None, &ReaderOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(&format!("byte {}", size + 8)), "{err}");

    assert!(allocated_bytes(&data) < 64 << 20);
    drop(reader);
    std::fs::remove_file(&data).unwrap();
}

/// Page sizes at both ends of the range: the padded writer's output passes the full
/// check for that page size, reads back, and page-aware orders keep pages together.
#[test]
fn smallest_and_largest_page_sizes() {
    let dir = tempfile::tempdir().unwrap();
    for page in [format::MIN_PAGE_SIZE, format::MAX_PAGE_SIZE] {
        let ps = PageSize::new(page).unwrap();
        // Sizes around the small/large threshold P - 24 (framed), and multi-page records.
        let threshold = page - format::MIN_FILLER_LEN - format::FRAMING_LEN;
        let mut sizes = vec![0u64, 1, 7, threshold - 1, threshold, threshold + 1, page];
        if page == format::MIN_PAGE_SIZE {
            sizes.extend([3 * page + 5, 100, 200, 250, 300]);
        } else {
            sizes.extend([page / 2, page / 3, 1000]);
        }
        for fit in [Fit::Next, Fit::Best { lookahead: 3 }] {
            let path = dir.path().join(format!("p{page}.tfrecord"));
            let mut w = PaddedWriter::create(
                &path,
                &PadOptions {
                    page_size: page,
                    fit,
                    sync: false,
                    ..Default::default()
                },
            )
            .unwrap();
            let payloads: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| payload(i, n as usize))
                .collect();
            for p in &payloads {
                w.write(p).unwrap();
            }
            let summary = w.finish().unwrap();
            let table_path = default_table_path(&path);
            let table = read_table(&table_path).unwrap();
            let found = inspect(&path, Some((&table_path, &table)), Some(ps))
                .unwrap_or_else(|e| panic!("page {page} {fit:?}: {e}"));
            assert_eq!(found.instances, payloads.len() as u64);
            assert!(found.padded_page_sizes.contains(&page));
            let reader = Reader::open_one(
                &path,
                None,
                &ReaderOptions {
                    page_size: page,
                    ..ReaderOptions::default()
                },
            )
            .unwrap();
            for (input, p) in payloads.iter().enumerate() {
                let id = summary.instance_of(input as u64).unwrap();
                assert_eq!(
                    &reader.read(id).unwrap(),
                    p,
                    "page {page} {fit:?} input {input}"
                );
            }
            // Every small instance's span lies in one page.
            for id in 0..reader.len() {
                let (_, start) = reader.location(id).unwrap();
                let end = table
                    .get(id as usize + 1)
                    .copied()
                    .unwrap_or(found.file_size);
                let framed = format::framed_len(reader.read(id).unwrap().len() as u64);
                if ps.is_small(framed) {
                    assert_eq!(
                        ps.pages_touched(start, end - start),
                        1,
                        "page {page} id {id}"
                    );
                } else {
                    assert_eq!(start % page, 0, "page {page} id {id}");
                }
            }
        }
    }
    // Just outside the range is refused by the writer and the reader.
    for bad in [format::MIN_PAGE_SIZE / 2, format::MAX_PAGE_SIZE * 2] {
        let path = dir.path().join("bad.tfrecord");
        let err = PaddedWriter::create(
            &path,
            &PadOptions {
                page_size: bad,
                ..PadOptions::default()
            },
        )
        .err()
        .unwrap();
        assert!(
            err.to_string().contains(&format!(
                "page_size must be a power of two from 512 to 16777216 bytes, got {bad}"
            )),
            "{err}"
        );
    }
}
