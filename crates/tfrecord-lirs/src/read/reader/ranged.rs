//! A batch read as requests in flight on the storage's runtime (object storage, see
//! `RangedRead`): the runs of neighbouring spans are planned on the caller's thread
//! (as `copied.rs` cuts them), their bytes fetched with no thread waiting on them, and
//! the spans decoded and checked (CRCs included) when the last run is in. Anything
//! this path does not handle (a bad id or table entry, a span too long to read whole,
//! a failed request, a record that does not decode) is left to the positioned reads of
//! the copied strategy, which name the instance and byte as every read does: the
//! callback then gets `None`.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use crate::read::batch::Batch;
use crate::read::stats::Tally;
use crate::storage::ranged::ReadScope;

use super::{Reader, MAX_WHOLE_SPAN_READ};

/// The runs of a batch: what [`Reader::read_batch_ranged`] fetches.
pub(crate) struct RangedPlan {
    /// Positions of the batch's ids, by id.
    by_id: Vec<usize>,
    runs: Vec<Run>,
}

/// One run of consecutive ids of one file: one range read.
struct Run {
    f: usize,
    first: u64,
    /// Where its ids are in `by_id`.
    ks: std::ops::Range<usize>,
    /// The spans of its ids, in id order; the range is the first's start to the last's
    /// end.
    spans: Vec<(u64, u64)>,
}

impl Run {
    fn range(&self) -> std::ops::Range<u64> {
        self.spans[0].0..self.spans[self.spans.len() - 1].1
    }
}

/// What the callback of [`Reader::read_batch_ranged`] gets: the bytes of every run in
/// (or a request failed); [`Assembled::decode`] makes them the batch.
pub(crate) type RangedDone = Box<dyn FnOnce(Assembled) + Send>;

/// A batch's bytes, in: [`decode`](Assembled::decode) it.
pub(crate) struct Assembled(Assembly);

impl Assembled {
    /// The batch, its records decoded and checked; `None`: read it with the copied
    /// strategy, which reports what went wrong (a request failed, a record does not
    /// decode).
    pub(crate) fn decode(mut self, reader: &Reader) -> Option<Batch> {
        if self.0.failed {
            return None;
        }
        let batch = std::mem::take(&mut self.0.batch);
        // A panic on a storage thread would leave the caller waiting: the copied read
        // reports it instead.
        catch_unwind(AssertUnwindSafe(|| self.0.decode(reader, batch)))
            .ok()
            .flatten()
    }
}

impl Reader {
    /// Whether batches of this reader can be read by [`read_batch_ranged`](Self::read_batch_ranged):
    /// every file's source starts its reads as requests (object storage).
    pub(crate) fn reads_ranged(&self) -> bool {
        !self.files.is_empty() && self.files.iter().all(|f| f.src.ranged().is_some())
    }

    /// The runs of `ids`, or `None` where one of them needs the copied strategy.
    pub(crate) fn plan_ranged(&self, ids: &[u64]) -> Option<RangedPlan> {
        let mut by_id: Vec<usize> = (0..ids.len()).collect();
        by_id.sort_unstable_by_key(|&i| ids[i]);
        let mut runs = Vec::new();
        let mut spans = Vec::new();
        let mut k = 0;
        while k < by_id.len() {
            let first = ids[by_id[k]];
            self.check_id(first).ok()?;
            let (f, i) = self.layout.locate(first);
            let span = self.span(f, i, first).ok()?;
            if span.1 - span.0 > MAX_WHOLE_SPAN_READ || self.checks_in_pieces(f, span.0, span.1) {
                return None;
            }
            self.files[f].src.ranged()?;
            let end = self.extend_run(ids, &by_id, k, (f, i), span, &mut spans);
            runs.push(Run {
                f,
                first,
                ks: k..end,
                spans: std::mem::take(&mut spans),
            });
            k = end;
        }
        Some(RangedPlan { by_id, runs })
    }

