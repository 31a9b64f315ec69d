//! The parts of a window: its ids cut into runs, each part read by one thread (one
//! coalesced read, or id by id when that fails), and the parts assembled into the
//! window's [`Payloads`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Error;

use crate::read::batch::Batch;
use crate::read::reader::{BatchRead, Reader};

use super::payloads::{Parts, Payloads, Spares};

/// One part of a window as read: its payloads in part order (an empty one for each
/// failed id) and the failed ids' positions in the part with their errors.
pub(super) struct PartRead {
    pub(super) batch: Batch,
    pub(super) failed: Vec<(usize, Error)>,
}

/// A part's read given up because its fetch is being dropped: no payload of it is
/// ever handed out.
pub(super) struct Abandoned;

/// Reads `ids` into `batch` with one coalesced read; if that fails, reads them one by
/// one, so each error names its own instance and the others are still read. A failed
/// id gets an empty payload in `batch`, and its position and error are returned.
/// Once `stop` is set (only by a fetch being dropped) the part is given up between two
/// reads, `batch` left unusable.
pub(super) fn read_part(
    reader: &Reader,
    ids: &[u64],
    batch: &mut Batch,
    stop: &AtomicBool,
) -> std::result::Result<Vec<(usize, Error)>, Abandoned> {
    match reader.read_batch_unless_stopped(ids, batch, stop) {
        Ok(BatchRead::Complete) => return Ok(Vec::new()),
        Ok(BatchRead::Abandoned) => return Err(Abandoned),
        Err(_) => {}
    }
    batch.clear();
    let mut failed = Vec::new();
    let mut span = Vec::new();
    for (k, &id) in ids.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Err(Abandoned);
        }
        match reader.read_span_into(id, &mut span) {
            Ok(payload) => batch.push(id, &span[payload]),
            Err(e) => {
                batch.push(id, &[]);
                failed.push((k, e));
            }
        }
    }
    Ok(failed)
}

/// A window is cut into parts of at least this many ids (when it has that many): a
/// part is one hand-off to a thread and back, which costs about as much as reading a
/// few hot records.
pub(super) const MIN_PART_IDS: usize = 16;

/// The payloads of a window from its parts (all present) and where each slot is.
pub(super) fn assemble(
    parts: Vec<Option<PartRead>>,
    slots: Vec<(usize, usize)>,
    spares: &Spares,
) -> Payloads {
    let mut batches = Vec::with_capacity(parts.len());
    // (part, index in part) -> error, for the rare parts with failed ids.
    let mut part_errors = BTreeMap::new();
    for (p, read) in parts.into_iter().flatten().enumerate() {
        for (j, e) in read.failed {
            part_errors.insert((p, j), e);
        }
        batches.push(read.batch);
    }
    let failed = if part_errors.is_empty() {
        Vec::new()
    } else {
        slots
            .iter()
            .enumerate()
            .filter_map(|(k, at)| Some((k, part_errors.remove(at)?)))
            .collect()
    };
    Payloads {
        parts: Parts::Scattered { batches, slots },
        failed,
        spares: spares.clone(),
    }
}

/// Cuts a window into at most `parts` id lists, each a set of whole runs of consecutive
/// ids (sorted), balanced by count. Also returns where each position of `ids` lands:
/// (list, index in the list). One part is the window as it is (the read finds its runs
/// itself), without sorting it.
pub(super) fn split_runs(ids: &[u64], parts: usize) -> (Vec<Vec<u64>>, Vec<(usize, usize)>) {
    if parts <= 1 {
        return (vec![ids.to_vec()], (0..ids.len()).map(|k| (0, k)).collect());
    }
    let mut by_id: Vec<usize> = (0..ids.len()).collect();
    by_id.sort_unstable_by_key(|&k| ids[k]);
    let target = ids.len().div_ceil(parts.max(1));
    let mut out: Vec<Vec<u64>> = Vec::new();
    let mut slots = vec![(0, 0); ids.len()];
    let mut current = Vec::new();
    let mut prev: Option<u64> = None;
    for &k in &by_id {
        let id = ids[k];
        let run_continues = prev.is_some_and(|p| id == p || id == p + 1);
        if !run_continues && current.len() >= target {
            out.push(std::mem::take(&mut current));
        }
        slots[k] = (out.len(), current.len());
        current.push(id);
        prev = Some(id);
    }
    if !current.is_empty() {
        out.push(current);
    }
    (out, slots)
}
