//! Tests of the epoch loader: epochs, workers, shards, elastic resume and checkpoints.

use super::*;
use std::collections::BTreeMap;

/// A file of `n` records, record `i` holding `i` (u32 LE), its reader.
fn reader_of(dir: &std::path::Path, n: u32) -> Arc<Reader> {
    let path = dir.join(format!("d{n}"));
    let mut w = crate::PaddedWriter::create(&path, &Default::default()).unwrap();
    for i in 0..n {
        w.write(&i.to_le_bytes()).unwrap();
    }
    w.finish().unwrap();
    Arc::new(Reader::open_one(&path, None, &Default::default()).unwrap())
}

fn ids(batch: &BatchView) -> Vec<u64> {
    batch
        .iter()
        .map(|p| u64::from(u32::from_le_bytes(p.try_into().unwrap())))
        .collect()
}

/// The batches of one walk, as ids.
fn walk(loader: &mut DatasetLoader) -> Vec<Vec<u64>> {
    loader.begin().unwrap();
    std::iter::from_fn(|| loader.next_batch())
        .map(|b| ids(&b.unwrap()))
        .collect()
}

fn order(reader: &Reader, seed: u64, epoch: u64, shards: (u64, u64)) -> Vec<u64> {
    let params = OrderParams {
        seed,
        epoch,
        page_aware: false,
        num_shards: shards.0,
        shard_index: shards.1,
    };
    reader.epoch_order(&params).unwrap().collect()
}

#[test]
fn epochs_walk_the_orders_in_batches_and_move_on() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 1000);
    let options = LoaderOptions {
        seed: 5,
        batch_size: 64,
        ..Default::default()
    };
    let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    for epoch in 0..3 {
        assert_eq!(loader.epoch(), epoch);
        let batches = walk(&mut loader);
        assert_eq!(batches.len(), 16);
        assert!(batches[..15].iter().all(|b| b.len() == 64));
        assert_eq!(batches[15].len(), 1000 - 15 * 64);
        let got: Vec<u64> = batches.concat();
        assert_eq!(got, order(&reader, 5, epoch, (1, 0)));
    }
    loader.set_epoch(1);
    assert_eq!(walk(&mut loader).concat(), order(&reader, 5, 1, (1, 0)));
    // Dropping the remainder; no walk begun: nothing.
    let mut dropping = DatasetLoader::new(
        Arc::clone(&reader),
        LoaderOptions {
            drop_remainder: true,
            ..options
        },
    )
    .unwrap();
    assert!(dropping.next_batch().is_none());
    assert_eq!(walk(&mut dropping).len(), 15);
}

#[test]
fn workers_walk_the_epochs_their_worker_epochs_give_and_keep_a_restored_walk() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 300);
    let options = LoaderOptions {
        seed: 2,
        batch_size: 32,
        ..Default::default()
    };
    let main = crate::WorkerEpochs::create(dir.path()).unwrap();
    // Worker `w` of 2 made for the iteration of base seed `seed`: its whole walk.
    let walk_in = |w: u64, seed: u64, loader: &mut DatasetLoader| {
        let mut epochs = crate::WorkerEpochs::open(main.path()).unwrap();
        loader.set_worker(2, w).unwrap();
        let epoch = epochs.begin(w, seed, loader.restored_epoch()).unwrap();
        loader.begin_epoch(epoch).unwrap();
        std::iter::from_fn(|| loader.next_batch())
            .flat_map(|b| ids(&b.unwrap()))
            .collect::<Vec<u64>>()
    };
    for epoch in 0..3 {
        let mut got = Vec::new();
        for w in 0..2 {
            let mut copy = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
            let mine = walk_in(w, 100 + epoch, &mut copy);
            let mut fresh = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
            fresh.set_worker(2, w).unwrap();
            fresh.set_epoch(epoch);
            assert_eq!(
                mine,
                walk(&mut fresh).concat(),
                "worker {w} walks epoch {epoch}"
            );
            got.extend(mine);
        }
        got.sort_unstable();
        assert_eq!(
            got,
            (0..300).collect::<Vec<u64>>(),
            "epoch {epoch}: each id once"
        );
    }
    // A state restored in a worker: its walk goes on from it.
    let mut first = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    first.set_worker(2, 0).unwrap();
    first.set_epoch(4);
    first.begin().unwrap();
    first.next_batch().unwrap().unwrap();
    let state = first.state().unwrap();
    let rest: Vec<u64> = std::iter::from_fn(|| first.next_batch())
        .flat_map(|b| ids(&b.unwrap()))
        .collect();
    let mut restored = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    restored.set_worker(2, 0).unwrap();
    restored.restore(&state).unwrap();
    assert_eq!(restored.restored_epoch(), Some(4));
    assert_eq!(walk_in(0, 7, &mut restored), rest);
    assert_eq!(main.furthest().unwrap(), 5);
}

