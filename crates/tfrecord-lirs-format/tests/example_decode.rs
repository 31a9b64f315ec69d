//! Decoding Examples into columns: a round trip against prost's encoder over random
//! Examples, protobuf's merge rules and every typed error.

use std::collections::HashMap;

use proptest::prelude::*;
use prost::Message;
use tfrecord_lirs_format::error::Error;
use tfrecord_lirs_format::example::*;

fn feature(kind: Kind) -> Feature {
    Feature { kind: Some(kind) }
}

fn ints(v: &[i64]) -> Feature {
    feature(Kind::Int64List(Int64List { value: v.to_vec() }))
}

fn floats(v: &[f32]) -> Feature {
    feature(Kind::FloatList(FloatList { value: v.to_vec() }))
}

fn bytes(v: &[&[u8]]) -> Feature {
    let value = v.iter().map(|b| b.to_vec()).collect();
    feature(Kind::BytesList(BytesList { value }))
}

fn example(features: &[(&str, Feature)]) -> Vec<u8> {
    let feature = features
        .iter()
        .map(|(k, f)| (k.to_string(), f.clone()))
        .collect();
    Example {
        features: Some(Features { feature }),
    }
    .encode_to_vec()
}

fn spec(features: Vec<FeatureSpec>) -> Spec {
    Spec::new(features).unwrap()
}

#[test]
fn fixed_var_len_and_defaults_fill_columns_record_after_record() {
    let a = example(&[
        ("label", ints(&[3])),
        ("xy", floats(&[1.0, 2.0])),
        ("tags", bytes(&[b"a", b"bc"])),
        ("unused", ints(&[9, 9])),
    ]);
    let b = example(&[
        ("label", ints(&[-4])),
        ("xy", floats(&[3.0, 4.0])),
        ("weight", floats(&[0.5])),
    ]);
    let spec = spec(vec![
        FeatureSpec::fixed("label", DType::Int64, &[]),
        FeatureSpec::fixed("xy", DType::Float32, &[2]),
        FeatureSpec::var_len("tags", DType::Bytes),
        FeatureSpec::fixed("weight", DType::Float32, &[1]).with_default(Values::Float32(vec![1.0])),
    ]);
    let cols = parse_examples(&spec, &[&a, &b]).unwrap();
    let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["label", "xy", "tags", "weight"]);
    assert_eq!(cols[0].values, ColumnValues::Int64(vec![3, -4]));
    assert_eq!(cols[0].shape, Some(vec![]));
    assert_eq!(cols[0].row_lengths, None);
    assert_eq!(
        cols[1].values,
        ColumnValues::Float32(vec![1.0, 2.0, 3.0, 4.0])
    );
    assert_eq!(cols[1].shape, Some(vec![2]));
    assert_eq!(
        cols[2].values,
        ColumnValues::Bytes(vec![&b"a"[..], &b"bc"[..]])
    );
    assert_eq!(cols[2].row_lengths, Some(vec![2, 0]));
    assert_eq!(cols[3].values, ColumnValues::Float32(vec![1.0, 0.5]));
    // One record: a batch of one.
    let one = parse_example(&spec, &b).unwrap();
    assert_eq!(one[0].values, ColumnValues::Int64(vec![-4]));
}

#[test]
fn inferred_columns_are_sorted_var_len_of_the_records_dtypes() {
    let a = example(&[("z", ints(&[1, 2])), ("a", bytes(&[b"x"]))]);
    let b = example(&[("z", ints(&[])), ("m", Feature { kind: None })]);
    let cols = parse_examples_inferred(&[&a, &b]).unwrap();
    let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["a", "m", "z"]);
    assert_eq!(cols[0].row_lengths, Some(vec![1, 0]));
    // No record gives "m" a list: an empty bytes column.
    assert_eq!(cols[1].values, ColumnValues::Bytes(vec![]));
    assert_eq!(cols[1].row_lengths, Some(vec![0, 0]));
    assert_eq!(cols[2].values, ColumnValues::Int64(vec![1, 2]));
    assert_eq!(cols[2].row_lengths, Some(vec![2, 0]));

    let c = example(&[("z", floats(&[1.0]))]);
    let e = parse_examples_inferred(&[&a, &b, &c]).unwrap_err();
    assert_eq!(kind(&e), "InvalidArgument");
    assert_eq!(
        e.to_string(),
        "record 2: feature \"z\" holds a float_list, record 0 holds a int64_list; give a feature spec"
    );
}

