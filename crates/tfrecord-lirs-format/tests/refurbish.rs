//! The refurbish schedule's invariants (`docs/FORMAT.md` §7), as properties over n,
//! reuse factor, batch size, shards and epochs, and its golden values.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use tfrecord_lirs_format::error::Error;
use tfrecord_lirs_format::order::{EpochOrder, OrderParams, OrderVersion};
use tfrecord_lirs_format::refurbish::{
    final_seed, partial_seed, reuse_factor_from_f64, stateless_seed_pair, RefurbishParams,
    RefurbishSchedule, Use,
};

fn params(seed: u64, r: u64, batch: u64, shards: u64, shard: u64) -> RefurbishParams {
    RefurbishParams {
        seed,
        reuse_factor: r,
        batch_size: batch,
        num_shards: shards,
        shard_index: shard,
        order_version: OrderVersion::V2,
    }
}

fn uses(schedule: &RefurbishSchedule, epoch: u64) -> Vec<Use> {
    schedule.epoch(epoch).unwrap().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_epoch_is_balanced_and_every_id_is_refreshed_every_r_epochs(
        n in 0u64..300,
        r in 1u64..6,
        batch in 1u64..40,
        shards in 1u64..4,
        seed in any::<u64>(),
    ) {
        let epochs = 2 * r + 3;
        let mut all_ids = HashSet::new();
        for shard in 0..shards {
            let s = RefurbishSchedule::new(n, &params(seed, r, batch, shards, shard)).unwrap();
            let m = s.len();
            let mut shard_ids: Option<HashSet<u64>> = None;
            // (id, generation) → uses; id → epochs it was refreshed in.
            let mut served: HashMap<(u64, u64), u64> = HashMap::new();
            let mut refreshed: HashMap<u64, Vec<u64>> = HashMap::new();
            let mut last_refresh: HashMap<u64, u64> = HashMap::new();
            for e in 0..epochs {
                let epoch = uses(&s, e);
                prop_assert_eq!(epoch.len() as u64, m);
                // Each id once per epoch.
                let ids: HashSet<u64> = epoch.iter().map(|u| u.id).collect();
                prop_assert_eq!(ids.len() as u64, m);
                prop_assert!(ids.iter().all(|&id| id < n));
                // A shard keeps its ids across epochs (r > 1); r = 1 is today's order.
                if r > 1 {
                    match &shard_ids {
                        None => shard_ids = Some(ids.clone()),
                        Some(first) => prop_assert_eq!(first, &ids),
                    }
                }
                all_ids.extend(ids.iter().copied());
                // Refreshes per epoch.
                let count = epoch.iter().filter(|u| u.refresh).count() as u64;
                prop_assert_eq!(count, s.refreshes(e));
                if e == 0 || r == 1 {
                    prop_assert_eq!(count, m);
                } else {
                    prop_assert!(count == m / r || count == m.div_ceil(r), "{} of {}", count, m);
                }
                // Refreshes per batch within ±1 of proportional, the short last batch too.
                let schedule = s.epoch(e).unwrap();
                for (b, chunk) in epoch.chunks(batch as usize).enumerate() {
                    let k = chunk.iter().filter(|u| u.refresh).count() as u64;
                    prop_assert_eq!(k, schedule.batch_refreshes(b as u64));
                    let (lhs, rhs) = (u128::from(k) * u128::from(m), u128::from(count) * chunk.len() as u128);
                    prop_assert!(lhs.abs_diff(rhs) < u128::from(m), "batch {} has {} refreshes", b, k);
                }
                for u in &epoch {
                    if u.refresh {
                        prop_assert_eq!(u.generation, e);
                        // The entry this refresh makes over (with r = 1 and shards, the id
                        // was in another shard the epoch before).
                        let replaced = if r == 1 { e.checked_sub(1) } else { last_refresh.get(&u.id).copied() };
                        prop_assert_eq!(s.replaced_generation(u.id, e), replaced);
                        refreshed.entry(u.id).or_default().push(e);
                        last_refresh.insert(u.id, e);
                    } else {
                        // A reuse serves the id's last refresh.
                        prop_assert_eq!(Some(&u.generation), last_refresh.get(&u.id));
                    }
                    prop_assert_eq!(s.generation(u.id, e), Some(u.generation));
                    *served.entry((u.id, u.generation)).or_default() += 1;
                }
            }
            // Each (id, generation) served at most r times.
            prop_assert!(served.values().all(|&c| c <= r));
            // Refreshed exactly every r epochs after epoch 0 (with r = 1 and shards,
            // today's order re-deals the ids among shards every epoch).
            if r == 1 && shards > 1 {
                continue;
            }
            for epochs_of in refreshed.values() {
                prop_assert_eq!(epochs_of[0], 0);
                prop_assert!(epochs_of[1] <= r);
                prop_assert!(epochs_of[1..].windows(2).all(|w| w[1] - w[0] == r));
            }
        }
        prop_assert_eq!(all_ids.len() as u64, n);
    }

    #[test]
    fn same_seed_same_schedule_and_a_resume_continues_exactly(
        n in 1u64..200,
        r in 1u64..5,
        batch in 1u64..20,
        shards in 1u64..3,
        epoch in 0u64..8,
        seed in any::<u64>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let p = params(seed, r, batch, shards, shards - 1);
        let a = RefurbishSchedule::new(n, &p).unwrap();
        let b = RefurbishSchedule::new(n, &p).unwrap();
        let full = uses(&a, epoch);
        prop_assert_eq!(&full, &uses(&b, epoch));
        if full.is_empty() {
            return Ok(());
        }
        let position = cut.index(full.len() + 1) as u64;
        let mut resumed = b.epoch(epoch).unwrap();
        resumed.seek(position).unwrap();
        let rest: Vec<Use> = resumed.collect();
        prop_assert_eq!(&rest[..], &full[position as usize..]);
        let e = a.epoch(epoch).unwrap();
        for (i, u) in full.iter().enumerate() {
            prop_assert_eq!(e.at(i as u64).unwrap(), *u);
        }
    }

    #[test]
    fn reuse_factor_one_is_todays_order(
        n in 0u64..300,
        batch in 1u64..40,
        shards in 1u64..4,
        epoch in 0u64..5,
        seed in any::<u64>(),
        v2 in any::<bool>(),
    ) {
        let version = if v2 { OrderVersion::V2 } else { OrderVersion::V1 };
        for shard in 0..shards {
            let mut p = params(seed, 1, batch, shards, shard);
            p.order_version = version;
            let got = uses(&RefurbishSchedule::new(n, &p).unwrap(), epoch);
            let order = OrderParams { seed, epoch, page_aware: false, num_shards: shards, shard_index: shard };
            let today: Vec<u64> = EpochOrder::of_len(n, &order, version).unwrap().collect();
            prop_assert_eq!(got.iter().map(|u| u.id).collect::<Vec<_>>(), today);
            prop_assert!(got.iter().all(|u| u.refresh && u.generation == epoch));
        }
    }
}

