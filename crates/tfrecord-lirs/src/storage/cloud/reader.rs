//! One object read by ranged GETs: a positioned read blocks its caller on the
//! runtime; the ranges of a fetch are requests started on the runtime, neighbours
//! merged, bounded and cancelled by their [`ReadScope`].

use std::io;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::errors::store_error;
use super::process::Located;
use super::{MAX_MERGED_GET, MERGE_GAP};
use crate::storage::ranged::{merge_ranges, RangedRead, RangesDone, ReadScope};
use crate::storage::ReadAt;

/// One object, read by ranged GETs (through the runtime and client of the process
/// that reads, which may be a child forked after the open).
pub(super) struct ObjectReader {
    pub(super) object: Located,
    pub(super) size: u64,
    pub(super) identity: Option<String>,
}

impl ReadAt for ObjectReader {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let end = self.size.min(offset.saturating_add(buf.len() as u64));
        let range: Range<u64> = offset..end;
        let (process, store) = self.object.here()?;
        let bytes = process
            .runtime
            .block_on(store.get_range(&self.object.path, range))
            .map_err(|e| self.object.error(e))?;
        // A store that answers with more than was asked is not trusted with the rest.
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        Ok(n)
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn ranged(&self) -> Option<&dyn RangedRead> {
        Some(self)
    }

    fn identity(&self) -> Option<String> {
        self.identity.clone()
    }
}

impl RangedRead for ObjectReader {
    fn read_ranges(&self, ranges: &[Range<u64>], scope: &ReadScope, done: RangesDone) {
        if let Some(r) = ranges.iter().find(|r| r.end > self.size || r.start > r.end) {
            return done(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "bytes {}..{} of an object of {} bytes",
                    r.start, r.end, self.size
                ),
            )));
        }
        let (process, store) = match self.object.here() {
            Ok(here) => here,
            Err(e) => return done(Err(e)),
        };
        let (gets, at) = merge_ranges(ranges, MERGE_GAP, MAX_MERGED_GET);
        let lens: Vec<usize> = ranges.iter().map(|r| (r.end - r.start) as usize).collect();
        let path = self.object.path.clone();
        let scheme = self.object.scheme.clone();
        let gate = Arc::clone(&scope.gate);
        let throttled = Arc::clone(&self.object.client.throttled);
        gate.starting(throttled.load(Ordering::Relaxed));
        let (in_flight, unanswered) = scope.counters();
        // Counted from now until answered (or dropped with the task).
        let asked: Vec<Counted> = gets.iter().map(|_| Counted::new(&unanswered)).collect();
        let task = process.runtime.spawn(async move {
            let requests =
                gets.into_iter().zip(asked).map(|(range, asked)| {
                    let (store, path, gate, in_flight) = (&store, &path, &gate, &in_flight);
                    let throttled = &throttled;
                    async move {
                        let _asked = asked;
                        // Closed only if the scope is gone, and with it whoever waits.
                        let permit = gate.permits.acquire().await.map_err(|e| {
                            object_store::Error::Generic {
                                store: "tfrecord-lirs",
                                source: Box::new(e),
                            }
                        })?;
                        let counted = Counted::new(in_flight);
                        let got = store.get_range(path, range).await;
                        drop(counted);
                        gate.answered(permit, throttled.load(Ordering::Relaxed));
                        got
                    }
                });
            match futures::future::try_join_all(requests).await {
                Ok(bytes) => {
                    let slices: Option<Vec<&[u8]>> = at
                        .iter()
                        .zip(&lens)
                        .map(|(&(get, from), &len)| bytes.get(get)?.get(from..from + len))
                        .collect();
                    match slices {
                        Some(slices) => done(Ok(&slices)),
                        None => done(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the storage answered a ranged GET with fewer bytes than asked",
                        ))),
                    }
                }
                Err(e) => done(Err(store_error(&scheme, e))),
            }
        });
        scope.track(task.abort_handle());
    }
}

/// One request, counted while it lives (a cancelled one too).
pub(super) struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Counted {
    fn new(counter: &Arc<std::sync::atomic::AtomicUsize>) -> Counted {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Counted(Arc::clone(counter))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}
