//! The identity of a reader's dataset, as its saved states carry it.

use tfrecord_lirs_format::dataset_identity::DatasetIdentity;

use super::Reader;

impl Reader {
    /// The dataset's identity (each file's base name, instances and bytes), which
    /// every saved state carries and is checked against when restored
    /// ([`DatasetIdentity`]).
    pub fn identity(&self) -> DatasetIdentity {
        DatasetIdentity::of_files(
            self.files
                .iter()
                .zip(self.layout.files())
                .map(|(f, layout)| (f.data_path.as_path(), layout.len(), layout.size)),
        )
    }
}