#[test]
fn an_epoch_of_four_loaders_goes_on_with_three_and_then_runs_as_three() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 1001);
    for (version, deterministic) in [(1, true), (2, true), (2, false)] {
        let options = |num_shards, shard_index| LoaderOptions {
            seed: 11,
            batch_size: 16,
            num_shards,
            shard_index,
            order_version: version,
            deterministic,
            num_parallel_reads: 2,
            ..Default::default()
        };
        let mut delivered = Vec::new();
        // Four workers each take 3 batches of epoch 0, then stop.
        let shard_states: Vec<ShardState> = (0..4)
            .map(|k| {
                let mut old = DatasetLoader::new(Arc::clone(&reader), options(4, k)).unwrap();
                old.begin().unwrap();
                for _ in 0..3 {
                    delivered.extend(ids(&old.next_batch().unwrap().unwrap()));
                }
                old.shard_state().unwrap()
            })
            .collect();
        let epoch_state = EpochState::combine(&shard_states).unwrap();
        assert_eq!(epoch_state.delivered_count(), 4 * 3 * 16);
        for j in 0..3 {
            let mut new = DatasetLoader::new(Arc::clone(&reader), options(3, j)).unwrap();
            new.resume_epoch(&epoch_state).unwrap();
            // A checkpoint after one batch restores into a fresh loader, which
            // walks the rest of the resumed shard.
            new.begin().unwrap();
            delivered.extend(ids(&new.next_batch().unwrap().unwrap()));
            let state = new.state().unwrap();
            assert!(state.resumed_from.is_some());
            let mut restored = DatasetLoader::new(Arc::clone(&reader), options(3, j)).unwrap();
            restored.restore(&state).unwrap();
            delivered.extend(walk(&mut restored).concat());
            // The next epoch is an ordinary 3-shard epoch.
            assert_eq!(restored.epoch(), 1);
            let mut next = walk(&mut restored).concat();
            let mut fresh = DatasetLoader::new(Arc::clone(&reader), options(3, j)).unwrap();
            fresh.set_epoch(1);
            let mut expected = walk(&mut fresh).concat();
            if !deterministic {
                // Unordered delivery: the same instances, in completion order.
                next.sort_unstable();
                expected.sort_unstable();
            }
            assert_eq!(next, expected, "version {version}");
        }
        delivered.sort_unstable();
        assert_eq!(
            delivered,
            (0..1001).collect::<Vec<u64>>(),
            "version {version}"
        );
    }
    // A state of another seed is refused, and the loader keeps its epoch.
    let mut other = DatasetLoader::new(
        Arc::clone(&reader),
        LoaderOptions {
            seed: 12,
            ..Default::default()
        },
    )
    .unwrap();
    let state = DatasetLoader::new(Arc::clone(&reader), LoaderOptions::default())
        .unwrap()
        .shard_state()
        .unwrap();
    let err = other
        .resume_epoch(&EpochState::combine(&[state]).unwrap())
        .unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::DataLoss, "{err}");
    assert_eq!(other.epoch(), 0);
}

