//! Jobs that share one directory store while they run (`docs/FORMAT.md` §7.1, claims):
//! each `(id, generation)` is computed once in all, a job that finds another's claim
//! waits for its entry, and a claim whose holder died (a real process, killed) is
//! taken over. Every job's outputs are those it computes alone.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use tfrecord_lirs::{
    Fetch, Lookup, Partial, PartialStore, RefurbishParams, RefurbishSchedule, Refurbisher,
    StoreIdentity, Use,
};

const BIG: u64 = 1 << 30;

fn identity() -> StoreIdentity {
    StoreIdentity {
        dataset: "shared".to_string(),
        partial: "crop-flip v1".to_string(),
        seed: 7,
    }
}

fn job(dir: &std::path::Path, r: u64) -> Refurbisher {
    let params = RefurbishParams {
        seed: 7,
        reuse_factor: r,
        batch_size: 8,
        ..RefurbishParams::default()
    };
    let store = PartialStore::open_dir(dir, &identity(), BIG).unwrap();
    Refurbisher::new(
        RefurbishSchedule::new(40, &params).unwrap(),
        Arc::new(store),
    )
}

fn partial_of(id: u64, seed: u64) -> Vec<u8> {
    let mut out = id.to_le_bytes().to_vec();
    out.extend_from_slice(&seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
    out
}

/// The partial outputs `job` uses over `epochs`; each computation adds to `computed`.
fn run(job: &Refurbisher, epochs: u64, computed: &AtomicU64) -> Vec<Vec<u8>> {
    let mut outputs = Vec::new();
    for epoch in 0..epochs {
        let mut uses = Vec::new();
        job.schedule()
            .epoch(epoch)
            .unwrap()
            .next_uses(usize::MAX, &mut uses);
        for u in uses {
            let step = job.partial(u.id, u.refresh, u.generation, epoch, |seed| {
                computed.fetch_add(1, Ordering::Relaxed);
                let p = partial_of(u.id, seed);
                Ok::<_, tfrecord_lirs::Error>((p.clone(), p))
            });
            outputs.push(match step.unwrap() {
                Partial::Stored(bytes) | Partial::Computed(bytes) => bytes,
            });
        }
    }
    outputs
}

#[test]
fn three_concurrent_jobs_compute_each_entry_once_and_yield_a_solo_jobs_outputs() {
    let (r, epochs) = (2, 4);
    let solo_dir = tempfile::tempdir().unwrap();
    let solo_count = AtomicU64::new(0);
    let solo = run(&job(solo_dir.path(), r), epochs, &solo_count);
    let dir = tempfile::tempdir().unwrap();
    let computed = AtomicU64::new(0);
    let jobs: Vec<Refurbisher> = (0..3).map(|_| job(dir.path(), r)).collect();
    let outputs: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
        let running: Vec<_> = jobs
            .iter()
            .map(|j| s.spawn(|| run(j, epochs, &computed)))
            .collect();
        running.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for out in &outputs {
        assert_eq!(out, &solo);
    }
    // Once in all: a job that comes to an entry another is computing waits for it.
    assert_eq!(
        computed.load(Ordering::Relaxed),
        solo_count.load(Ordering::Relaxed)
    );
    let stats: Vec<_> = jobs.iter().map(|j| j.store().stats()).collect();
    let done: u64 = stats.iter().map(|s| s.refreshes + s.recomputes).sum();
    assert_eq!(done, solo_count.load(Ordering::Relaxed));
    // Every refresh a job did not compute it took from another.
    let refreshes = solo_count.load(Ordering::Relaxed);
    for s in &stats {
        assert_eq!(s.refreshes + s.shared, refreshes);
    }
    // No claim is left behind.
    let left = std::fs::read_dir(jobs[0].store().dir().unwrap())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".claim-")
        })
        .count();
    assert_eq!(left, 0);
}

/// Spins until `store` has waited for a claim `n` times (no sleep, no timing).
fn until_waits(store: &PartialStore, n: u64) {
    while store.stats().waits < n {
        std::thread::yield_now();
    }
}

