//! Arbitrary record sizes and a page size from the allowed range through the
//! `PaddedWriter` with next fit and best fit.
//!
//! Oracles: the writer succeeds; `inspect` with the table and that page size passes
//! (padded-file invariants (a)-(c), table matches); every instance reads back exactly,
//! under the id the writer reported.

use crate::common;
use arbitrary::Arbitrary;
use tfrecord_lirs::format::{self, PageSize};
use tfrecord_lirs::{default_table_path, inspect, read_table, Fit, PadOptions, PaddedWriter};
use tfrecord_lirs::{Reader, ReaderOptions};

/// Payload sizes, biased to the interesting ones around the page size.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Size {
    Small(u16),
    NearPage { pages: u8, delta: i16 },
    Tiny(u8),
}

#[derive(Arbitrary, Debug)]
pub struct Input {
    pub page_shift: u8,
    pub best: bool,
    pub lookahead: u8,
    pub sizes: Vec<Size>,
}

/// Caps the bytes one input writes, so large pages do not make inputs slow; raised to
/// two pages for the largest pages, so a record near a 16 MiB page still fits.
const BUDGET: u64 = 3 << 20;

fn payload_len(size: Size, page: u64) -> u64 {
    match size {
        Size::Small(n) => u64::from(n) % page,
        Size::Tiny(n) => u64::from(n % 64),
        Size::NearPage { pages, delta } => {
            let base = page * (1 + u64::from(pages % 3));
            base.saturating_add_signed(i64::from(delta % 64))
                .saturating_sub(format::FRAMING_LEN)
        }
    }
}

fn payload(input: usize, len: u64) -> Vec<u8> {
    // Starts with a non-zero byte (never the filler magic) and encodes the input index.
    let tag = (input as u32).to_le_bytes();
    (0..len as usize)
        .map(|j| {
            if j < 4 {
                tag[j] | 0x80
            } else {
                (input.wrapping_mul(31) + j) as u8
            }
        })
        .collect()
}

/// The oracles above, for one input.
pub fn check(input: &Input) {
    let page = common::page_size(input.page_shift);
    let page_size = PageSize::new(page).unwrap();
    let fit = if input.best {
        Fit::Best {
            lookahead: 1 + usize::from(input.lookahead % 64),
        }
    } else {
        Fit::Next
    };
    let mut payloads = Vec::new();
    let mut total = 0u64;
    let budget = BUDGET.max(2 * page);
    for &size in &input.sizes {
        let len = payload_len(size, page);
        if total + len > budget {
            break;
        }
        total += len;
        payloads.push(payload(payloads.len(), len));
    }

    let path = common::scratch_file("padded.tfrecord");
    let options = PadOptions {
        page_size: page,
        fit,
        sync: false,
        ..Default::default()
    };
    let mut writer = PaddedWriter::create(&path, &options).unwrap();
    for (i, p) in payloads.iter().enumerate() {
        assert_eq!(writer.write(p).unwrap(), i as u64);
    }
    let summary = writer.finish().unwrap();
    assert_eq!(summary.instances, payloads.len() as u64);

    let table_path = default_table_path(&path);
    let table = read_table(&table_path).unwrap();
    let found = inspect(&path, Some((&table_path, &table)), Some(page_size))
        .unwrap_or_else(|e| panic!("page {page} {fit:?}: {e}"));
    assert_eq!(found.instances, payloads.len() as u64);
    assert_eq!(found.filler_bytes, summary.filler_bytes);
    assert_eq!(found.file_size, summary.data_bytes);
    if found.fillers > 0 {
        assert!(
            found.padded_page_sizes.contains(&page),
            "{:?}",
            found.padded_page_sizes
        );
    }

    let reader = Reader::open_one(
        &path,
        None,
        &ReaderOptions {
            page_size: page,
            ..ReaderOptions::default()
        },
    )
    .unwrap();
    assert_eq!(reader.len(), payloads.len() as u64);
    for (input_index, p) in payloads.iter().enumerate() {
        let id = summary.instance_of(input_index as u64).unwrap();
        assert_eq!(
            &reader.read(id).unwrap(),
            p,
            "input {input_index} as instance {id}"
        );
    }
}
