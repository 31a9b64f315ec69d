//! Writing `tf.train.Example`s: a feature map (name → bytes, int64 or float values)
//! serialized as TensorFlow's parsers read it, and the rules by which a front end's
//! loosely typed values ([`Input`]) become a feature's list.
//!
//! The bytes are deterministic: features in name order (byte-wise), each map entry with
//! its key and value written even when empty — what C++ and pure-Python protobuf write
//! with deterministic serialization (`SerializeToString(deterministic=True)`), so the
//! same content gives the same bytes as TensorFlow's `tf.train.Example`. (Python's
//! default upb backend orders a key after the longer keys it is a prefix of, so its
//! bytes differ where one name is a prefix of another; the message is the same.) prost
//! writes the map of [`Features`](super::Features) in hash order and skips an empty
//! entry's key or value, hence the entry messages below, wire-identical to the map.

use super::spec::{DType, Values};
use super::{BytesList, Feature, FloatList, Int64List, Kind};
use crate::error::{Error, Result};

/// One entry of `Features.feature` (a protobuf map is a repeated entry message): key and
/// value always written, as protobuf's encoders do.
#[derive(Clone, PartialEq, prost::Message)]
struct FeatureEntry {
    #[prost(string, required, tag = "1")]
    name: String,
    #[prost(message, required, tag = "2")]
    feature: Feature,
}

/// `tf.train.Features` with its map as entries in a chosen order.
#[derive(Clone, PartialEq, prost::Message)]
struct OrderedFeatures {
    #[prost(message, repeated, tag = "1")]
    feature: Vec<FeatureEntry>,
}

/// `tf.train.Example` with [`OrderedFeatures`]; the features field is always written
/// (`tf.train.Example(features=...)` with no features is `0a 00`).
#[derive(Clone, PartialEq, prost::Message)]
struct OrderedExample {
    #[prost(message, required, tag = "1")]
    features: OrderedFeatures,
}

impl From<Values> for Feature {
    /// The feature holding `values` in the list of their dtype.
    fn from(values: Values) -> Feature {
        let kind = match values {
            Values::Bytes(value) => Kind::BytesList(BytesList { value }),
            Values::Int64(value) => Kind::Int64List(Int64List { value }),
            Values::Float32(value) => Kind::FloatList(FloatList { value }),
        };
        Feature { kind: Some(kind) }
    }
}

/// Serializes a `tf.train.Example` of `features` (name, feature), written in name order
/// whatever their order here; [`InvalidArgument`](crate::error::Error::InvalidArgument)
/// for a name given twice. An empty [`Feature`] (no list) is read by TensorFlow and
/// [`parse_examples`](super::parse_examples) as no values of any dtype.
///
/// ```
/// use tfrecord_lirs_format::example::*;
/// let record = serialize_example(vec![
///     ("label".to_string(), Feature::from(Values::Int64(vec![7]))),
///     ("image".to_string(), Feature::from(Values::Bytes(vec![b"\x89PNG".to_vec()]))),
/// ])
/// .unwrap();
/// let spec = Spec::new(vec![FeatureSpec::fixed("label", DType::Int64, &[])]).unwrap();
/// assert_eq!(parse_example(&spec, &record).unwrap()[0].values, ColumnValues::Int64(vec![7]));
/// ```
pub fn serialize_example(features: Vec<(String, Feature)>) -> Result<Vec<u8>> {
    let mut entries: Vec<FeatureEntry> = features
        .into_iter()
        .map(|(name, feature)| FeatureEntry { name, feature })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(twice) = entries.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(Error::invalid_argument(format!(
            "feature {:?} is given twice; an Example holds each name once",
            twice[0].name
        )));
    }
    let example = OrderedExample {
        features: OrderedFeatures { feature: entries },
    };
    Ok(prost::Message::encode_to_vec(&example))
}

