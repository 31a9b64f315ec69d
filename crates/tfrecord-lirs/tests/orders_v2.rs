//! Order version 2 (FORMAT.md §5.8): golden values, permutations and shards, the units
//! kept together, and its statistics against order version 1 and a true shuffle (fixed
//! seeds, so every figure below is deterministic; thresholds are far tails, p ≈ 10⁻⁴).

mod common;

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use common::{payload, write_padded, write_plain};
use tfrecord_lirs::{
    ids_per_unit, FetchOptions, Fetcher, Fit, OrderParams, OrderV2, OrderVersion, Reader,
    ReaderOptions, TFRecordLIRS,
};

fn params(seed: u64, epoch: u64, page_aware: bool, k: u64, i: u64) -> OrderParams {
    OrderParams {
        seed,
        epoch,
        page_aware,
        num_shards: k,
        shard_index: i,
    }
}

fn all_ids(order: &OrderV2) -> Vec<u64> {
    let mut ids = Vec::new();
    order.ids_into(0..order.len(), &mut ids).unwrap();
    ids
}

fn order(n: u64, c: u64, s: OrderParams) -> Vec<u64> {
    all_ids(&OrderV2::new(n, c, &s).unwrap())
}

/// Pins the algorithm: if this changes, every "same seed, same order" of version 2
/// breaks. The same values are in FORMAT.md §5.8 and tests/test_order_v2_spec.py.
#[test]
fn golden_orders_v2_are_version_stable() {
    assert_eq!(
        order(10, 1, params(42, 0, false, 1, 0)),
        [9, 5, 6, 8, 3, 4, 0, 2, 1, 7]
    );
    assert_eq!(
        order(10, 1, params(42, 1, false, 1, 0)),
        [6, 1, 3, 4, 8, 9, 2, 5, 0, 7]
    );
    assert_eq!(
        order(50, 7, params(42, 0, true, 1, 0)),
        [
            48, 43, 46, 44, 47, 42, 45, 17, 14, 20, 19, 18, 16, 15, 31, 34, 28, 29, 30, 32, 33, 9,
            7, 8, 13, 10, 11, 12, 35, 39, 40, 38, 37, 41, 36, 4, 2, 3, 1, 5, 0, 6, 49, 26, 23, 27,
            25, 22, 21, 24
        ]
    );
    assert_eq!(
        order(100, 1, params(7, 3, false, 3, 1)),
        [
            27, 12, 81, 60, 83, 6, 46, 47, 15, 52, 72, 53, 85, 97, 77, 61, 20, 65, 44, 99, 56, 38,
            69, 66, 8, 87, 11, 36, 28, 7, 50, 13, 10
        ]
    );
    assert_eq!(
        order(100, 6, params(7, 3, true, 3, 2)),
        [
            21, 19, 18, 22, 45, 46, 42, 44, 43, 47, 86, 87, 88, 84, 85, 89, 10, 11, 9, 8, 6, 7, 15,
            16, 14, 13, 17, 12, 52, 53, 48, 49, 50, 51
        ]
    );
    let big = OrderV2::new(1_000_000_000_000, 24, &params(2024, 5, true, 64, 63)).unwrap();
    assert_eq!(big.len(), 15_625_000_000);
    let ids: Vec<u64> = (0..6).map(|p| big.id_at(p).unwrap()).collect();
    assert_eq!(
        ids,
        [
            626318287807,
            626318287816,
            626318287817,
            626318287804,
            626318287813,
            626318287815
        ]
    );
    let widest = OrderV2::new(u64::MAX, 1, &params(1, 0, false, 1, 0)).unwrap();
    let ids: Vec<u64> = (0..4).map(|p| widest.id_at(p).unwrap()).collect();
    assert_eq!(
        ids,
        [
            14685068322112458734,
            6810966675425185576,
            10050291127393755489,
            11451829945180286981
        ]
    );
}

