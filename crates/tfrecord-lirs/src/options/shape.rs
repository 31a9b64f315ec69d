//! The shape of a dataset a front end reports before it reads anything: how many
//! elements an epoch has (tf.data's cardinality), the static dimensions of each, and
//! whether elements come in order. Decided here so the op library and any other front
//! end give the same answers.
//!
//! ```
//! use tfrecord_lirs::options::shape::{element_dims, elements, unordered};
//! assert_eq!(elements(10, 0, false, false), Some(10)); // unbatched
//! assert_eq!(elements(10, 4, false, false), Some(3)); // the short last batch counts
//! assert_eq!(elements(10, 4, true, false), Some(2)); // ... unless dropped
//! assert_eq!(elements(10, 4, true, true), None); // a resumed epoch: not known
//! assert_eq!(element_dims(4, true), [4]);
//! assert_eq!(element_dims(4, false), [-1]);
//! assert!(unordered(None, Some(false)));
//! assert!(!unordered(Some(true), Some(false)));
//! ```

/// The elements of an epoch over a shard of `shard_len` instances in batches of
/// `batch_size` (0: unbatched, one instance per element), the last short batch dropped
/// when `drop_remainder`; `None` (unknown) when the epoch resumes from an elastic epoch
/// state, whose walk is shorter than the shard by what was delivered before.
pub fn elements(
    shard_len: u64,
    batch_size: u64,
    drop_remainder: bool,
    resumed: bool,
) -> Option<u64> {
    if resumed {
        return None;
    }
    Some(match batch_size {
        0 => shard_len,
        b if drop_remainder => shard_len / b,
        b => shard_len.div_ceil(b),
    })
}

/// The static dimensions of an element: none unbatched (a scalar record), the batch
/// size when every batch is full (`drop_remainder`), else one unknown dimension (-1).
pub fn element_dims(batch_size: u64, drop_remainder: bool) -> Vec<i64> {
    match batch_size {
        0 => vec![],
        b if drop_remainder => vec![b as i64],
        _ => vec![-1],
    }
}

/// Whether elements come as their reads complete instead of in order: the dataset's
/// own `deterministic` wins, then the pipeline's option; in order when neither says.
pub fn unordered(
    dataset_deterministic: Option<bool>,
    pipeline_deterministic: Option<bool>,
) -> bool {
    !dataset_deterministic
        .or(pipeline_deterministic)
        .unwrap_or(crate::options::defaults::DETERMINISTIC)
}