/// The thread of a holder's step ([`holding`]).
type Held<'scope> = std::thread::ScopedJoinHandle<'scope, tfrecord_lirs::Result<Partial<Vec<u8>>>>;

/// `holder` computing `(id, 0)` on a thread of `s`; returns once that thread holds the
/// claim (inside its computation), with the thread and the sender that lets it finish.
fn holding<'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    holder: &'scope Refurbisher,
    id: u64,
) -> (Held<'scope>, mpsc::Sender<()>) {
    let (go, wait_for_go) = mpsc::channel::<()>();
    let (inside, is_inside) = mpsc::channel::<()>();
    let held = s.spawn(move || {
        holder.partial(id, true, 0, 0, |seed| {
            inside.send(()).unwrap();
            wait_for_go.recv().unwrap();
            let p = partial_of(id, seed);
            Ok::<_, tfrecord_lirs::Error>((p.clone(), p))
        })
    });
    is_inside.recv().unwrap();
    (held, go)
}

#[test]
fn a_job_that_finds_a_claim_waits_for_the_holders_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (holder, waiter) = (job(dir.path(), 1), job(dir.path(), 1));
    std::thread::scope(|s| {
        let (held, go) = holding(s, &holder, 5);
        let waiting = s.spawn(|| {
            waiter.partial(5, true, 0, 0, |_| -> tfrecord_lirs::Result<(Vec<u8>, _)> {
                panic!("the holder computes it")
            })
        });
        until_waits(waiter.store(), 1);
        go.send(()).unwrap();
        let expected = partial_of(5, waiter.partial_seed(5, 0));
        assert_eq!(
            held.join().unwrap().unwrap(),
            Partial::Computed(expected.clone())
        );
        assert_eq!(waiting.join().unwrap().unwrap(), Partial::Stored(expected));
    });
    let s = waiter.store().stats();
    assert_eq!((s.waits, s.shared, s.hits, s.taken_over), (1, 1, 1, 0));
}

#[test]
fn a_batch_puts_off_the_use_another_job_is_computing_and_computes_the_rest_first() {
    let dir = tempfile::tempdir().unwrap();
    let (holder, batch) = (job(dir.path(), 1), job(dir.path(), 1));
    let uses: Vec<_> = [5, 6, 7]
        .iter()
        .map(|&id| {
            (
                Use {
                    id,
                    refresh: true,
                    generation: 0,
                },
                0,
            )
        })
        .collect();
    std::thread::scope(|s| {
        let (held, go) = holding(s, &holder, 5);
        // Uses 6 and 7 are computed while 5 is claimed; the last of them lets the
        // holder finish, then 5 is read from the store. A step taking the uses in
        // order would wait for 5 first, until the claim wait's bound, then compute all
        // three itself.
        let mut computed = Vec::new();
        let out = batch
            .partials(&uses, |i, seed| {
                let id = uses[i].0.id;
                computed.push(id);
                if id == 7 {
                    go.send(()).unwrap();
                }
                let p = partial_of(id, seed);
                Ok::<_, tfrecord_lirs::Error>((p.clone(), p))
            })
            .unwrap();
        assert_eq!(computed, vec![6, 7]);
        let expected = |id| partial_of(id, batch.partial_seed(id, 0));
        assert_eq!(
            held.join().unwrap().unwrap(),
            Partial::Computed(expected(5))
        );
        assert_eq!(
            out,
            vec![
                Partial::Stored(expected(5)),
                Partial::Computed(expected(6)),
                Partial::Computed(expected(7)),
            ]
        );
    });
    let s = batch.store().stats();
    assert_eq!((s.hits, s.misses, s.shared), (1, 2, 1));
}

#[test]
fn a_killed_holders_claim_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let store = PartialStore::open_dir(dir.path(), &identity(), BIG).unwrap();
    let claim = store.dir().unwrap().join(".claim-3.0");
    // A process holding the claim as a member does (`flock`), until it is killed.
    let mut holder = Command::new("flock")
        .arg(&claim)
        .args(["sh", "-c", "echo held; exec cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the flock utility");
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "held\n");
    std::thread::scope(|s| {
        let waiting = s.spawn(|| store.fetch(3, 0));
        until_waits(&store, 1);
        holder.kill().unwrap(); // SIGKILL
        holder.wait().unwrap();
        match waiting.join().unwrap() {
            Fetch::Compute(Some(claim)) => drop(claim),
            other => panic!("the claim was not taken over: {other:?}"),
        }
    });
    let s = store.stats();
    assert_eq!((s.waits, s.taken_over, s.misses), (1, 1, 1));
    assert!(!claim.exists());
}