/// Every size, unit length and shard count: the epoch is a permutation, the shards are
/// its consecutive slices, `id_at`, `ids_into` and `position_of` agree, and a
/// page-aware unit's ids are one contiguous run that `unit_end` ends.
#[test]
fn every_epoch_is_a_permutation_sliced_into_shards() {
    let sizes: Vec<u64> = (0..=40).chain([100, 1000, 4097]).collect();
    for &n in &sizes {
        for (page_aware, c) in [
            (false, 1),
            (true, 1),
            (true, 2),
            (true, 3),
            (true, 5),
            (true, 8),
        ] {
            let whole = order(n, c, params(11, n, page_aware, 1, 0));
            let mut sorted = whole.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n={n} c={c}");
            if page_aware {
                // Units: runs of ids with the same id / C; each unit is one run.
                let mut runs = 0;
                for (i, id) in whole.iter().enumerate() {
                    if i == 0 || whole[i - 1] / c != id / c {
                        runs += 1;
                    }
                }
                assert_eq!(runs, n.div_ceil(c), "n={n} c={c}");
            }
            for k in [1u64, 2, 3, 7] {
                let mut joined = Vec::new();
                for i in 0..k {
                    let shard = OrderV2::new(n, c, &params(11, n, page_aware, k, i)).unwrap();
                    assert_eq!(shard.len(), (i + 1) * n / k - i * n / k);
                    let ids = all_ids(&shard);
                    for (p, &id) in ids.iter().enumerate() {
                        let p = p as u64;
                        assert_eq!(shard.id_at(p).unwrap(), id);
                        assert_eq!(shard.position_of(id), Some(p));
                        let end = shard.unit_end(p).unwrap();
                        assert!(end > p && end <= shard.len());
                        // The run of `id`'s unit ends exactly at `end` (or the shard does).
                        assert!(ids[p as usize..end as usize]
                            .iter()
                            .all(|&x| x / shard.unit_len() == id / shard.unit_len()));
                        if end < shard.len() {
                            assert_ne!(ids[end as usize] / shard.unit_len(), id / shard.unit_len());
                        }
                    }
                    assert!(shard.id_at(shard.len()).is_err());
                    assert!(shard.ids_into(0..shard.len() + 1, &mut Vec::new()).is_err());
                    joined.extend(ids);
                }
                assert_eq!(joined, whole, "n={n} c={c} k={k}");
            }
        }
    }
    assert!(OrderV2::new(10, 1, &params(0, 0, false, 2, 2)).is_err());
    assert!(OrderV2::new(10, 0, &params(0, 0, true, 1, 0)).is_err());
}

#[test]
fn epochs_and_seeds_give_different_unrelated_orders() {
    let n = 1000u64;
    for page_aware in [false, true] {
        let mut seen = HashSet::new();
        for seed in 0..5 {
            for epoch in 0..20 {
                assert!(seen.insert(order(n, 6, params(seed, epoch, page_aware, 1, 0))));
            }
        }
    }
    // Where an id lands in one epoch says nothing about where it lands in the next.
    let n = 100_000u64;
    let a = OrderV2::new(n, 1, &params(3, 0, false, 1, 0)).unwrap();
    let b = OrderV2::new(n, 1, &params(3, 1, false, 1, 0)).unwrap();
    let xs: Vec<f64> = (0..n).map(|id| a.position_of(id).unwrap() as f64).collect();
    let ys: Vec<f64> = (0..n).map(|id| b.position_of(id).unwrap() as f64).collect();
    let r = pearson(&xs, &ys);
    assert!(r.abs() < 5.0 / (n as f64).sqrt(), "{r}");
}

/// The chi-square quantile with `df` degrees of freedom at z standard deviations
/// (Wilson–Hilferty).
fn chi2_bound(df: f64, z: f64) -> f64 {
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}
/// z of the one-sided p ≈ 10⁻⁴ tail.
const Z_TAIL: f64 = 3.72;

fn chi2(counts: &[u64], expected: f64) -> f64 {
    counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum()
}