#[test]
fn unordered_walks_give_each_epochs_multiset() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 3000);
    let mut loader = DatasetLoader::new(
        Arc::clone(&reader),
        LoaderOptions {
            seed: 2,
            batch_size: 100,
            deterministic: false,
            num_parallel_reads: 3,
            ..Default::default()
        },
    )
    .unwrap();
    for epoch in 0..2 {
        let mut got = walk(&mut loader).concat();
        got.sort_unstable();
        assert_eq!(got, (0..3000).collect::<Vec<u64>>(), "epoch {epoch}");
    }
}

/// The batches the `workers` of a loader of `options` walk, dealt back in the
/// shard's order (batch `i` is worker `i % workers`'s), and each worker's count.
fn dealt(reader: &Arc<Reader>, options: LoaderOptions, workers: u64) -> Vec<Vec<u64>> {
    let mut each: Vec<std::collections::VecDeque<Vec<u64>>> = (0..workers)
        .map(|w| {
            let mut loader = DatasetLoader::new(Arc::clone(reader), options).unwrap();
            loader.set_worker(workers, w).unwrap();
            let batches = walk(&mut loader);
            let len: usize = batches.iter().map(Vec::len).sum();
            if !options.drop_remainder {
                assert_eq!(len as u64, loader.shard_len().unwrap());
            }
            batches.into()
        })
        .collect();
    let mut out = Vec::new();
    for i in 0.. {
        let w = i % each.len();
        match each[w].pop_front() {
            Some(batch) => out.push(batch),
            None => break,
        }
    }
    assert!(
        each.iter().all(|b| b.is_empty()),
        "a worker's batches out of turn"
    );
    out
}

#[test]
fn workers_take_whole_batches_so_the_batches_per_epoch_do_not_depend_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 777);
    for (drop_remainder, rule, version) in [
        (false, ShardRemainder::Keep, 1),
        (true, ShardRemainder::Keep, 2),
        (false, ShardRemainder::Pad, 1),
        (true, ShardRemainder::Drop, 2),
    ] {
        let mut count = BTreeMap::new();
        for shard in 0..2 {
            let options = LoaderOptions {
                seed: 9,
                batch_size: 50,
                num_shards: 2,
                shard_index: shard,
                drop_remainder,
                shard_remainder: rule,
                order_version: version,
                num_parallel_reads: 2,
                ..Default::default()
            };
            let alone = walk(&mut DatasetLoader::new(Arc::clone(&reader), options).unwrap());
            let batches = DatasetLoader::new(Arc::clone(&reader), options)
                .unwrap()
                .batches_per_epoch()
                .unwrap();
            assert_eq!(alone.len() as u64, batches);
            for workers in 1..=4 {
                let got = dealt(&reader, options, workers);
                // The same batches, in the same order, for any number of workers.
                assert_eq!(got, alone, "{workers} workers, {rule:?}");
                let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
                loader.set_worker(workers, workers - 1).unwrap();
                assert_eq!(loader.shard().unwrap(), (2, shard));
                assert_eq!(loader.batches_per_epoch().unwrap(), batches);
            }
            for id in alone.concat() {
                *count.entry(id).or_insert(0) += 1;
            }
        }
        match (rule, drop_remainder) {
            (ShardRemainder::Keep, false) => {
                assert_eq!(count.len(), 777);
                assert!(count.values().all(|&c| c == 1));
            }
            (ShardRemainder::Pad, _) => assert_eq!(count.len(), 777),
            _ => assert!(count.values().all(|&c| c == 1)),
        }
    }
}

