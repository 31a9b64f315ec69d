//! The `cursor_state` target: the checkpoint state a front end restores from
//! ([`CursorState::decode`], then [`DatasetCursor::new`] / [`DatasetCursor::restore`]),
//! from arbitrary bytes or an encoded state with its fields forged.
//!
//! Oracles: no panic; a damaged or forged state is a `DataLoss` (or, for a state the
//! options refuse, `InvalidArgument`) error, never a wrong position; a state that
//! decodes encodes back to the same bytes; a cursor opened at a state reports the same
//! delivered positions, and walks exactly the positions it did not deliver: each
//! instance of the epoch once, counting the delivered ones.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use arbitrary::Arbitrary;
use tfrecord_lirs::{
    CursorOptions, CursorState, DatasetCursor, ErrorKind, OrderVersion, PaddedWriter, Reader,
};

use crate::common::scratch_file;

/// Instances of the file every input walks.
const INSTANCES: u32 = 97;

/// The input.
#[derive(Debug, Arbitrary)]
pub struct Input {
    /// Arbitrary bytes for `decode`, or (when `forge`) the fields of a state to encode.
    pub bytes: Vec<u8>,
    /// Encode a state of these fields (then flip `flip` bits) instead of raw bytes.
    pub forge: bool,
    /// The forged state's order version.
    pub order_version: u32,
    /// The forged state's position.
    pub position: u64,
    /// The forged state's positions past it.
    pub delivered_after: Vec<u64>,
    /// Bits to flip in the encoded bytes.
    pub flip: Vec<u16>,
    /// The cursor's options: order version 2 instead of 1, page-aware, unordered,
    /// batches of `batch` (0: elements).
    pub v2: bool,
    /// Page-aware order.
    pub page_aware: bool,
    /// Unordered delivery.
    pub unordered: bool,
    /// Instances per batch (0: elements).
    pub batch: u8,
}

fn reader() -> &'static Arc<Reader> {
    static READER: OnceLock<Arc<Reader>> = OnceLock::new();
    READER.get_or_init(|| {
        let path = scratch_file("cursor_state.tfrecord");
        let mut w = PaddedWriter::create(&path, &Default::default()).expect("writer");
        for i in 0..INSTANCES {
            let mut record = i.to_le_bytes().to_vec();
            record.resize(4 + (i as usize * 37) % 300, b'x');
            w.write(&record).expect("write");
        }
        w.finish().expect("finish");
        Arc::new(Reader::open_one(&path, None, &Default::default()).expect("open"))
    })
}

/// The instance id a record of the file holds.
fn id_of(record: &[u8]) -> u32 {
    u32::from_le_bytes(record[..4].try_into().expect("4 bytes"))
}

/// Checks one input.
pub fn check(input: &Input) {
    let bytes = if input.forge {
        let mut bytes = CursorState {
            order_version: input.order_version,
            position: input.position,
            delivered_after: input.delivered_after.clone(),
        }
        .encode();
        for &bit in &input.flip {
            let at = usize::from(bit / 8);
            if let Some(b) = bytes.get_mut(at) {
                *b ^= 1 << (bit % 8);
            }
        }
        bytes
    } else {
        input.bytes.clone()
    };
    let state = match CursorState::decode(&bytes) {
        Ok(state) => state,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::DataLoss, "decode: {e}");
            return;
        }
    };
    assert_eq!(
        state.encode(),
        bytes,
        "a decoded state encodes to other bytes"
    );

    let reader = reader();
    let mut options =
        CursorOptions::dataset(reader, i64::from(input.batch % 8), -1).expect("dataset options");
    options.order.page_aware = input.page_aware;
    options.unordered = input.unordered;
    options.order_version = if input.v2 {
        OrderVersion::V2
    } else {
        OrderVersion::V1
    };
    let mut cursor = match DatasetCursor::new(Arc::clone(reader), options, &state) {
        Ok(cursor) => cursor,
        Err(e) => {
            assert!(
                matches!(e.kind(), ErrorKind::DataLoss | ErrorKind::InvalidArgument),
                "open at a state: {e}"
            );
            return;
        }
    };
    // The same delivered positions (a position listed as delivered right at the
    // restore point may be folded into it).
    let delivered = |s: &CursorState| -> BTreeSet<u64> {
        (0..s.position)
            .chain(s.delivered_after.iter().copied())
            .collect()
    };
    assert_eq!(
        delivered(&cursor.state()),
        delivered(&state),
        "a cursor opened at {state:?} reports {:?}",
        cursor.state()
    );
    let len = cursor.len();
    let left = len as usize - delivered(&state).len();
    let mut got = Vec::new();
    if options.batch_size == 0 {
        while let Some(record) = cursor.next_element() {
            got.push(id_of(record.expect("a clean file reads")));
        }
    } else {
        while let Some(batch) = cursor.next_batch() {
            got.extend(batch.expect("a clean file reads").iter().map(id_of));
        }
    }
    assert_eq!(got.len(), left, "the walk after a state: wrong count");
    let unique: BTreeSet<u32> = got.iter().copied().collect();
    assert_eq!(
        unique.len(),
        got.len(),
        "an instance delivered twice after a restore"
    );
}
