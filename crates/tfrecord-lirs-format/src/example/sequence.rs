//! Decoding serialized `tf.train.SequenceExample`s for a whole batch, as
//! `tf.io.parse_sequence_example` does: the context is a `Features` message in field 1,
//! as an Example's (so [`parse_examples`](super::parse_examples) decodes it from the
//! same bytes, field 2 passed over); the feature lists (field 2: name → `FeatureList`,
//! one `Feature` per step) are decoded here, with the same wire walk, into one
//! [`SequenceColumn`] per sequence feature.
//!
//! TensorFlow's rules: a fixed-length sequence feature
//! (`tf.io.FixedLenSequenceFeature`) holds the product of its shape values in every
//! step, its batch is padded with zeros (empty bytes) to the most steps of any record,
//! it takes no default value, and a record without its list is refused unless the
//! feature allows it to be missing (no steps then); a variable-length one
//! (`tf.io.VarLenFeature`) holds any number of values per step, a missing list being
//! no steps.

use super::decode::{
    append_run, feature_kind, key, map_entry, skip, take_len, ColumnValues, Wire, WireResult,
};
use super::spec::{Checked, FeatureSpec, Spec};
use crate::error::{Error, Result};

/// The sequence features a reader expects: each a [`FeatureSpec`] of one step's values
/// (a fixed shape, or variable length; no default) and whether a record may lack it.
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceSpec {
    steps: Spec,
    allow_missing: Vec<bool>,
}

impl SequenceSpec {
    /// Checks `features` as [`Spec::new`] does, each with whether a record may lack it
    /// (fixed-length ones; a variable-length one always may);
    /// [`InvalidArgument`](crate::error::Error::InvalidArgument) naming the feature
    /// for a default value (the padding is zeros, as TensorFlow's).
    pub fn new(features: Vec<(FeatureSpec, bool)>) -> Result<SequenceSpec> {
        if let Some((f, _)) = features.iter().find(|(f, _)| f.default.is_some()) {
            return Err(Error::invalid_argument(format!(
                "sequence feature {:?}: a default value is not allowed (steps are padded \
                 with zeros, as tf.io.parse_sequence_example does)",
                f.name
            )));
        }
        let allow_missing = features.iter().map(|(_, a)| *a).collect();
        let steps = Spec::new(features.into_iter().map(|(f, _)| f).collect())?;
        Ok(SequenceSpec {
            steps,
            allow_missing,
        })
    }
}

/// One sequence feature of a batch of records.
#[derive(Clone, Debug, PartialEq)]
pub struct SequenceColumn<'a> {
    /// The feature's name.
    pub name: String,
    /// A fixed-length feature's shape per step (the batch's shape is
    /// `[records, max(steps), ..shape]`); `None` for a variable-length one.
    pub shape: Option<Vec<usize>>,
    /// Fixed length: every record's steps padded to the most steps of the batch with
    /// zeros (empty bytes). Variable length: every step's values, step after step.
    pub values: ColumnValues<'a>,
    /// How many steps each record has.
    pub steps: Vec<usize>,
    /// A variable-length feature's number of values in each step (of every record, in
    /// order); `None` for a fixed-length one.
    pub step_lengths: Option<Vec<usize>>,
}