/// Over many seeds, every id lands at every position equally often: a chi-square over
/// the N×N position-of-id table, for sizes that need cycle-walking (5, 6, 10, 20, 37)
/// and not (4, 16), odd and even bit widths, instance-based (also for order version 1,
/// as the reference) and page-aware (6 units of 5: both levels cycle-walk over 3 bits,
/// where 8 rounds were measurably biased).
/// Each trial adds a permutation matrix, so under uniformity the statistic has mean
/// N(N−1) (each cell: variance (1 − 1/N) of its expectation), the df the bound uses.
#[test]
fn position_of_id_is_uniform_over_seeds() {
    let dir = tempfile::tempdir().unwrap();
    for (n, c, page_aware) in [
        (4u64, 1u64, false),
        (5, 1, false),
        (6, 1, false),
        (10, 1, false),
        (16, 1, false),
        (20, 1, false),
        (37, 1, false),
        (24, 4, true),
        (30, 5, true),
        (36, 6, true),
    ] {
        let trials = 300 * n;
        let v1_reader = (!page_aware).then(|| {
            let payloads: Vec<Vec<u8>> = (0..n as usize).map(|i| payload(i, 3)).collect();
            let path = write_plain(dir.path(), &format!("n{n}"), &payloads);
            Reader::open_one(&path, None, &ReaderOptions::default()).unwrap()
        });
        let mut counts_v2 = vec![0u64; (n * n) as usize];
        let mut counts_v1 = vec![0u64; (n * n) as usize];
        for t in 0..trials {
            let s = params(t, t % 7, page_aware, 1, 0);
            for (p, id) in order(n, c, s).into_iter().enumerate() {
                counts_v2[p * n as usize + id as usize] += 1;
            }
            if let Some(reader) = &v1_reader {
                for (p, id) in reader.epoch_order(&s).unwrap().enumerate() {
                    counts_v1[p * n as usize + id as usize] += 1;
                }
            }
        }
        let df = (n * (n - 1)) as f64;
        let bound = chi2_bound(df, Z_TAIL);
        let expected = trials as f64 / n as f64;
        let stat = chi2(&counts_v2, expected);
        let reference = if v1_reader.is_some() {
            format!("{:.1}", chi2(&counts_v1, expected))
        } else {
            "-".into()
        };
        println!(
            "position-of-id n={n} c={c}: v2 chi2 {stat:.1}, v1 {reference} (mean {df}, bound {bound:.1})"
        );
        assert!(stat < bound, "n={n} c={c}: chi2 {stat} >= {bound}");
        if v1_reader.is_some() {
            assert!(chi2(&counts_v1, expected) < bound);
        }
    }
    // With a short last unit (N = 22, C = 4): the short unit's slot is uniform.
    let (n, c) = (22u64, 4u64);
    let units = n.div_ceil(c);
    let mut slot_counts = vec![0u64; units as usize];
    let trials = 6000;
    for t in 0..trials {
        let o = OrderV2::new(n, c, &params(t, 0, true, 1, 0)).unwrap();
        let slot = (0..n)
            .find(|&p| o.id_at(p).unwrap() / c == units - 1)
            .map(|p| {
                if p < (units - 1) * c {
                    p / c
                } else {
                    units - 1
                }
            })
            .unwrap();
        // The short unit starts a slot: its first position is a multiple of C.
        assert_eq!(o.position_of((units - 1) * c).unwrap() / c, slot);
        slot_counts[slot as usize] += 1;
    }
    let stat = chi2(&slot_counts, trials as f64 / units as f64);
    assert!(
        stat < chi2_bound((units - 1) as f64, Z_TAIL),
        "{slot_counts:?}"
    );
}

fn pearson(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in xs.iter().zip(ys) {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
    }
    sxy / (sxx * syy).sqrt()
}

/// Statistics of consecutive ids in one order of `0..N`.
struct PairStats {
    /// Pearson correlation of (order[i], order[i+1]).
    correlation: f64,
    /// Chi-square of the 16×16 table of (order[i]·16/N, order[i+1]·16/N) (df 225).
    serial_chi2: f64,
    /// Chi-square of (order[i] mod 16, order[i+1] mod 16) (df 225).
    low_bits_chi2: f64,
    /// Neighbours whose ids differ by 1 (about 2 expected in a uniform permutation).
    adjacent_ids: u64,
}

fn pair_stats(ids: &[u64]) -> PairStats {
    let n = ids.len() as u64;
    let xs: Vec<f64> = ids[..ids.len() - 1].iter().map(|&x| x as f64).collect();
    let ys: Vec<f64> = ids[1..].iter().map(|&x| x as f64).collect();
    let mut high = vec![0u64; 256];
    let mut low = vec![0u64; 256];
    let mut adjacent_ids = 0;
    for w in ids.windows(2) {
        high[(w[0] * 16 / n * 16 + w[1] * 16 / n) as usize] += 1;
        low[((w[0] % 16) * 16 + w[1] % 16) as usize] += 1;
        adjacent_ids += u64::from(w[0].abs_diff(w[1]) == 1);
    }
    let expected = (n - 1) as f64 / 256.0;
    PairStats {
        correlation: pearson(&xs, &ys),
        serial_chi2: chi2(&high, expected),
        low_bits_chi2: chi2(&low, expected),
        adjacent_ids,
    }
}