/// A feature's value as a front end hands it over, converted in type only; which values
/// make a feature, and of which dtype, is [`feature_of`]'s rule.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// Bytes (Python `bytes`; `str` as its UTF-8): one `bytes_list` value.
    Bytes(Vec<u8>),
    /// An integer within int64 (Python `int`, `bool`): one `int64_list` value.
    Int(i64),
    /// An integer outside int64, as decimal text: refused.
    BigInt(String),
    /// A floating-point number: one `float_list` value (rounded to float32).
    Float(f64),
    /// A list of scalars, all of one kind (an empty one: an empty [`Feature`]).
    List(Vec<Input>),
    /// An n-dimensional array (numpy's), its values taken in C order.
    Array(Array),
    /// A value of a type the front end has no conversion for, by its type's name.
    Other(String),
}

/// An array as numpy describes it (`__array_interface__`).
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// numpy's type string: byte order (`<`, `>`, `|`, `=`), kind, item size (`"<i8"`,
    /// `"|b1"`, `">f4"`, `"|S5"`, `"|O"`).
    pub typestr: String,
    /// The dimensions (`[]`: a 0-d array, one value).
    pub shape: Vec<usize>,
    /// The elements.
    pub data: ArrayData,
}

/// The elements of an [`Array`].
#[derive(Clone, Debug, PartialEq)]
pub enum ArrayData {
    /// A numeric array's elements, in C order, item size bytes each, in the byte order
    /// of its type string.
    Raw(Vec<u8>),
    /// A bytes, str or object array's elements, in C order.
    Items(Vec<Input>),
}

/// The kind of a scalar, for messages.
fn describe(input: &Input) -> String {
    match input {
        Input::Bytes(_) => "bytes".into(),
        Input::Int(_) | Input::BigInt(_) => "an int".into(),
        Input::Float(_) => "a float".into(),
        Input::List(_) => "a list".into(),
        Input::Array(a) => format!("an array ({}, shape {:?})", a.typestr, a.shape),
        Input::Other(t) => format!("a {t}"),
    }
}

const ACCEPTED: &str = "a feature's value is bytes, str, int, float, a list of one of them, or a numpy array of integers, floats or bytes";

/// The feature `input` makes for feature `name` — bytes and str (as UTF-8) a
/// `bytes_list`, ints (bool too) an `int64_list`, floats a `float_list` (rounded to
/// float32), a list the list of its items' kind, an array that of its dtype (integer
/// and bool dtypes int64, floating ones float32, bytes and str ones bytes, object ones
/// their items' kind, as a list's), its values in C order; an empty list (or an empty
/// object array) an empty [`Feature`], which readers take as no values of the dtype
/// they expect.
///
/// [`InvalidArgument`](crate::error::Error::InvalidArgument) naming the feature and
/// the value for a list mixing kinds, a nested list or array, an int outside int64, an
/// array of another dtype (complex, datetime, ...) or a value of another type.
pub fn feature_of(name: &str, input: Input) -> Result<Feature> {
    feature_at(name, input, "")
}

/// [`feature_of`], its errors starting with `at`.
fn feature_at(name: &str, input: Input, at: &str) -> Result<Feature> {
    let values = values_of(input)
        .map_err(|e| Error::invalid_argument(format!("{at}feature {name:?}: {e}; {ACCEPTED}")))?;
    Ok(values.map(Feature::from).unwrap_or_default())
}

/// [`serialize_example`] of the features `inputs` make ([`feature_of`]).
pub fn serialize_inputs(inputs: Vec<(String, Input)>) -> Result<Vec<u8>> {
    inputs_at(inputs, "")
}

fn inputs_at(inputs: Vec<(String, Input)>, at: &str) -> Result<Vec<u8>> {
    let mut features = Vec::with_capacity(inputs.len());
    for (name, input) in inputs {
        let feature = feature_at(&name, input, at)?;
        features.push((name, feature));
    }
    serialize_example(features).map_err(|e| Error::invalid_argument(format!("{at}{e}")))
}

/// [`serialize_inputs`] for each example of a batch; errors name the example (its index).
pub fn serialize_input_batch(examples: Vec<Vec<(String, Input)>>) -> Result<Vec<Vec<u8>>> {
    let at = |i: usize| format!("example {i}: ");
    let records = examples.into_iter().enumerate();
    records
        .map(|(i, inputs)| inputs_at(inputs, &at(i)))
        .collect()
}