/// Decodes the feature lists of `records` (serialized `tf.train.SequenceExample`s)
/// into one column per feature of `spec`, in its order; lists the spec does not name
/// are passed over. (Their context: [`parse_examples`](super::parse_examples) on the
/// same records.)
///
/// Errors name the record, the feature and the step:
/// [`InvalidArgument`](crate::error::Error::InvalidArgument) for a step of another
/// dtype or, for a fixed-length feature, with another number of values, or a missing
/// list that is not allowed to be; [`DataLoss`](crate::error::Error::DataLoss)
/// (with the byte in the record) for bytes that are not a SequenceExample.
///
/// ```
/// use prost::Message;
/// use tfrecord_lirs_format::example::*;
/// let int64 = |v: Vec<i64>| Feature { kind: Some(Kind::Int64List(Int64List { value: v })) };
/// let mut lists = FeatureLists::default();
/// lists.feature_list.insert("tokens".into(), FeatureList { feature: vec![int64(vec![4]), int64(vec![5])] });
/// let record = SequenceExample { context: None, feature_lists: Some(lists) }.encode_to_vec();
/// let spec = SequenceSpec::new(vec![
///     (FeatureSpec::fixed("tokens", DType::Int64, &[]), false),
///     (FeatureSpec::var_len("tags", DType::Bytes), true),
/// ])
/// .unwrap();
/// let columns = parse_sequence_examples(&spec, &[&record[..]]).unwrap();
/// assert_eq!(columns[0].values, ColumnValues::Int64(vec![4, 5]));
/// assert_eq!(columns[0].steps, vec![2]);
/// assert_eq!((columns[1].steps.clone(), columns[1].step_lengths.clone()), (vec![0], Some(vec![])));
/// ```
pub fn parse_sequence_examples<'a>(
    spec: &'a SequenceSpec,
    records: &[&'a [u8]],
) -> Result<Vec<SequenceColumn<'a>>> {
    let features = &spec.steps.features;
    let mut columns: Vec<SequenceColumn<'a>> = features
        .iter()
        .map(|c| SequenceColumn {
            name: c.spec.name.clone(),
            shape: c.shape.clone(),
            values: ColumnValues::new(c.spec.dtype),
            steps: Vec::with_capacity(records.len()),
            step_lengths: c.shape.is_none().then(Vec::new),
        })
        .collect();
    // Per feature, this record's list as (values, step lengths) lengths where it
    // started; `None`: not seen.
    let mut start: Vec<Option<(usize, usize)>> = vec![None; features.len()];
    let mut steps = vec![0usize; features.len()];
    for (index, &record) in records.iter().enumerate() {
        start.fill(None);
        steps.fill(0);
        let mut on_list = |name: &'a [u8], list: &'a [u8]| -> Result<()> {
            let Some(j) = features.iter().position(|c| c.spec.name.as_bytes() == name) else {
                return Ok(());
            };
            let column = &mut columns[j];
            let lens = column.step_lengths.as_ref().map_or(0, Vec::len);
            match start[j] {
                // A later list of the same name replaces the earlier one.
                Some((values, step_lens)) => {
                    column.values.truncate(values);
                    if let Some(l) = column.step_lengths.as_mut() {
                        l.truncate(step_lens);
                    }
                }
                None => start[j] = Some((column.values.len(), lens)),
            }
            steps[j] = 0;
            let wire = |w: Wire<'a>| w.in_message(index, record, Some(name), MESSAGE);
            let mut list = list;
            while !list.is_empty() {
                let (tag, wire_type) = key(&mut list).map_err(wire)?;
                if tag != 1 {
                    skip(wire_type, tag, &mut list).map_err(wire)?;
                    continue;
                }
                let feature = take_len(wire_type, tag, &mut list).map_err(wire)?;
                append_step(&features[j], column, feature, index, steps[j])
                    .map_err(|e| e.into_error(index, record, name))?;
                steps[j] += 1;
            }
            Ok(())
        };
        for_each_list(record, &mut on_list)
            .map_err(|w| w.in_message(index, record, None, MESSAGE))
            .and_then(|r| r)?;
        for (j, (c, column)) in features.iter().zip(&mut columns).enumerate() {
            if start[j].is_none() && c.shape.is_some() && !spec.allow_missing[j] {
                return Err(Error::invalid_argument(format!(
                    "record {index}: sequence feature {:?} ({}, shape {:?} per step) is \
                     required but the record has no list of it; allow it to be missing \
                     (allow_missing=True) or make it variable-length",
                    c.spec.name,
                    c.spec.dtype.name(),
                    c.shape.as_deref().unwrap_or_default()
                )));
            }
            column.steps.push(steps[j]);
        }
    }
    for (c, column) in features.iter().zip(&mut columns) {
        if c.shape.is_some() {
            pad(column, c.size);
        }
    }
    Ok(columns)
}

/// The message a record should be, as errors name it.
const MESSAGE: &str = "tf.train.SequenceExample";

/// A step's failure: its bytes, or what it holds.
enum StepError<'a> {
    Wire(Wire<'a>),
    Error(Error),
}

impl<'a> StepError<'a> {
    fn into_error(self, index: usize, record: &'a [u8], name: &[u8]) -> Error {
        match self {
            StepError::Wire(w) => w.in_message(index, record, Some(name), MESSAGE),
            StepError::Error(e) => e,
        }
    }
}