#[test]
fn a_memory_store_serves_worker_processes_only_when_nothing_is_reused() {
    let memory = PartialStore::memory(&identity(), BIG);
    for reuse_factor in [None, Some(2)] {
        let err = Refurbisher::check_worker_process(&memory, reuse_factor).unwrap_err();
        assert_eq!(err.kind(), tfrecord_lirs::ErrorKind::InvalidArgument);
    }
    Refurbisher::check_worker_process(&memory, Some(1)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let disk = PartialStore::open_dir(dir.path(), &identity(), BIG).unwrap();
    Refurbisher::check_worker_process(&disk, None).unwrap();
}

/// The step in two halves (tf.data's kernels): the claim of a lookup's miss is held by
/// the step until its keep, then the other member reads the entry.
#[test]
fn a_two_half_step_holds_its_claim_from_lookup_to_keep() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (job(dir.path(), 2), job(dir.path(), 2));
    assert_eq!(a.claim_lookup(3, 0, false), Lookup::Compute);
    assert_eq!(b.claim_lookup(3, 0, false), Lookup::Busy);
    assert!(a.keep_claimed(3, 0, 0, true, b"out").unwrap());
    assert_eq!(b.claim_lookup(3, 0, false), Lookup::Stored(b"out".to_vec()));
    // A waiting lookup waits for the holder's keep and reads its entry.
    assert_eq!(a.claim_lookup(4, 0, false), Lookup::Compute);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| b.claim_lookup(4, 0, true));
        until_waits(b.store(), 1);
        a.keep_claimed(4, 0, 0, true, b"four").unwrap();
        assert_eq!(waiting.join().unwrap(), Lookup::Stored(b"four".to_vec()));
    });
    assert_eq!(b.store().stats().waits, 1);
}

#[test]
fn a_step_dropped_between_lookup_and_keep_releases_its_claim() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (job(dir.path(), 2), job(dir.path(), 2));
    assert_eq!(a.claim_lookup(3, 0, false), Lookup::Compute);
    let clone = a.clone();
    drop(a);
    // A clone of the step (another kernel's) still holds it.
    assert_eq!(b.claim_lookup(3, 0, false), Lookup::Busy);
    drop(clone);
    // Released: no keep came, so the other member claims it (no wait, no take-over).
    assert_eq!(b.claim_lookup(3, 0, false), Lookup::Compute);
    let s = b.store().stats();
    assert_eq!((s.waits, s.taken_over), (0, 0));
    let c = job(dir.path(), 2);
    assert_eq!(c.claim_lookup(3, 0, false), Lookup::Busy);
}

/// Parallel calls in one process: a reuse that comes while this step holds the
/// refresh's claim computes at once (never waits for its own step's claim), and the
/// first keep stores the entry and releases the claim.
#[test]
fn a_step_never_waits_for_its_own_claim() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (job(dir.path(), 2), job(dir.path(), 2));
    assert_eq!(a.claim_lookup(3, 0, false), Lookup::Compute);
    assert_eq!(a.claim_lookup(3, 0, false), Lookup::Compute);
    assert_eq!(a.clone().claim_lookup(3, 0, true), Lookup::Compute);
    assert_eq!(a.store().stats().waits, 0);
    assert!(a.keep_claimed(3, 0, 1, false, b"out").unwrap());
    assert_eq!(b.claim_lookup(3, 0, false), Lookup::Stored(b"out".to_vec()));
    // The later keeps of the same entry store it again (the same bytes).
    assert!(a.keep_claimed(3, 0, 0, true, b"out").unwrap());
    assert_eq!(b.claim_lookup(3, 0, false), Lookup::Stored(b"out".to_vec()));
}