type Rule<T> = std::result::Result<T, String>;

/// The values of `input`; `None` for an empty list of no known dtype.
fn values_of(input: Input) -> Rule<Option<Values>> {
    match input {
        Input::List(items) => list_values(items),
        Input::Array(a) => array_values(a),
        scalar => scalar_values(scalar).map(Some),
    }
}

fn scalar_values(input: Input) -> Rule<Values> {
    Ok(match input {
        Input::Bytes(b) => Values::Bytes(vec![b]),
        Input::Int(i) => Values::Int64(vec![i]),
        Input::Float(f) => Values::Float32(vec![f as f32]),
        Input::BigInt(text) => return Err(format!("int {text} is outside int64's range")),
        other => return Err(format!("{} is not a feature value", describe(&other))),
    })
}

/// A list's items, each one value (a scalar or a 0-d array) of the first one's dtype.
fn list_values(items: Vec<Input>) -> Rule<Option<Values>> {
    let mut out: Option<(Values, String)> = None;
    for (i, item) in items.into_iter().enumerate() {
        let what = describe(&item);
        let at = |e: String| format!("item {i}: {e}");
        let values = match item {
            Input::List(_) => return Err(at("a nested list (a feature's values are flat)".into())),
            Input::Array(a) if !a.shape.is_empty() => {
                return Err(at(format!(
                    "{what} in a list: nested (give the array itself)"
                )))
            }
            Input::Array(a) => array_values(a).map_err(at)?,
            scalar => Some(scalar_values(scalar).map_err(at)?),
        };
        let Some(values) = values else { continue };
        match &mut out {
            None => out = Some((values, what)),
            Some((acc, first)) => {
                if !extend(acc, values) {
                    return Err(format!(
                        "item {i} is {what}, item 0 is {first}: a list holds one kind"
                    ));
                }
            }
        }
    }
    Ok(out.map(|(v, _)| v))
}

/// Appends `more` to `acc` if of the same dtype.
fn extend(acc: &mut Values, more: Values) -> bool {
    match (acc, more) {
        (Values::Bytes(a), Values::Bytes(b)) => a.extend(b),
        (Values::Int64(a), Values::Int64(b)) => a.extend(b),
        (Values::Float32(a), Values::Float32(b)) => a.extend(b),
        _ => return false,
    }
    true
}

fn array_values(a: Array) -> Rule<Option<Values>> {
    let bad = || format!("array dtype {:?} is not a feature type", a.typestr);
    let mut chars = a.typestr.chars();
    let order = chars.next().ok_or_else(bad)?;
    let kind = chars.next().ok_or_else(bad)?;
    let size: usize = match chars.as_str() {
        "" => 0,
        digits => digits.parse().map_err(|_| bad())?,
    };
    let big = match order {
        '<' | '|' => false,
        '>' => true,
        '=' => cfg!(target_endian = "big"),
        _ => return Err(bad()),
    };
    let count = a.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let data = match a.data {
        ArrayData::Items(items) => {
            let typed = match kind {
                'S' | 'U' => Some(DType::Bytes),
                'O' => None,
                _ => return Err(bad()),
            };
            if count != Some(items.len()) {
                return Err(format!(
                    "array of shape {:?} with {} items",
                    a.shape,
                    items.len()
                ));
            }
            // A bytes or str array is bytes even when empty; an object array's items decide.
            let values = list_values(items).map_err(|e| format!("{} array: {e}", a.typestr))?;
            return match (values, typed) {
                (None, Some(_)) => Ok(Some(Values::Bytes(Vec::new()))),
                (Some(v), Some(t)) if v.dtype() != t => Err(bad()),
                (v, _) => Ok(v),
            };
        }
        ArrayData::Raw(data) => data,
    };
    if !matches!(
        (kind, size),
        ('b', 1) | ('i' | 'u', 1 | 2 | 4 | 8) | ('f', 2 | 4 | 8)
    ) {
        return Err(bad());
    }
    if count.and_then(|n| n.checked_mul(size)) != Some(data.len()) {
        return Err(format!(
            "array {} of shape {:?} with {} bytes",
            a.typestr,
            a.shape,
            data.len()
        ));
    }
    // Each element as its bits, most significant first, widened to 64.
    let elements = data.chunks_exact(size).map(|b| {
        let mut v = 0u64;
        let mut push = |byte: &u8| v = v << 8 | u64::from(*byte);
        if big {
            b.iter().for_each(&mut push);
        } else {
            b.iter().rev().for_each(&mut push);
        }
        v
    });
    Ok(Some(match kind {
        'f' => Values::Float32(
            elements
                .map(|bits| match size {
                    2 => f16_to_f32(bits as u16),
                    4 => f32::from_bits(bits as u32),
                    _ => f64::from_bits(bits) as f32,
                })
                .collect(),
        ),
        'u' if size == 8 => {
            let ints: Rule<Vec<i64>> = elements
                .enumerate()
                .map(|(i, bits)| {
                    i64::try_from(bits).map_err(|_| {
                        format!("uint64 element {i} ({bits}) is outside int64's range")
                    })
                })
                .collect();
            Values::Int64(ints?)
        }
        'i' => {
            // Sign-extend from the item's width.
            let shift = 64 - 8 * size as u32;
            Values::Int64(
                elements
                    .map(|bits| ((bits << shift) as i64) >> shift)
                    .collect(),
            )
        }
        _ => Values::Int64(elements.map(|bits| bits as i64).collect()),
    }))
}