#[test]
fn refreshes_and_reuses_are_placed_randomly_within_a_batch() {
    let s = RefurbishSchedule::new(1000, &params(3, 2, 10, 1, 0)).unwrap();
    let epoch = uses(&s, 1);
    let mut refresh_first = 0;
    let mut slot_refreshes = [0u32; 10];
    for chunk in epoch.chunks(10) {
        let k = chunk.iter().filter(|u| u.refresh).count();
        if chunk[..k].iter().all(|u| u.refresh) {
            refresh_first += 1;
        }
        for (i, u) in chunk.iter().enumerate() {
            slot_refreshes[i] += u32::from(u.refresh);
        }
    }
    // 100 batches of 5 refreshes in 10 slots: "refreshes first" by chance in 1 of 252.
    assert!(
        refresh_first <= 5,
        "{refresh_first} batches start with their refreshes"
    );
    // Every slot holds refreshes in some batches and reuses in others (50 expected).
    assert!(
        slot_refreshes.iter().all(|&c| (20..=80).contains(&c)),
        "{slot_refreshes:?}"
    );
}

#[test]
fn unsharded_schedules_shuffle_over_all_ids_and_shards_keep_theirs() {
    // Unsharded: consecutive ids are spread over the epoch (a full-range shuffle).
    let s = RefurbishSchedule::new(64, &params(9, 3, 8, 1, 0)).unwrap();
    for e in 0..4 {
        let ids: Vec<u64> = uses(&s, e).iter().map(|u| u.id).collect();
        assert_ne!(ids, (0..64).collect::<Vec<_>>());
    }
    // Sharded: shard 0's set is not the first contiguous range of ids.
    let s = RefurbishSchedule::new(64, &params(9, 3, 8, 2, 0)).unwrap();
    let mut ids: Vec<u64> = uses(&s, 0).iter().map(|u| u.id).collect();
    ids.sort_unstable();
    assert_eq!(ids.len(), 32);
    assert_ne!(ids, (0..32).collect::<Vec<_>>());
}

#[test]
fn wrong_parameters_are_refused_naming_them() {
    let err = RefurbishSchedule::new(10, &params(0, 0, 4, 1, 0)).unwrap_err();
    assert_eq!(kind(&err), "InvalidArgument");
    assert!(err.to_string().contains("reuse_factor"), "{err}");
    let err = RefurbishSchedule::new(10, &params(0, 2, 0, 1, 0)).unwrap_err();
    assert!(err.to_string().contains("batch_size"), "{err}");
    let err = RefurbishSchedule::new(10, &params(0, 2, 4, 2, 2)).unwrap_err();
    assert!(err.to_string().contains("shard_index"), "{err}");
    for bad in [0.0, 0.5, 1.5, -2.0, f64::NAN, f64::INFINITY] {
        let err = reuse_factor_from_f64(bad).unwrap_err();
        assert_eq!(kind(&err), "InvalidArgument");
        assert!(err.to_string().contains("reuse_factor"), "{err}");
    }
    assert_eq!(reuse_factor_from_f64(3.0).unwrap(), 3);
    let s = RefurbishSchedule::new(10, &params(0, 2, 4, 1, 0)).unwrap();
    let err = s.epoch(0).unwrap().seek(11).unwrap_err();
    assert_eq!(kind(&err), "InvalidArgument");
    assert!(s.epoch(0).unwrap().at(10).is_err());
    assert_eq!(s.generation(10, 0), None);
}