/// Appends step `step` (a `Feature` message) of record `index` to `column`.
fn append_step<'a>(
    c: &Checked,
    column: &mut SequenceColumn<'a>,
    feature: &'a [u8],
    index: usize,
    step: usize,
) -> std::result::Result<(), StepError<'a>> {
    let before = column.values.len();
    match feature_kind(feature).map_err(StepError::Wire)? {
        None => {}
        Some((dtype, run)) if dtype == c.spec.dtype => {
            append_run(run, &mut column.values).map_err(StepError::Wire)?
        }
        Some((dtype, _)) => {
            return Err(StepError::Error(Error::invalid_argument(format!(
            "record {index}: sequence feature {:?} step {step} holds a {}, the spec says {} ({})",
            c.spec.name,
            dtype.list_name(),
            c.spec.dtype.name(),
            c.spec.dtype.list_name()
        ))))
        }
    }
    let len = column.values.len() - before;
    match (&mut column.step_lengths, &c.shape) {
        (Some(lengths), _) => lengths.push(len),
        (None, Some(shape)) if len != c.size => {
            return Err(StepError::Error(Error::invalid_argument(format!(
                "record {index}: sequence feature {:?} step {step} has {len} {} values, its \
                 shape {shape:?} holds {}",
                c.spec.name,
                c.spec.dtype.name(),
                c.size
            ))))
        }
        (None, _) => {}
    }
    Ok(())
}

/// Calls `on_list(name, FeatureList message)` for each entry of the record's feature
/// lists, in the record's order (field 2; repeated occurrences merge).
fn for_each_list<'a>(
    record: &'a [u8],
    on_list: &mut impl FnMut(&'a [u8], &'a [u8]) -> Result<()>,
) -> WireResult<'a, Result<()>> {
    let mut buf = record;
    while !buf.is_empty() {
        let (tag, wire_type) = key(&mut buf)?;
        if tag != 2 {
            skip(wire_type, tag, &mut buf)?;
            continue;
        }
        let mut lists = take_len(wire_type, tag, &mut buf)?;
        while !lists.is_empty() {
            let (tag, wire_type) = key(&mut lists)?;
            if tag != 1 {
                skip(wire_type, tag, &mut lists)?;
                continue;
            }
            let entry = take_len(wire_type, tag, &mut lists)?;
            let (name, list) = map_entry(entry)?;
            if let Err(e) = on_list(name, list) {
                return Ok(Err(e));
            }
        }
    }
    Ok(Ok(()))
}