/// An IEEE half-precision value as float32 (exact: every half is a float32).
fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let man = f32::from(h & 0x3ff);
    match exp {
        0 => sign * man * 2f32.powi(-24),
        31 if man == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => sign * (1.0 + man / 1024.0) * 2f32.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::super::{parse_examples, ColumnValues, Example, FeatureSpec, Features, Spec};
    use super::*;

    fn refused(input: Input) -> String {
        let e = feature_of("f", input).unwrap_err();
        assert_eq!(e.kind(), "InvalidArgument");
        let msg = e.to_string();
        assert!(msg.starts_with("feature \"f\": "), "{msg}");
        msg
    }

    fn raw(typestr: &str, shape: &[usize], data: Vec<u8>) -> Input {
        Input::Array(Array {
            typestr: typestr.into(),
            shape: shape.to_vec(),
            data: ArrayData::Raw(data),
        })
    }

    fn values(input: Input) -> Option<Values> {
        feature_of("f", input).unwrap().kind.map(|k| match k {
            Kind::BytesList(l) => Values::Bytes(l.value),
            Kind::Int64List(l) => Values::Int64(l.value),
            Kind::FloatList(l) => Values::Float32(l.value),
        })
    }

    #[test]
    fn bytes_are_those_of_tensorflow_deterministic_serialization() {
        // From the TensorFlow 2.21 venv (protobuf 6.33 upb):
        // tf.train.Example(features=tf.train.Features(feature={"a": tf.train.Feature()}))
        //     .SerializeToString(deterministic=True)
        let empty = serialize_example(vec![("a".into(), Feature::default())]).unwrap();
        assert_eq!(
            empty,
            [0x0a, 0x07, 0x0a, 0x05, 0x0a, 0x01, b'a', 0x12, 0x00]
        );
        // {"": Feature(int64_list=Int64List(value=[]))}: the empty key is written too.
        let unnamed = serialize_example(vec![("".into(), Values::Int64(vec![]).into())]).unwrap();
        assert_eq!(
            unnamed,
            [0x0a, 0x08, 0x0a, 0x06, 0x0a, 0x00, 0x12, 0x02, 0x1a, 0x00]
        );
        // tf.train.Example(features=tf.train.Features()) is 0a 00.
        assert_eq!(serialize_example(vec![]).unwrap(), [0x0a, 0x00]);
        // {"zz": int64 [1], "aa": int64 [2]}: sorted by name.
        let sorted = serialize_example(vec![
            ("zz".into(), Values::Int64(vec![1]).into()),
            ("aa".into(), Values::Int64(vec![2]).into()),
        ])
        .unwrap();
        let tf = "0a1a0a0b0a02616112051a030a01020a0b0a027a7a12051a030a0101";
        let hex: String = sorted.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, tf);
        // Byte-wise, a prefix first: C++ and pure-Python protobuf's deterministic order.
        let names = ["b", "ab", "", "a", "\u{e9}", "\u{1}"];
        let features = names
            .iter()
            .map(|n| (n.to_string(), Feature::default()))
            .collect();
        let ex = serialize_example(features).unwrap();
        let mut keys = Vec::new();
        let mut rest = &ex[2..];
        while let [0x0a, n, 0x0a, k, tail @ ..] = rest {
            keys.push(String::from_utf8(tail[..*k as usize].to_vec()).unwrap());
            rest = &rest[2 + *n as usize..];
        }
        assert_eq!(keys, ["", "\u{1}", "a", "ab", "b", "\u{e9}"]);
    }

    #[test]
    fn serialized_examples_decode_to_the_same_message_and_columns() {
        let inputs = |label: i64, tags: Vec<Input>| {
            vec![
                ("label".to_string(), Input::Int(label)),
                ("image".to_string(), Input::Bytes(b"\x89PNG".to_vec())),
                ("tags".to_string(), Input::List(tags)),
                ("box".to_string(), Input::List(vec![Input::Float(0.5); 4])),
            ]
        };
        let records = serialize_input_batch(vec![
            inputs(
                3,
                vec![Input::Bytes(b"cat".to_vec()), Input::Bytes(b"dog".to_vec())],
            ),
            inputs(-1, vec![]),
        ])
        .unwrap();
        // prost's own decoder reads the message written.
        let ex = Example::decode(records[0].as_slice()).unwrap();
        let Features { feature } = ex.features.unwrap();
        assert_eq!(feature["label"], Values::Int64(vec![3]).into());
        assert_eq!(feature.len(), 4);
        // parse_examples gives the columns back, the empty list as no tags.
        let spec = Spec::new(vec![
            FeatureSpec::fixed("label", DType::Int64, &[]),
            FeatureSpec::fixed("box", DType::Float32, &[4]),
            FeatureSpec::var_len("tags", DType::Bytes),
            FeatureSpec::fixed("image", DType::Bytes, &[]),
        ])
        .unwrap();
        let slices: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let columns = parse_examples(&spec, &slices).unwrap();
        assert_eq!(columns[0].values, ColumnValues::Int64(vec![3, -1]));
        assert_eq!(columns[1].values, ColumnValues::Float32(vec![0.5; 8]));
        let tags: Vec<&[u8]> = vec![b"cat", b"dog"];
        assert_eq!(columns[2].values, ColumnValues::Bytes(tags));
        assert_eq!(columns[2].row_lengths, Some(vec![2, 0]));
        let image: Vec<&[u8]> = vec![b"\x89PNG"; 2];
        assert_eq!(columns[3].values, ColumnValues::Bytes(image));
        // The same features in another order: the same bytes.
        let mut reversed = inputs(3, vec![]);
        reversed.reverse();
        assert_eq!(
            serialize_inputs(reversed).unwrap(),
            serialize_inputs(inputs(3, vec![])).unwrap()
        );
    }

    #[test]
    fn arrays_become_lists_of_their_dtype() {
        let ints = |t: &str, data: Vec<u8>| values(raw(t, &[2], data));
        assert_eq!(ints("|i1", vec![0xff, 2]), Some(Values::Int64(vec![-1, 2])));
        assert_eq!(
            ints("|u1", vec![0xff, 2]),
            Some(Values::Int64(vec![255, 2]))
        );
        assert_eq!(ints("|b1", vec![1, 0]), Some(Values::Int64(vec![1, 0])));
        let le = [(-2i32).to_le_bytes(), 7i32.to_le_bytes()].concat();
        assert_eq!(ints("<i4", le), Some(Values::Int64(vec![-2, 7])));
        let be = [(-2i16).to_be_bytes(), 7i16.to_be_bytes()].concat();
        assert_eq!(ints(">i2", be), Some(Values::Int64(vec![-2, 7])));
        let u = [5u64.to_le_bytes(), u64::MAX.to_le_bytes()].concat();
        let e = refused(raw("<u8", &[2], u));
        assert!(
            e.contains("uint64 element 1 (18446744073709551615) is outside int64"),
            "{e}"
        );
        // A 2x2 float64 array: C order, rounded to float32.
        let f: Vec<u8> = [0.1f64, 2.0, -3.5, 1e40]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let got = values(raw("<f8", &[2, 2], f));
        assert_eq!(
            got,
            Some(Values::Float32(vec![0.1, 2.0, -3.5, f32::INFINITY]))
        );
        // float16 1.0, -2.5, the smallest subnormal.
        let h = [0x3c00u16, 0xc100, 0x0001]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let got = values(raw("<f2", &[3], h));
        assert_eq!(got, Some(Values::Float32(vec![1.0, -2.5, 2f32.powi(-24)])));
        // A 0-d array (a numpy scalar) is one value, alone or in a list.
        assert_eq!(
            values(raw("<i8", &[], 9i64.to_le_bytes().to_vec())),
            Some(Values::Int64(vec![9]))
        );
        let listed = Input::List(vec![
            Input::Int(1),
            raw("<i8", &[], 9i64.to_le_bytes().to_vec()),
        ]);
        assert_eq!(values(listed), Some(Values::Int64(vec![1, 9])));
        // Bytes and str arrays are bytes, even empty; an empty object array has no dtype.
        let items = |t: &str, items: Vec<Input>| {
            Input::Array(Array {
                typestr: t.into(),
                shape: vec![items.len()],
                data: ArrayData::Items(items),
            })
        };
        assert_eq!(values(items("|S3", vec![])), Some(Values::Bytes(vec![])));
        assert_eq!(values(items("|O", vec![])), None);
        let b = items("|O", vec![Input::Bytes(b"x".to_vec())]);
        assert_eq!(values(b), Some(Values::Bytes(vec![b"x".to_vec()])));
        assert!(refused(raw("<c8", &[1], vec![0; 8]))
            .contains("array dtype \"<c8\" is not a feature type"));
        assert!(refused(raw("<M8[s]", &[1], vec![0; 8])).contains("\"<M8[s]\""));
        assert!(refused(raw("<i8", &[2], vec![0; 8])).contains("with 8 bytes"));
    }

    #[test]
    fn bad_values_are_refused_naming_feature_and_value() {
        assert_eq!(values(Input::List(vec![])), None);
        let mixed = refused(Input::List(vec![Input::Int(1), Input::Float(2.0)]));
        assert!(
            mixed.contains("item 1 is a float, item 0 is an int"),
            "{mixed}"
        );
        let nested = refused(Input::List(vec![Input::List(vec![Input::Int(1)])]));
        assert!(nested.contains("item 0: a nested list"), "{nested}");
        let arr = raw("<i8", &[1], vec![0; 8]);
        assert!(
            refused(Input::List(vec![arr])).contains("item 0: an array (<i8, shape [1]) in a list")
        );
        let big = refused(Input::List(vec![
            Input::Int(1),
            Input::BigInt("9223372036854775808".into()),
        ]));
        assert!(
            big.contains("item 1: int 9223372036854775808 is outside int64's range"),
            "{big}"
        );
        assert!(
            refused(Input::Other("NoneType".into())).contains("a NoneType is not a feature value")
        );
        let other = refused(Input::List(vec![Input::Other("dict".into())]));
        assert!(
            other.contains("item 0: a dict is not a feature value"),
            "{other}"
        );
        // The batch names the example; a name twice is refused.
        let batch = vec![vec![], vec![("x".to_string(), Input::Other("set".into()))]];
        let e = serialize_input_batch(batch).unwrap_err();
        assert!(
            e.to_string().starts_with("example 1: feature \"x\": a set"),
            "{e}"
        );
        let twice = vec![
            ("x".to_string(), Input::Int(1)),
            ("x".to_string(), Input::Int(2)),
        ];
        let e = serialize_inputs(twice).unwrap_err();
        assert_eq!(e.kind(), "InvalidArgument");
        assert!(
            e.to_string().contains("feature \"x\" is given twice"),
            "{e}"
        );
    }
}