#[test]
fn a_state_of_a_composed_worker_shard_restores_that_epoch_then_batches_follow() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 500);
    let options = LoaderOptions {
        seed: 2,
        batch_size: 16,
        num_parallel_reads: 2,
        ..Default::default()
    };
    // A state saved (state version 2) by worker 1 of 2 walking shard 1 of 2 of
    // epoch 3, two batches in.
    let composed = order(&reader, 2, 3, (2, 1));
    let mut old = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    old.set_epoch(3);
    let mut state = old.state().unwrap();
    (state.walk.num_shards, state.walk.shard_index) = (2, 1);
    state.split = WorkerSplit::Shards;
    state.cursor.position = 32;
    let mut worker = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    worker.set_worker(2, 1).unwrap();
    worker.restore(&state).unwrap();
    assert_eq!(worker.state().unwrap(), state);
    worker.begin().unwrap();
    worker.next_batch().unwrap().unwrap();
    assert_eq!(worker.state().unwrap().split, WorkerSplit::Shards);
    let rest: Vec<u64> = std::iter::from_fn(|| worker.next_batch())
        .flat_map(|b| ids(&b.unwrap()))
        .collect();
    assert_eq!(rest, composed[48..]);
    // The next epoch: the worker's whole batches.
    assert_eq!(worker.epoch(), 4);
    let next = walk(&mut worker);
    let whole = order(&reader, 2, 4, (1, 0));
    let mine: Vec<Vec<u64>> = whole
        .chunks(16)
        .skip(1)
        .step_by(2)
        .map(<[u64]>::to_vec)
        .collect();
    assert_eq!(next, mine);
    // In another worker it is refused, naming the composed shard.
    let mut other = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    other.set_worker(2, 0).unwrap();
    let e = other.restore(&state).unwrap_err();
    assert!(e.to_string().contains("shard 1 of 2"), "{e}");
}

#[test]
fn bad_options_and_workers_are_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 10);
    let make = |options: LoaderOptions| {
        DatasetLoader::new(Arc::clone(&reader), options)
            .err()
            .unwrap()
    };
    for (options, want) in [
        (
            LoaderOptions {
                batch_size: 0,
                ..Default::default()
            },
            "batch_size must be >= 1, got 0",
        ),
        (
            LoaderOptions {
                num_shards: 2,
                shard_index: 2,
                ..Default::default()
            },
            "shard_index must be in [0, num_shards), got shard_index=2 num_shards=2",
        ),
        (
            LoaderOptions {
                order_version: 3,
                ..Default::default()
            },
            "order version must be 1 or 2",
        ),
        (
            LoaderOptions {
                num_parallel_reads: 0,
                ..Default::default()
            },
            "num_parallel_reads must be >= 1 or -1 (automatic), got 0",
        ),
    ] {
        let e = make(options);
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        assert!(e.to_string().contains(want), "{e} / {want}");
    }
    let mut loader = DatasetLoader::new(Arc::clone(&reader), Default::default()).unwrap();
    let e = loader.set_worker(2, 2).unwrap_err();
    assert!(
        e.to_string()
            .contains("worker_index must be in [0, worker_count), got worker_index=2"),
        "{e}"
    );
    assert_eq!(compose_shards(1, 0, 0, 0).unwrap_err().kind(), e.kind());
    assert!(compose_shards(u64::MAX, 0, 2, 0)
        .unwrap_err()
        .to_string()
        .contains("too many"));
}