/// A fixed-length column's records (each `steps[r] * size` values, one after the
/// other) padded to the most steps of the batch with zeros (empty bytes).
fn pad(column: &mut SequenceColumn<'_>, size: usize) {
    let most = column.steps.iter().copied().max().unwrap_or(0);
    if column.steps.iter().all(|&s| s == most) {
        return;
    }
    fn padded<T: Copy>(values: &[T], steps: &[usize], most: usize, size: usize, zero: T) -> Vec<T> {
        let mut out = Vec::with_capacity(steps.len() * most * size);
        let mut at = 0;
        for &s in steps {
            out.extend_from_slice(&values[at..at + s * size]);
            out.resize(out.len() + (most - s) * size, zero);
            at += s * size;
        }
        out
    }
    let steps = &column.steps;
    column.values = match &column.values {
        ColumnValues::Bytes(v) => ColumnValues::Bytes(padded(v, steps, most, size, &[][..])),
        ColumnValues::Int64(v) => ColumnValues::Int64(padded(v, steps, most, size, 0)),
        ColumnValues::Float32(v) => ColumnValues::Float32(padded(v, steps, most, size, 0.0)),
    };
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::super::{
        parse_examples, BytesList, DType, Feature, FeatureList, FeatureLists, Features, FloatList,
        Int64List, Kind, SequenceExample,
    };
    use super::*;

    fn int64(v: Vec<i64>) -> Feature {
        Feature {
            kind: Some(Kind::Int64List(Int64List { value: v })),
        }
    }

    fn floats(v: Vec<f32>) -> Feature {
        Feature {
            kind: Some(Kind::FloatList(FloatList { value: v })),
        }
    }

    fn bytes(v: &[&[u8]]) -> Feature {
        Feature {
            kind: Some(Kind::BytesList(BytesList {
                value: v.iter().map(|b| b.to_vec()).collect(),
            })),
        }
    }

    fn record(context: i64, lists: Vec<(&str, Vec<Feature>)>) -> Vec<u8> {
        let mut features = Features::default();
        features.feature.insert("len".into(), int64(vec![context]));
        let mut fl = FeatureLists::default();
        for (name, steps) in lists {
            fl.feature_list
                .insert(name.into(), FeatureList { feature: steps });
        }
        SequenceExample {
            context: Some(features),
            feature_lists: Some(fl),
        }
        .encode_to_vec()
    }

    fn spec() -> SequenceSpec {
        SequenceSpec::new(vec![
            (FeatureSpec::fixed("tok", DType::Int64, &[]), false),
            (FeatureSpec::fixed("w", DType::Float32, &[2]), true),
            (FeatureSpec::var_len("tags", DType::Bytes), false),
        ])
        .unwrap()
    }

    #[test]
    fn a_batch_is_padded_and_its_steps_counted_as_tensorflow_does() {
        // The records of tests/test_parse_example_tf.py's sequence case.
        let a = record(
            3,
            vec![
                ("tok", vec![int64(vec![1]), int64(vec![2]), int64(vec![3])]),
                ("w", vec![floats(vec![1.0, 2.0]), floats(vec![3.0, 4.0])]),
                ("tags", vec![bytes(&[b"a"]), bytes(&[b"b", b"c"])]),
            ],
        );
        let b = record(
            1,
            vec![("tok", vec![int64(vec![9])]), ("tags", vec![bytes(&[])])],
        );
        let spec = spec();
        let columns = parse_sequence_examples(&spec, &[&a, &b]).unwrap();
        assert_eq!(
            columns[0].values,
            ColumnValues::Int64(vec![1, 2, 3, 9, 0, 0])
        );
        assert_eq!(columns[0].steps, [3, 1]);
        assert_eq!(
            columns[1].values,
            ColumnValues::Float32(vec![1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0])
        );
        assert_eq!(
            (columns[1].steps.clone(), columns[1].shape.clone()),
            (vec![2, 0], Some(vec![2]))
        );
        assert_eq!(
            columns[2].values,
            ColumnValues::Bytes(vec![&b"a"[..], &b"b"[..], &b"c"[..]])
        );
        assert_eq!(columns[2].steps, [2, 1]);
        assert_eq!(columns[2].step_lengths, Some(vec![1, 2, 0]));
        // The context, from the same bytes.
        let context = Spec::new(vec![FeatureSpec::fixed("len", DType::Int64, &[])]).unwrap();
        let c = parse_examples(&context, &[&a, &b]).unwrap();
        assert_eq!(c[0].values, ColumnValues::Int64(vec![3, 1]));
    }

    #[test]
    fn wrong_steps_and_bytes_are_typed_errors_naming_record_feature_and_step() {
        let spec = spec();
        let ok = |tok| vec![("tok", tok), ("tags", vec![])];
        for (lists, want) in [
            (
                vec![("tags", vec![])],
                "record 0: sequence feature \"tok\" (int64, shape [] per step) is required",
            ),
            (
                ok(vec![int64(vec![1]), floats(vec![1.0])]),
                "sequence feature \"tok\" step 1 holds a float_list, the spec says int64",
            ),
            (
                ok(vec![int64(vec![1, 2])]),
                "sequence feature \"tok\" step 0 has 2 int64 values, its shape [] holds 1",
            ),
        ] {
            let r = record(0, lists);
            let e = parse_sequence_examples(&spec, &[&r]).unwrap_err();
            assert_eq!(e.kind(), "InvalidArgument", "{e}");
            assert!(e.to_string().contains(want), "{e} / {want}");
        }
        let mut r = record(0, ok(vec![int64(vec![1])]));
        r.truncate(r.len() - 1);
        let e = parse_sequence_examples(&spec, &[&r]).unwrap_err();
        assert_eq!(e.kind(), "DataLoss", "{e}");
        assert!(
            e.to_string().contains("not a tf.train.SequenceExample"),
            "{e}"
        );
        let e = SequenceSpec::new(vec![(
            FeatureSpec::fixed("w", DType::Float32, &[])
                .with_default(super::super::Values::Float32(vec![0.0])),
            true,
        )])
        .unwrap_err();
        assert!(
            e.to_string().contains("a default value is not allowed"),
            "{e}"
        );
    }
}