    /// Reads `ids` as `plan` says into `batch` (replacing its contents), the requests
    /// counted against `scope`; calls `done` once, on a storage thread (or this one),
    /// when every run is in (see the module docs). Dropping `scope` first cancels the
    /// requests, and `done` is never called.
    pub(crate) fn read_batch_ranged(
        &self,
        ids: Vec<u64>,
        plan: RangedPlan,
        mut batch: Batch,
        scope: &ReadScope,
        done: RangedDone,
    ) {
        batch.clear();
        let mut by_file: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (r, run) in plan.runs.iter().enumerate() {
            by_file.entry(run.f).or_default().push(r);
        }
        let bases = vec![0; plan.runs.len()];
        let empty = by_file.is_empty();
        let state = Arc::new(Mutex::new(Assembly {
            batch,
            bases,
            files_left: by_file.len(),
            failed: false,
            ids,
            plan,
            done: Some(done),
        }));
        if empty {
            return lock(&state).finish();
        }
        for (f, runs) in by_file {
            let Some(src) = self.files[f].src.ranged() else {
                // plan_ranged checked every file of the plan.
                return;
            };
            let ranges: Vec<_> = {
                let s = lock(&state);
                runs.iter().map(|&r| s.plan.runs[r].range()).collect()
            };
            let state = Arc::clone(&state);
            src.read_ranges(
                &ranges,
                scope,
                Box::new(move |got| {
                    let mut s = lock(&state);
                    match got {
                        Ok(bytes) => s.copy_in(&runs, bytes),
                        Err(_) => s.failed = true,
                    }
                    s.files_left -= 1;
                    if s.files_left == 0 {
                        s.finish();
                    }
                }),
            );
        }
    }
}

fn lock(state: &Mutex<Assembly>) -> std::sync::MutexGuard<'_, Assembly> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// A batch being put together as its files' reads come in.
struct Assembly {
    batch: Batch,
    /// Where each run's bytes start in the batch's buffer.
    bases: Vec<usize>,
    files_left: usize,
    failed: bool,
    ids: Vec<u64>,
    plan: RangedPlan,
    done: Option<RangedDone>,
}

impl Assembly {
    /// Copies the bytes of `runs` (one file's, in that order) into the batch.
    fn copy_in(&mut self, runs: &[usize], bytes: &[&[u8]]) {
        for (&r, got) in runs.iter().zip(bytes) {
            let range = self.plan.runs[r].range();
            let len = got.len();
            if len as u64 != range.end - range.start {
                self.failed = true;
                return;
            }
            self.batch.align_for(range.start, len);
            self.bases[r] = self.batch.used;
            self.batch.tail(len).copy_from_slice(got);
            self.batch.used += len;
        }
    }

    /// Hands what came in to `done`.
    fn finish(&mut self) {
        let Some(done) = self.done.take() else { return };
        done(Assembled(Assembly {
            batch: std::mem::take(&mut self.batch),
            bases: std::mem::take(&mut self.bases),
            files_left: 0,
            failed: self.failed,
            ids: std::mem::take(&mut self.ids),
            plan: RangedPlan {
                by_id: std::mem::take(&mut self.plan.by_id),
                runs: std::mem::take(&mut self.plan.runs),
            },
            done: None,
        }));
    }

    fn decode(&mut self, reader: &Reader, mut batch: Batch) -> Option<Batch> {
        let n = self.ids.len();
        batch.starts.resize(n, 0);
        batch.ends.resize(n, 0);
        let mut tally = Tally::default();
        for (r, run) in self.plan.runs.iter().enumerate() {
            let range = run.range();
            let base = self.bases[r];
            for &pos in &self.plan.by_id[run.ks.clone()] {
                let id = self.ids[pos];
                let (s, e) = run.spans[(id - run.first) as usize];
                let at = base + (s - range.start) as usize;
                let span = &batch.buf[at..base + (e - range.start) as usize];
                // A record that does not decode: the copied read reports it (and looks
                // at the file again, which is not done on a storage thread).
                let payload = reader
                    .decode_span_as_opened(run.f, id, s, e, span, reader.verify_payload_crc)
                    .ok()?;
                batch.starts[pos] = at + payload.start;
                batch.ends[pos] = at + payload.end;
            }
            reader.note(&mut tally, run.f, range.start, range.end - range.start);
        }
        reader.add(tally);
        batch.ids.extend_from_slice(&self.ids);
        Some(batch)
    }
}
