//! What a reader expects of the features of an Example: per name a dtype, and either a
//! fixed shape (with an optional default for records that lack the feature) or a
//! variable length — `tf.io.FixedLenFeature` and `tf.io.VarLenFeature`.

use crate::error::{Error, Result};

/// The element type of a feature's list: `bytes_list`, `int64_list` or `float_list`
/// (`tf.string`, `tf.int64`, `tf.float32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bytes_list` (`tf.string`).
    Bytes,
    /// `int64_list` (`tf.int64`).
    Int64,
    /// `float_list` (`tf.float32`).
    Float32,
}

impl DType {
    /// Every dtype, in the order of the `Feature` oneof's tags.
    pub const ALL: [DType; 3] = [DType::Bytes, DType::Float32, DType::Int64];

    /// The dtype's name: `"bytes"`, `"int64"` or `"float32"`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bytes => "bytes",
            DType::Int64 => "int64",
            DType::Float32 => "float32",
        }
    }

    /// The dtype named `name` ([`name`](DType::name), or TensorFlow's `"string"`);
    /// [`InvalidArgument`](crate::error::Error::InvalidArgument) for another name.
    pub fn from_name(name: &str) -> Result<DType> {
        match name {
            "bytes" | "string" => Ok(DType::Bytes),
            "int64" => Ok(DType::Int64),
            "float32" => Ok(DType::Float32),
            other => Err(Error::invalid_argument(format!(
                "dtype {other:?} is not a tf.train.Example feature type: use \"bytes\", \"int64\" or \"float32\""
            ))),
        }
    }

    /// The list field of `tf.train.Feature` that holds this dtype.
    pub(crate) fn list_name(self) -> &'static str {
        match self {
            DType::Bytes => "bytes_list",
            DType::Int64 => "int64_list",
            DType::Float32 => "float_list",
        }
    }
}

/// The values of one feature (a default value, or a decoded record's).
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// `bytes_list` values.
    Bytes(Vec<Vec<u8>>),
    /// `int64_list` values.
    Int64(Vec<i64>),
    /// `float_list` values.
    Float32(Vec<f32>),
}

impl Values {
    /// The dtype of these values.
    pub fn dtype(&self) -> DType {
        match self {
            Values::Bytes(_) => DType::Bytes,
            Values::Int64(_) => DType::Int64,
            Values::Float32(_) => DType::Float32,
        }
    }

    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            Values::Bytes(v) => v.len(),
            Values::Int64(v) => v.len(),
            Values::Float32(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One feature a reader expects.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureSpec {
    /// The feature's name (its key in `Features.feature`).
    pub name: String,
    /// Its dtype; a record holding another list is refused.
    pub dtype: DType,
    /// `Some(shape)`: fixed length (`tf.io.FixedLenFeature`), every record holds exactly
    /// the product of `shape` values (`[]`: one value). `None`: variable length
    /// (`tf.io.VarLenFeature`), any number, a missing feature being none.
    pub shape: Option<Vec<i64>>,
    /// For a fixed-length feature, the values of a record that lacks it (as many as
    /// `shape` holds); without one a record lacking the feature is refused.
    pub default: Option<Values>,
}

impl FeatureSpec {
    /// A fixed-length feature of `shape`, required in every record.
    pub fn fixed(name: &str, dtype: DType, shape: &[i64]) -> FeatureSpec {
        FeatureSpec {
            name: name.to_owned(),
            dtype,
            shape: Some(shape.to_vec()),
            default: None,
        }
    }

    /// A variable-length feature.
    pub fn var_len(name: &str, dtype: DType) -> FeatureSpec {
        FeatureSpec {
            name: name.to_owned(),
            dtype,
            shape: None,
            default: None,
        }
    }

    /// This feature with `default` for records that lack it.
    pub fn with_default(mut self, default: Values) -> FeatureSpec {
        self.default = Some(default);
        self
    }
}

/// A checked list of [`FeatureSpec`]s: names unique, shapes non-negative, defaults of
/// the feature's dtype and size.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub(crate) features: Vec<Checked>,
}

/// A [`FeatureSpec`] with its shape checked and its element count worked out.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Checked {
    pub(crate) spec: FeatureSpec,
    /// The shape as sizes (`None`: variable length).
    pub(crate) shape: Option<Vec<usize>>,
    /// Values per record of a fixed-length feature.
    pub(crate) size: usize,
}