/// A true shuffle for comparison: Fisher–Yates driven by SplitMix64 (a generator
/// independent of both order versions' constructions).
fn true_shuffle(n: u64, seed: u64) -> Vec<u64> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut ids: Vec<u64> = (0..n).collect();
    for i in (1..n as usize).rev() {
        let j = ((u128::from(next()) * (i as u128 + 1)) >> 64) as usize;
        ids.swap(i, j);
    }
    ids
}

/// Consecutive ids are as unrelated in order version 2 as in version 1 and in a true
/// shuffle: the same bounds hold for all three, over several seeds.
#[test]
fn neighbours_are_unrelated_like_v1_and_a_true_shuffle() {
    let n = 100_000u64;
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..n as usize).map(|i| payload(i, 1)).collect();
    let path = write_plain(dir.path(), "tiny", &payloads);
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    let corr_bound = 5.0 / (n as f64).sqrt();
    let chi2_max = chi2_bound(225.0, Z_TAIL);
    for seed in 0..4 {
        let v1: Vec<u64> = reader
            .epoch_order(&params(seed, 0, false, 1, 0))
            .unwrap()
            .collect();
        let v2 = order(n, 1, params(seed, 0, false, 1, 0));
        let truth = true_shuffle(n, seed);
        for (name, ids) in [("v1", &v1), ("v2", &v2), ("true", &truth)] {
            let s = pair_stats(ids);
            println!(
                "seed {seed} {name}: corr {:+.5} serial chi2 {:.1} low-bits chi2 {:.1} adjacent {}",
                s.correlation, s.serial_chi2, s.low_bits_chi2, s.adjacent_ids
            );
            assert!(
                s.correlation.abs() < corr_bound,
                "{name}: {}",
                s.correlation
            );
            assert!(s.serial_chi2 < chi2_max, "{name}: {}", s.serial_chi2);
            assert!(s.low_bits_chi2 < chi2_max, "{name}: {}", s.low_bits_chi2);
            // Poisson(2): more than 12 has probability below 10⁻⁶.
            assert!(s.adjacent_ids <= 12, "{name}: {}", s.adjacent_ids);
        }
        // Page-aware: the sequence of units (every unit's first position) passes the
        // same bounds, against a true shuffle of as many units.
        let c = 4u64;
        let units = n / c;
        let pa = OrderV2::new(n, c, &params(seed, 0, true, 1, 0)).unwrap();
        let unit_seq: Vec<u64> = (0..units).map(|j| pa.id_at(j * c).unwrap() / c).collect();
        let truth = true_shuffle(units, seed + 100);
        for (name, ids) in [("v2 units", &unit_seq), ("true units", &truth)] {
            let s = pair_stats(ids);
            println!(
                "seed {seed} {name}: corr {:+.5} serial chi2 {:.1} low-bits chi2 {:.1} adjacent {}",
                s.correlation, s.serial_chi2, s.low_bits_chi2, s.adjacent_ids
            );
            assert!(s.correlation.abs() < 5.0 / (units as f64).sqrt(), "{name}");
            assert!(s.serial_chi2 < chi2_max, "{name}: {}", s.serial_chi2);
            assert!(s.low_bits_chi2 < chi2_max, "{name}: {}", s.low_bits_chi2);
            assert!(s.adjacent_ids <= 12, "{name}: {}", s.adjacent_ids);
        }
    }
}