#[test]
fn typed_errors_name_the_record_and_the_feature() {
    let good = example(&[("label", ints(&[1])), ("xy", floats(&[1.0, 2.0]))]);
    let check = |record: &[u8], spec: &Spec, want: &str, message: &str| {
        let e = parse_examples(spec, &[&good, record]).unwrap_err();
        assert_eq!(kind(&e), want, "{e}");
        assert_eq!(e.to_string(), message);
    };
    let label = spec(vec![FeatureSpec::fixed("label", DType::Int64, &[])]);
    check(
        &example(&[("xy", floats(&[1.0]))]),
        &label,
        "InvalidArgument",
        "record 1: feature \"label\" (int64, shape []) is required but missing; give it a default value or make it variable-length",
    );
    check(
        &example(&[("label", floats(&[1.0]))]),
        &label,
        "InvalidArgument",
        "record 1: feature \"label\" holds a float_list, the spec says int64 (int64_list)",
    );
    check(
        &example(&[("label", ints(&[1, 2]))]),
        &label,
        "InvalidArgument",
        "record 1: feature \"label\" has 2 int64 values, its shape [] holds 1",
    );
    // An empty Feature holds no values of any dtype: a size error, not a type error.
    check(
        &example(&[("label", Feature { kind: None })]),
        &label,
        "InvalidArgument",
        "record 1: feature \"label\" has 0 int64 values, its shape [] holds 1",
    );
    let mut cut = good.clone();
    cut.truncate(good.len() - 3);
    check(
        &cut,
        &label,
        "DataLoss",
        &format!(
            "record 1: not a tf.train.Example: field 1 of {} bytes runs past the end ({} left) at byte 1 of {}",
            good.len() - 2,
            good.len() - 5,
            good.len() - 3
        ),
    );
    check(
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        &label,
        "DataLoss",
        "record 1: not a tf.train.Example: bad field key (failed to decode Protobuf message: invalid varint) at byte 0 of 11",
    );
    // A bad list inside a feature the spec names: the feature is named too.
    // Example{features{feature{"xy": Feature{float_list: packed 3 bytes}}}}
    let list = [0x0a, 3, 0, 0, 0];
    let feat = [&[0x12, list.len() as u8][..], &list].concat();
    let entry = [&[0x0a, 2, b'x', b'y', 0x12, feat.len() as u8][..], &feat].concat();
    let features = [&[0x0a, entry.len() as u8][..], &entry].concat();
    let bad_floats = [&[0x0a, features.len() as u8][..], &features].concat();
    let xy = spec(vec![FeatureSpec::var_len("xy", DType::Float32)]);
    check(
        &bad_floats,
        &xy,
        "DataLoss",
        "record 1: feature \"xy\": not a tf.train.Example: packed floats of 3 bytes (not a multiple of 4) at byte 12 of 17",
    );
}