#[test]
fn a_saved_state_of_other_options_is_refused_naming_what_differs() {
    let p = params(1, 3, 4, 2, 1);
    let s = RefurbishSchedule::new(10, &p).unwrap();
    s.check_state(1, &p, 5).unwrap();
    let err = s.check_state(2, &p, 0).unwrap_err();
    assert!(
        err.to_string().contains("refurbish_schedule_version=2"),
        "{err}"
    );
    let err = s
        .check_state(
            1,
            &RefurbishParams {
                reuse_factor: 2,
                ..p
            },
            0,
        )
        .unwrap_err();
    assert!(err.to_string().contains("reuse_factor=2"), "{err}");
    let err = s
        .check_state(1, &RefurbishParams { seed: 9, ..p }, 0)
        .unwrap_err();
    assert!(err.to_string().contains("seed=9"), "{err}");
    let err = s.check_state(1, &p, 6).unwrap_err();
    assert_eq!(kind(&err), "InvalidArgument");
    assert!(err.to_string().contains("position 6"), "{err}");
}

#[test]
fn seeds_follow_id_generation_and_epoch() {
    assert_eq!(partial_seed(1, 2, 3), partial_seed(1, 2, 3));
    assert_ne!(partial_seed(1, 2, 3), partial_seed(1, 2, 4));
    assert_ne!(partial_seed(1, 2, 3), partial_seed(1, 3, 3));
    assert_ne!(partial_seed(1, 2, 3), partial_seed(2, 2, 3));
    assert_ne!(final_seed(1, 2, 3), final_seed(1, 2, 4));
    assert_ne!(final_seed(1, 2, 3), partial_seed(1, 2, 3));
}

/// Version-stable (`docs/FORMAT.md` §7): the high and low 32 bits, never negative.
#[test]
fn stateless_seed_pair_is_the_high_and_low_halves() {
    assert_eq!(stateless_seed_pair(GOLDEN_PARTIAL), [429777245, 3638896093]);
    assert_eq!(stateless_seed_pair(GOLDEN_FINAL), [2297934111, 3364546311]);
    assert_eq!(stateless_seed_pair(u64::MAX), [0xFFFF_FFFF, 0xFFFF_FFFF]);
    assert_eq!(stateless_seed_pair(0), [0, 0]);
}

/// Version-stable: these values are `docs/FORMAT.md` §7's golden values.
#[test]
fn golden_schedule_is_version_stable() {
    let s = RefurbishSchedule::new(10, &params(42, 3, 4, 1, 0)).unwrap();
    let show = |e: u64| -> Vec<(u64, bool, u64)> {
        uses(&s, e)
            .iter()
            .map(|u| (u.id, u.refresh, u.generation))
            .collect()
    };
    let golden: Vec<Vec<(u64, bool, u64)>> = (0..3).map(show).collect();
    assert_eq!(partial_seed(42, 7, 3), GOLDEN_PARTIAL);
    assert_eq!(final_seed(42, 7, 3), GOLDEN_FINAL);
    assert_eq!(golden, golden_schedule());
}

const GOLDEN_PARTIAL: u64 = 1845879215478875613;
const GOLDEN_FINAL: u64 = 9869551858472380167;

fn golden_schedule() -> Vec<Vec<(u64, bool, u64)>> {
    vec![
        vec![
            (9, true, 0),
            (7, true, 0),
            (5, true, 0),
            (6, true, 0),
            (1, true, 0),
            (2, true, 0),
            (0, true, 0),
            (8, true, 0),
            (4, true, 0),
            (3, true, 0),
        ],
        vec![
            (5, true, 1),
            (4, false, 0),
            (6, false, 0),
            (7, false, 0),
            (3, false, 0),
            (1, false, 0),
            (2, true, 1),
            (0, false, 0),
            (8, true, 1),
            (9, false, 0),
        ],
        vec![
            (4, true, 2),
            (5, false, 1),
            (3, false, 0),
            (0, false, 0),
            (8, false, 1),
            (7, true, 2),
            (1, false, 0),
            (2, false, 1),
            (9, false, 0),
            (6, true, 2),
        ],
    ]
}

/// Which of the format crate's errors `e` is.
fn kind(e: &Error) -> &'static str {
    match e {
        Error::InvalidArgument(_) => "InvalidArgument",
        Error::DataLoss(_) => "DataLoss",
        _ => "other",
    }
}