/// Over a real padded file of equal records, a version-2 unit is exactly a page: the
/// page-aware order reads every data page once per epoch, and a fetcher over it
/// delivers every payload, unit by unit, for every shard.
#[test]
fn page_aware_v2_over_a_padded_file_reads_pages_whole() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2000usize;
    let all: Vec<Vec<u8>> = (0..n).map(|i| payload(i, 150)).collect();
    let (path, _) = write_padded(dir.path(), "p", &all, 4096, Fit::Next);
    let reader = Arc::new(Reader::open_one(&path, None, &ReaderOptions::default()).unwrap());
    // 150-byte payloads + 16 bytes of framing: 24 records in a 4096-byte page.
    assert_eq!(ids_per_unit(reader.layout()), 24);
    let order = reader
        .epoch_order_with_version(&params(2, 0, true, 1, 0), OrderVersion::V2)
        .unwrap();
    assert_eq!(order.version(), OrderVersion::V2);
    reader.reset_io_stats();
    for id in order {
        reader.read(id).unwrap();
    }
    let stats = reader.io_stats();
    assert_eq!(stats.distinct_pages, stats.data_pages);
    assert_eq!(stats.reads, n as u64);

    for k in [1u64, 3] {
        let mut delivered = BTreeSet::new();
        for i in 0..k {
            let s = params(9, 4, true, k, i);
            let expected = all_ids(&reader.order_v2(&s).unwrap());
            // The same shard sizes as version 1 (what `cardinality()` reports).
            assert_eq!(expected.len() as u64, reader.shard_len(k, i).unwrap());
            let order = reader
                .epoch_order_with_version(&s, OrderVersion::V2)
                .unwrap();
            let mut fetcher = Fetcher::new(
                Arc::clone(&reader),
                order,
                FetchOptions {
                    threads: 2,
                    window: 10,
                    depth: 2,
                },
            )
            .unwrap();
            let mut got = Vec::new();
            while let Some(batch) = fetcher.next_batch() {
                let batch = batch.unwrap();
                for j in 0..batch.len() {
                    assert_eq!(batch.payload(j), all[batch.ids[j] as usize].as_slice());
                }
                // A window ends at a unit's end (or the shard's): never splits a page.
                let last = *batch.ids.last().unwrap();
                let taken = got.len() + batch.len();
                if taken < expected.len() {
                    assert_ne!(expected[taken] / 24, last / 24, "k={k} i={i}");
                }
                got.extend_from_slice(&batch.ids);
            }
            assert_eq!(got, expected);
            delivered.extend(got);
        }
        assert_eq!(delivered, (0..n as u64).collect());
    }
}

#[test]
fn v2_epoch_order_seeks_and_finds_positions() {
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<Vec<u8>> = (0..500).map(|i| payload(i, 60 + i % 200)).collect();
    let (path, _) = write_padded(dir.path(), "p", &all, 4096, Fit::Next);
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    for page_aware in [false, true] {
        let s = params(1, 2, page_aware, 2, 1);
        let full: Vec<u64> = reader
            .epoch_order_with_version(&s, OrderVersion::V2)
            .unwrap()
            .collect();
        assert_eq!(full, all_ids(&reader.order_v2(&s).unwrap()));
        assert_ne!(
            full,
            reader.epoch_order(&s).unwrap().collect::<Vec<_>>(),
            "version 2 is not version 1"
        );
        let mut order = reader
            .epoch_order_with_version(&s, OrderVersion::V2)
            .unwrap();
        for p in [0u64, 1, 77, full.len() as u64 - 1] {
            order.seek(p).unwrap();
            assert_eq!(order.next(), Some(full[p as usize]));
            assert_eq!(order.position_of(full[p as usize]), p);
        }
        order.seek(full.len() as u64).unwrap();
        assert_eq!(order.next(), None);
        assert!(order.seek(full.len() as u64 + 1).is_err());
    }
    assert_eq!(OrderVersion::from_number(2).unwrap(), OrderVersion::V2);
    assert_eq!(OrderVersion::default().number(), 1);
    assert!(tfrecord_lirs::options::order_version(3).is_err());
}

/// The spec API walks version-2 epochs when asked: each epoch's payloads in the order's
/// sequence, one shard of two.
#[test]
fn spec_api_walks_v2_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<Vec<u8>> = (0..700).map(|i| payload(i, 30 + i % 90)).collect();
    let (path, _) = write_padded(dir.path(), "p", &all, 4096, Fit::Next);
    let mut walk = TFRecordLIRS::open(&path, None)
        .unwrap()
        .with_seed(8)
        .with_shard(2, 1)
        .unwrap()
        .with_order_version(OrderVersion::V2);
    for epoch in 0..3 {
        for page_aware in [false, true] {
            walk.shuffle_order(page_aware).unwrap();
            let got: Vec<Vec<u8>> = walk.by_ref().map(Result::unwrap).collect();
            let order = walk
                .reader()
                .order_v2(&params(
                    8,
                    2 * epoch + u64::from(page_aware),
                    page_aware,
                    2,
                    1,
                ))
                .unwrap();
            let want: Vec<Vec<u8>> = all_ids(&order)
                .into_iter()
                .map(|id| all[id as usize].clone())
                .collect();
            assert_eq!(got, want, "epoch {epoch} page_aware={page_aware}");
        }
    }
}