/// `Int64List`/`FloatList` written unpacked (one key per value), as old writers may.
#[derive(Clone, PartialEq, prost::Message)]
struct UnpackedInts {
    #[prost(int64, repeated, packed = "false", tag = "1")]
    value: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct UnpackedFloats {
    #[prost(float, repeated, packed = "false", tag = "1")]
    value: Vec<f32>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct UnpackedFeature {
    #[prost(message, optional, tag = "2")]
    floats: Option<UnpackedFloats>,
    #[prost(message, optional, tag = "3")]
    ints: Option<UnpackedInts>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct UnpackedFeatures {
    #[prost(map = "string, message", tag = "1")]
    feature: HashMap<String, UnpackedFeature>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct UnpackedExample {
    #[prost(message, optional, tag = "1")]
    features: Option<UnpackedFeatures>,
}

#[test]
fn protobuf_rules_unpacked_lists_and_merged_messages() {
    let mut feature = HashMap::new();
    let i = UnpackedInts {
        value: vec![1, -1, i64::MAX],
    };
    let f = UnpackedFeature {
        floats: None,
        ints: Some(i),
    };
    feature.insert("i".to_string(), f);
    let fl = UnpackedFloats {
        value: vec![0.25, -2.0],
    };
    let f = UnpackedFeature {
        floats: Some(fl),
        ints: None,
    };
    feature.insert("f".to_string(), f);
    let unpacked = UnpackedExample {
        features: Some(UnpackedFeatures { feature }),
    }
    .encode_to_vec();
    let spec = spec(vec![
        FeatureSpec::fixed("i", DType::Int64, &[3]),
        FeatureSpec::var_len("f", DType::Float32),
    ]);
    let cols = parse_examples(&spec, &[&unpacked]).unwrap();
    assert_eq!(cols[0].values, ColumnValues::Int64(vec![1, -1, i64::MAX]));
    assert_eq!(cols[1].values, ColumnValues::Float32(vec![0.25, -2.0]));

    // Two serialized Examples back to back are one merged Example: a name given twice
    // takes its last entry, as prost's decoder does.
    let first = example(&[("i", ints(&[7, 7, 7])), ("f", floats(&[1.0]))]);
    let second = example(&[("i", ints(&[1, 2, 3]))]);
    let merged = [first, second].concat();
    let cols = parse_examples(&spec, &[&merged]).unwrap();
    let decoded = Example::decode(merged.as_slice()).unwrap();
    assert_eq!(decoded.features.unwrap().feature["i"], ints(&[1, 2, 3]));
    assert_eq!(cols[0].values, ColumnValues::Int64(vec![1, 2, 3]));
    assert_eq!(cols[1].values, ColumnValues::Float32(vec![1.0]));

    // A Feature whose oneof is set twice holds the last kind; a kind's lists given
    // back to back add up.
    let two_kinds = [ints(&[5]).encode_to_vec(), floats(&[2.5]).encode_to_vec()].concat();
    let two_lists = [
        floats(&[1.5]).encode_to_vec(),
        floats(&[2.5]).encode_to_vec(),
    ]
    .concat();
    let f_only = Spec::new(vec![FeatureSpec::var_len("f", DType::Float32)]).unwrap();
    for (wire, values) in [(two_kinds, vec![2.5]), (two_lists, vec![1.5, 2.5])] {
        let as_prost = Feature::decode(wire.as_slice()).unwrap();
        assert_eq!(as_prost, floats(&values));
        // Example{features{feature{"f": <wire>}}}, the Feature's bytes kept as they are.
        let entry = [&[0x0a, 1, b'f', 0x12, wire.len() as u8][..], &wire].concat();
        let features = [&[0x0a, entry.len() as u8][..], &entry].concat();
        let record = [&[0x0a, features.len() as u8][..], &features].concat();
        let cols = parse_examples(&f_only, &[&record]).unwrap();
        assert_eq!(cols[0].values, ColumnValues::Float32(values));
    }
}

/// A random feature list.
fn any_feature() -> impl Strategy<Value = Feature> {
    prop_oneof![
        prop::collection::vec(any::<i64>(), 0..6).prop_map(|v| ints(&v)),
        prop::collection::vec(any::<f32>().prop_filter("not NaN", |f| !f.is_nan()), 0..6)
            .prop_map(|v| floats(&v)),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..5), 0..4)
            .prop_map(|v| feature(Kind::BytesList(BytesList { value: v }))),
        Just(Feature { kind: None }),
    ]
}

fn any_example() -> impl Strategy<Value = Example> {
    prop::collection::hash_map("[a-c]{1,2}", any_feature(), 0..5).prop_map(|feature| Example {
        features: Some(Features { feature }),
    })
}

/// The values of column `c` in record `r`, as the encoder's `Feature` (`None` when the
/// record has no values there).
fn row(c: &Column, r: usize) -> Option<Feature> {
    let rows = c.row_lengths.as_ref().unwrap();
    let start: usize = rows[..r].iter().sum();
    let range = start..start + rows[r];
    if range.is_empty() {
        return None;
    }
    Some(match &c.values {
        ColumnValues::Int64(v) => ints(&v[range]),
        ColumnValues::Float32(v) => floats(&v[range]),
        ColumnValues::Bytes(v) => bytes(&v[range]),
    })
}

fn is_empty(f: &Feature) -> bool {
    match &f.kind {
        None => true,
        Some(Kind::Int64List(l)) => l.value.is_empty(),
        Some(Kind::FloatList(l)) => l.value.is_empty(),
        Some(Kind::BytesList(l)) => l.value.is_empty(),
    }
}

fn dtype_of(f: &Feature) -> Option<DType> {
    match &f.kind {
        None => None,
        Some(Kind::Int64List(_)) => Some(DType::Int64),
        Some(Kind::FloatList(_)) => Some(DType::Float32),
        Some(Kind::BytesList(_)) => Some(DType::Bytes),
    }
}

proptest! {
    /// Random Examples encoded by prost decode to their features: without a spec when
    /// the batch agrees on dtypes (else the typed error), and with a spec of those
    /// dtypes (fixed-length where every record has the same count).
    #[test]
    fn round_trip_against_the_encoder(batch in prop::collection::vec(any_example(), 1..5)) {
        let encoded: Vec<Vec<u8>> = batch.iter().map(Message::encode_to_vec).collect();
        let records: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        let mut dtypes: HashMap<&str, DType> = HashMap::new();
        let mut conflict = false;
        for ex in &batch {
            for (name, f) in &ex.features.as_ref().unwrap().feature {
                if let Some(d) = dtype_of(f) {
                    conflict |= *dtypes.entry(name.as_str()).or_insert(d) != d;
                }
            }
        }
        let inferred = parse_examples_inferred(&records);
        if conflict {
            prop_assert_eq!(kind(&inferred.unwrap_err()), "InvalidArgument");
            return Ok(());
        }
        let cols = inferred.unwrap();
        let mut names: Vec<&str> = batch
            .iter()
            .flat_map(|ex| ex.features.as_ref().unwrap().feature.keys().map(String::as_str))
            .collect();
        names.sort();
        names.dedup();
        prop_assert_eq!(cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), names);
        for c in &cols {
            for (r, ex) in batch.iter().enumerate() {
                let f = ex.features.as_ref().unwrap().feature.get(&c.name);
                let expected = f.filter(|f| !is_empty(f)).cloned();
                prop_assert_eq!(row(c, r), expected);
            }
        }
        // The same with a spec: fixed-length [n] where every record has n values.
        let specs: Vec<FeatureSpec> = cols
            .iter()
            .map(|c| {
                let rows = c.row_lengths.as_ref().unwrap();
                if rows.iter().all(|&n| n == rows[0]) {
                    FeatureSpec::fixed(&c.name, c.values.dtype(), &[rows[0] as i64])
                } else {
                    FeatureSpec::var_len(&c.name, c.values.dtype())
                }
            })
            .collect();
        let spec = Spec::new(specs).unwrap();
        let with_spec = parse_examples(&spec, &records);
        // A fixed-length feature missing from a record is an error (no default).
        let missing = spec.features().any(|s| {
            s.shape.is_some()
                && batch.iter().any(|ex| !ex.features.as_ref().unwrap().feature.contains_key(&s.name))
        });
        if missing {
            prop_assert_eq!(kind(&with_spec.unwrap_err()), "InvalidArgument");
        } else {
            let with_spec = with_spec.unwrap();
            for (a, b) in with_spec.iter().zip(&cols) {
                prop_assert_eq!(&a.values, &b.values);
            }
        }
    }

    /// Any bytes: columns or a typed error, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(record in prop::collection::vec(any::<u8>(), 0..64)) {
        let spec = Spec::new(vec![
            FeatureSpec::var_len("a", DType::Bytes),
            FeatureSpec::fixed("b", DType::Int64, &[]).with_default(Values::Int64(vec![0])),
        ])
        .unwrap();
        if let Err(e) = parse_examples(&spec, &[&record]) {
            prop_assert!(matches!(kind(&e), "DataLoss" | "InvalidArgument"));
        }
        if let Err(e) = parse_examples_inferred(&[&record]) {
            prop_assert!(matches!(kind(&e), "DataLoss" | "InvalidArgument"));
        }
    }
}

/// Which of the format crate's errors `e` is.
fn kind(e: &Error) -> &'static str {
    match e {
        Error::InvalidArgument(_) => "InvalidArgument",
        Error::DataLoss(_) => "DataLoss",
        _ => "other",
    }
}