impl Spec {
    /// Checks `features`; [`InvalidArgument`](crate::error::Error::InvalidArgument)
    /// naming the feature for a repeated name, a negative dimension, a default on a
    /// variable-length feature or a default of the wrong dtype or size.
    pub fn new(features: Vec<FeatureSpec>) -> Result<Spec> {
        let mut checked: Vec<Checked> = Vec::with_capacity(features.len());
        for spec in features {
            if checked.iter().any(|c| c.spec.name == spec.name) {
                return Err(Error::invalid_argument(format!(
                    "feature {:?} is given twice in the feature spec",
                    spec.name
                )));
            }
            let (shape, size) = match &spec.shape {
                None => (None, 0),
                Some(dims) => {
                    let mut sizes = Vec::with_capacity(dims.len());
                    for &d in dims {
                        let d = usize::try_from(d).map_err(|_| {
                            Error::invalid_argument(format!(
                                "feature {:?}: shape {dims:?} has a negative dimension; a fixed-length feature needs a fully defined shape (a variable-length feature has no shape)",
                                spec.name
                            ))
                        })?;
                        sizes.push(d);
                    }
                    let size = sizes.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
                    let size = size.ok_or_else(|| {
                        Error::invalid_argument(format!(
                            "feature {:?}: shape {dims:?} holds more values than fit in memory",
                            spec.name
                        ))
                    })?;
                    (Some(sizes), size)
                }
            };
            if let Some(default) = &spec.default {
                if shape.is_none() {
                    return Err(Error::invalid_argument(format!(
                        "feature {:?}: a variable-length feature takes no default (a record without it has no values)",
                        spec.name
                    )));
                }
                if default.dtype() != spec.dtype {
                    return Err(Error::invalid_argument(format!(
                        "feature {:?}: default value is {}, the feature is {}",
                        spec.name,
                        default.dtype().name(),
                        spec.dtype.name()
                    )));
                }
                if default.len() != size {
                    return Err(Error::invalid_argument(format!(
                        "feature {:?}: default value has {} values, shape {:?} holds {size}",
                        spec.name,
                        default.len(),
                        spec.shape.as_deref().unwrap_or_default()
                    )));
                }
            }
            checked.push(Checked { spec, shape, size });
        }
        Ok(Spec { features: checked })
    }

    /// The features, in the order given.
    pub fn features(&self) -> impl Iterator<Item = &FeatureSpec> {
        self.features.iter().map(|c| &c.spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(features: Vec<FeatureSpec>) -> String {
        let e = Spec::new(features).unwrap_err();
        assert_eq!(e.kind(), "InvalidArgument");
        e.to_string()
    }

    #[test]
    fn spec_checks_names_shapes_and_defaults() {
        let ok = Spec::new(vec![
            FeatureSpec::fixed("a", DType::Int64, &[2, 3]),
            FeatureSpec::fixed("b", DType::Float32, &[]).with_default(Values::Float32(vec![1.0])),
            FeatureSpec::var_len("c", DType::Bytes),
        ])
        .unwrap();
        let sizes: Vec<usize> = ok.features.iter().map(|c| c.size).collect();
        assert_eq!(sizes, [6, 1, 0]);
        assert!(refused(vec![
            FeatureSpec::var_len("a", DType::Bytes),
            FeatureSpec::var_len("a", DType::Int64),
        ])
        .contains("\"a\" is given twice"));
        assert!(refused(vec![FeatureSpec::fixed("a", DType::Int64, &[-1])])
            .contains("\"a\": shape [-1] has a negative dimension"));
        assert!(refused(vec![
            FeatureSpec::var_len("v", DType::Int64).with_default(Values::Int64(vec![]))
        ])
        .contains("variable-length feature takes no default"));
        assert!(refused(vec![
            FeatureSpec::fixed("d", DType::Int64, &[]).with_default(Values::Float32(vec![0.0]))
        ])
        .contains("default value is float32, the feature is int64"));
        assert!(refused(vec![
            FeatureSpec::fixed("d", DType::Int64, &[2]).with_default(Values::Int64(vec![0]))
        ])
        .contains("default value has 1 values, shape [2] holds 2"));
        assert!(refused(vec![FeatureSpec::fixed(
            "h",
            DType::Int64,
            &[i64::MAX, i64::MAX]
        )])
        .contains("more values than fit"));
    }

    #[test]
    fn dtype_names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()).unwrap(), d);
        }
        assert_eq!(DType::from_name("string").unwrap(), DType::Bytes);
        let e = DType::from_name("float64").unwrap_err();
        assert_eq!(e.kind(), "InvalidArgument");
        assert!(e.to_string().contains("\"float64\""), "{e}");
    }
}