#[test]
fn states_restore_the_rest_of_the_epoch_and_name_a_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 1000);
    for deterministic in [true, false] {
        let options = LoaderOptions {
            seed: 3,
            batch_size: 64,
            deterministic,
            num_parallel_reads: 2,
            ..Default::default()
        };
        let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        loader.set_epoch(4);
        loader.begin().unwrap();
        let first: Vec<u64> = (0..5)
            .flat_map(|_| ids(&loader.next_batch().unwrap().unwrap()))
            .collect();
        let state = loader.state().unwrap();
        assert_eq!(state.epoch, 4);
        let rest: Vec<u64> = std::iter::from_fn(|| loader.next_batch())
            .flat_map(|b| ids(&b.unwrap()))
            .collect();
        assert_eq!(loader.epoch(), 5);
        assert_eq!(loader.state().unwrap().cursor, CursorState::start());

        let mut again = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        again.restore(&state).unwrap();
        assert_eq!(again.state().unwrap(), state);
        let resumed = walk(&mut again).concat();
        if deterministic {
            assert_eq!(resumed, rest);
        }
        let mut all = [first, resumed].concat();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<u64>>());
        assert_eq!(again.epoch(), 5);

        // Another seed, shard, worker or dataset: refused, naming it.
        let other = |o: LoaderOptions| DatasetLoader::new(Arc::clone(&reader), o).unwrap();
        let e = other(LoaderOptions { seed: 4, ..options })
            .restore(&state)
            .unwrap_err();
        assert!(
            e.to_string().contains("seed 3 (this Loader has seed 4)"),
            "{e}"
        );
        let e = other(LoaderOptions {
            num_shards: 2,
            ..options
        })
        .restore(&state)
        .unwrap_err();
        assert!(e.to_string().contains("shard 0 of 1"), "{e}");
        let mut worker = other(options);
        worker.set_worker(2, 1).unwrap();
        let e = worker.restore(&state).unwrap_err();
        assert!(
            e.to_string()
                .contains("saved by DataLoader worker 0 of 1, and this Loader is worker 1 of 2"),
            "{e}"
        );
        let e = other(LoaderOptions {
            order_version: 2,
            ..options
        })
        .restore(&state)
        .unwrap_err();
        assert!(e.to_string().contains("order_version=1"), "{e}");
        let small = reader_of(dir.path(), 999);
        let e = DatasetLoader::new(small, options)
            .unwrap()
            .restore(&state)
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("another dataset"), "{e}");
        // A restored state is checked again against the worker that walks it.
        let mut late = other(options);
        late.restore(&state).unwrap();
        late.set_worker(2, 0).unwrap();
        assert!(late.begin().is_err());
    }
}

#[test]
fn drop_and_pad_shards_give_every_rank_the_same_count() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(dir.path(), 1000);
    for version in [1, 2] {
        let whole = {
            let options = LoaderOptions {
                seed: 6,
                batch_size: 7,
                order_version: version,
                ..Default::default()
            };
            walk(&mut DatasetLoader::new(Arc::clone(&reader), options).unwrap()).concat()
        };
        for (rule, each) in [(ShardRemainder::Drop, 333), (ShardRemainder::Pad, 334)] {
            let mut all = Vec::new();
            for rank in 0..3 {
                let options = LoaderOptions {
                    seed: 6,
                    batch_size: 7,
                    order_version: version,
                    num_shards: 3,
                    shard_index: rank,
                    shard_remainder: rule,
                    ..Default::default()
                };
                let ids = dealt(&reader, options, 4).concat();
                assert_eq!(ids.len() as u64, each, "{rule:?} v{version}");
                all.extend(ids);
            }
            match rule {
                ShardRemainder::Drop => assert_eq!(all, whole[..999]),
                _ => assert_eq!(all, [&whole[..], &whole[..2]].concat()),
            }
        }
    }
    // A padded shard's state restores the rest exactly; a Keep loader refuses it.
    let options = LoaderOptions {
        seed: 6,
        batch_size: 10,
        num_shards: 3,
        shard_index: 2,
        shard_remainder: ShardRemainder::Pad,
        ..Default::default()
    };
    let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    loader.begin().unwrap();
    let first = ids(&loader.next_batch().unwrap().unwrap());
    let state = loader.state().unwrap();
    let rest: Vec<u64> = std::iter::from_fn(|| loader.next_batch())
        .flat_map(|b| ids(&b.unwrap()))
        .collect();
    assert_eq!(first.len() + rest.len(), 334);
    let mut again = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    again.restore(&state).unwrap();
    assert_eq!(walk(&mut again).concat(), rest);
    let keep = LoaderOptions {
        shard_remainder: ShardRemainder::Keep,
        ..options
    };
    let e = DatasetLoader::new(Arc::clone(&reader), keep)
        .unwrap()
        .restore(&state)
        .unwrap_err();
    assert!(e.to_string().contains("shard_remainder=\"pad\""), "{e}");
    assert!(loader.shard_state().is_err());

    // The op's checkpoints: a cursor's shard state (a fresh base) resumes the rest.
    let mut cursor_options = CursorOptions::dataset(&reader, 10, 2).unwrap();
    cursor_options.order = OrderParams {
        seed: 6,
        epoch: 0,
        page_aware: false,
        num_shards: 3,
        shard_index: 1,
    };
    cursor_options.shard_remainder = ShardRemainder::Drop;
    let mut cursor =
        DatasetCursor::new(Arc::clone(&reader), cursor_options, &CursorState::start()).unwrap();
    let first = ids(&cursor.next_batch().unwrap().unwrap());
    let saved = cursor.shard_state();
    let rest: Vec<u64> = std::iter::from_fn(|| cursor.next_batch())
        .flat_map(|b| ids(&b.unwrap()))
        .collect();
    assert_eq!(first.len() + rest.len(), 333);
    let mut again = DatasetCursor::resume(
        Arc::clone(&reader),
        cursor_options,
        &saved.base,
        &saved.state,
    )
    .unwrap();
    let resumed: Vec<u64> = std::iter::from_fn(|| again.next_batch())
        .flat_map(|b| ids(&b.unwrap()))
        .collect();
    assert_eq!(resumed, rest);
}

