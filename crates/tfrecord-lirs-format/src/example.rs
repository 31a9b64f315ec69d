//! `tf.train.Example` as prost messages (no `protoc` needed), for writing and checking
//! Example records from Rust. Field numbers follow TensorFlow's `example.proto` and
//! `feature.proto`. Reading a batch of Examples into one column per feature, with a
//! [`Spec`] of what each feature must be: [`parse_examples`]; `tf.train.SequenceExample`s:
//! [`parse_sequence_examples`] (their feature lists) and [`parse_examples`] (their
//! context). Writing them, deterministically and as TensorFlow does:
//! [`serialize_example`] (and [`serialize_inputs`] from a front end's loosely typed
//! values).

use std::collections::HashMap;

mod decode;
mod encode;
mod sequence;
mod spec;

pub use decode::{parse_example, parse_examples, parse_examples_inferred, Column, ColumnValues};
pub use encode::{
    feature_of, serialize_example, serialize_input_batch, serialize_inputs, Array, ArrayData, Input,
};
pub use sequence::{parse_sequence_examples, SequenceColumn, SequenceSpec};
pub use spec::{DType, FeatureSpec, Spec, Values};

/// `tf.train.BytesList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BytesList {
    /// The values.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub value: Vec<Vec<u8>>,
}

/// `tf.train.FloatList`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FloatList {
    /// The values (packed).
    #[prost(float, repeated, tag = "1")]
    pub value: Vec<f32>,
}

/// `tf.train.Int64List`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Int64List {
    /// The values (packed).
    #[prost(int64, repeated, tag = "1")]
    pub value: Vec<i64>,
}

/// The kinds a `tf.train.Feature` holds.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Kind {
    /// `bytes_list`.
    #[prost(message, tag = "1")]
    BytesList(BytesList),
    /// `float_list`.
    #[prost(message, tag = "2")]
    FloatList(FloatList),
    /// `int64_list`.
    #[prost(message, tag = "3")]
    Int64List(Int64List),
}

/// `tf.train.Feature`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Feature {
    /// The one list this feature holds.
    #[prost(oneof = "Kind", tags = "1, 2, 3")]
    pub kind: Option<Kind>,
}

/// `tf.train.Features`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Features {
    /// Name → feature.
    #[prost(map = "string, message", tag = "1")]
    pub feature: HashMap<String, Feature>,
}

/// `tf.train.Example`.
///
/// ```
/// use prost::Message;
/// use tfrecord_lirs::example::*;
/// let mut ex = Example::default();
/// ex.features.get_or_insert_with(Default::default).feature.insert(
///     "label".into(),
///     Feature { kind: Some(Kind::Int64List(Int64List { value: vec![3] })) },
/// );
/// let bytes = ex.encode_to_vec();
/// assert_ne!(bytes[0], 0); // never mistaken for a filler
/// assert_eq!(Example::decode(bytes.as_slice()).unwrap(), ex);
/// ```
#[derive(Clone, PartialEq, prost::Message)]
pub struct Example {
    /// The features.
    #[prost(message, optional, tag = "1")]
    pub features: Option<Features>,
}

/// `tf.train.FeatureList`: one `Feature` per step of a sequence.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureList {
    /// The steps.
    #[prost(message, repeated, tag = "1")]
    pub feature: Vec<Feature>,
}

/// `tf.train.FeatureLists`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeatureLists {
    /// Name → feature list.
    #[prost(map = "string, message", tag = "1")]
    pub feature_list: HashMap<String, FeatureList>,
}

/// `tf.train.SequenceExample`: context features and feature lists; decoded for a batch
/// by [`parse_sequence_examples`] (the lists) and [`parse_examples`] (the context).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SequenceExample {
    /// The context: features of the whole sequence (an Example's field 1 too).
    #[prost(message, optional, tag = "1")]
    pub context: Option<Features>,
    /// The feature lists.
    #[prost(message, optional, tag = "2")]
    pub feature_lists: Option<FeatureLists>,
}
