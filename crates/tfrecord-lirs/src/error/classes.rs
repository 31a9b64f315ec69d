//! The one table from an [`ErrorKind`] to the name of the exception class the front
//! ends raise for it: `tfrecord_lirs.errors.<name>` in Python, and the `tf.errors`
//! class (status code) of the same name in TensorFlow. The match has no catch-all, so
//! a new kind does not compile until it is given its class here.
//!
//! ```
//! use tfrecord_lirs::ErrorKind;
//! assert_eq!(ErrorKind::DataLoss.class_name(), "DataLossError");
//! assert_eq!(ErrorKind::ALL.len(), 6);
//! ```

use crate::error::ErrorKind;

impl ErrorKind {
    /// Every kind, in the order of [`ErrorKind`]'s declaration.
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::DataLoss,
        ErrorKind::InvalidArgument,
        ErrorKind::NotFound,
        ErrorKind::PermissionDenied,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];

    /// The kind's name as the docs write it (`"DataLoss"`, …).
    pub fn name(self) -> &'static str {
        self.names().0
    }

    /// The name of the exception class a front end raises for this kind
    /// (`"DataLossError"`, …: `tfrecord_lirs.errors` and `tf.errors` alike).
    pub fn class_name(self) -> &'static str {
        self.names().1
    }

    /// (name, class name, place in [`ALL`](ErrorKind::ALL)): no catch-all, so every
    /// kind is here.
    fn names(self) -> (&'static str, &'static str, usize) {
        match self {
            ErrorKind::DataLoss => ("DataLoss", "DataLossError", 0),
            ErrorKind::InvalidArgument => ("InvalidArgument", "InvalidArgumentError", 1),
            ErrorKind::NotFound => ("NotFound", "NotFoundError", 2),
            ErrorKind::PermissionDenied => ("PermissionDenied", "PermissionDeniedError", 3),
            ErrorKind::Unavailable => ("Unavailable", "UnavailableError", 4),
            ErrorKind::Internal => ("Internal", "InternalError", 5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_kind_once_with_its_class() {
        for (i, kind) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(kind.names().2, i, "{kind:?}");
            assert_eq!(kind.class_name(), format!("{}Error", kind.name()));
            assert_eq!(format!("{kind:?}"), kind.name());
        }
    }

    #[test]
    fn format_md_lists_every_kind() {
        // docs/FORMAT.md's module table names the kinds `kind()` returns.
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/FORMAT.md"))
                .unwrap();
        let line = doc
            .lines()
            .find(|l| l.contains("`kind()`"))
            .expect("FORMAT.md describes Error::kind()");
        let listed: Vec<&str> = line
            .split("`kind()` (")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap()
            .split(", ")
            .map(|k| k.trim_matches('`'))
            .collect();
        let all: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(listed, all, "{line}");
    }
}