/// Files of the sizes of `sizes`, named `names`, in `dir`, as one reader.
fn reader_of_named(dir: &std::path::Path, names: &[&str]) -> Arc<Reader> {
    let files: Vec<(std::path::PathBuf, std::path::PathBuf)> = names
        .iter()
        .map(|name| {
            let path = dir.join(name);
            let mut w = crate::PaddedWriter::create(&path, &Default::default()).unwrap();
            for i in 0..100u32 {
                w.write(&i.to_le_bytes()).unwrap();
            }
            w.finish().unwrap();
            let table = tfrecord_lirs_format::table_path::default_table_path(&path);
            (path, table)
        })
        .collect();
    Arc::new(Reader::open(&files, &Default::default()).unwrap())
}

#[test]
fn states_name_their_files_and_refuse_other_splits_or_orders_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let train = ["t-00000-of-00002", "t-00001-of-00002"];
    let reader = reader_of_named(dir.path(), &train);
    let options = LoaderOptions {
        seed: 1,
        batch_size: 10,
        ..Default::default()
    };
    let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    loader.begin().unwrap();
    loader.next_batch().unwrap().unwrap();
    let state = loader.state().unwrap();
    assert_eq!(
        state.walk.dataset.names,
        Some(train.map(String::from).to_vec())
    );
    // The same files in another order: same counts and sizes, refused naming them.
    let swapped = reader_of_named(dir.path(), &[train[1], train[0]]);
    let e = DatasetLoader::new(swapped, options)
        .unwrap()
        .restore(&state)
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    let text = e.to_string();
    assert!(text.contains("another dataset"), "{text}");
    assert!(
        text.contains("the state's file 0 t-00000-of-00002 (100 instances")
            && text.contains("this Loader's file 0 t-00001-of-00002 (100 instances"),
        "{text}"
    );
    // Another split of the same sizes: refused.
    let other = tempfile::tempdir().unwrap();
    let valid = reader_of_named(other.path(), &["v-00000-of-00002", "v-00001-of-00002"]);
    let e = DatasetLoader::new(valid, options)
        .unwrap()
        .restore(&state)
        .unwrap_err();
    assert!(e.to_string().contains("v-00000-of-00002"), "{e}");
    // The same names elsewhere (a moved dataset): restores.
    let moved = tempfile::tempdir().unwrap();
    let moved = reader_of_named(moved.path(), &train);
    DatasetLoader::new(moved, options)
        .unwrap()
        .restore(&state)
        .unwrap();
    // A copy whose walks run in worker processes has no state of its own.
    let mut main_copy = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
    main_copy.set_walked_elsewhere();
    let e = main_copy.state().unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("StatefulDataLoader"), "{e}");
    // A state saved before names were kept (version 1) restores as before.
    let mut old = state.clone();
    old.walk.dataset.names = None;
    let swapped = reader_of_named(dir.path(), &[train[1], train[0]]);
    DatasetLoader::new(swapped, options)
        .unwrap()
        .restore(&old)
        .unwrap();
}
