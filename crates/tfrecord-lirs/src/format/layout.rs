//! Where the instances are, and the page-aware units they form: the offset tables of a
//! set of files, one global id space. Pure (no I/O): the [`Reader`](crate::Reader)
//! builds it from the tables it opened, the orders ([`EpochOrder`](crate::EpochOrder))
//! read units from it.

use crate::format::PageSize;
use crate::io::OffsetTable;

/// Where every instance of every file is: offsets, file sizes, global id ranges.
#[derive(Debug)]
pub struct Layout {
    pub(crate) files: Vec<FileLayout>,
    pub(crate) page: PageSize,
    pub(crate) len: u64,
}

/// One data file's part of a [`Layout`].
#[derive(Debug)]
pub(crate) struct FileLayout {
    /// The offset table: record starts, read where the table lies (mapped, read on
    /// demand or in memory), never copied whole. Its entries are checked as they are
    /// used ([`span_of`]), not at open.
    pub(crate) table: OffsetTable,
    /// Where the table is (named when a read of it fails).
    pub(crate) table_path: std::path::PathBuf,
    /// The data file's size.
    pub(crate) size: u64,
    /// The global id of the file's instance 0.
    pub(crate) first_id: u64,
}

/// Why an instance's span, as its table gives it, cannot be one: the table does not
/// describe the data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadSpan {
    /// The next entry (at `next`) is not past this one (at `start`).
    NotIncreasing {
        /// The instance's entry.
        start: u64,
        /// The next instance's entry.
        next: u64,
    },
    /// The span's end (the next entry, `end`) lies past the end of the file.
    PastEnd {
        /// The next instance's entry.
        end: u64,
    },
    /// The instance's own entry lies at or past the end of the file (the last entry).
    StartPastEnd {
        /// The instance's entry.
        start: u64,
    },
}

/// `[start, end)` of instance `i`'s span in a file of `size` bytes whose table is
/// `entries`: its record and the padding after it, checked against its neighbour and
/// the file size (so reading every instance once checks the whole table).
#[inline]
pub(crate) fn span_of(entries: &[u64], size: u64, i: usize) -> Result<(u64, u64), BadSpan> {
    let start = entries[i];
    match entries.get(i + 1) {
        Some(&next) if next <= start => Err(BadSpan::NotIncreasing { start, next }),
        Some(&next) if next > size => Err(BadSpan::PastEnd { end: next }),
        Some(&next) => Ok((start, next)),
        None if start >= size => Err(BadSpan::StartPastEnd { start }),
        None => Ok((start, size)),
    }
}

impl FileLayout {
    /// Instances in the file.
    pub(crate) fn len(&self) -> u64 {
        self.table.len()
    }

    /// Instance `i`'s entry and the next one (`None` for the last instance), read from
    /// the table wherever it is. `i < len`.
    pub(crate) fn entry_pair(&self, i: u64) -> std::io::Result<(u64, Option<u64>)> {
        if i + 1 < self.len() {
            let mut two = [0u64; 2];
            self.table.read_into(i, &mut two)?;
            Ok((two[0], Some(two[1])))
        } else {
            Ok((self.table.get(i)?, None))
        }
    }

    /// `[start, end)` of instance `i`'s span, checked as [`span_of`] does; the outer
    /// error is the table's read failing.
    pub(crate) fn span(&self, i: u64) -> std::io::Result<Result<(u64, u64), BadSpan>> {
        let (start, next) = self.entry_pair(i)?;
        Ok(match next {
            Some(next) => span_of(&[start, next], self.size, 0),
            None => span_of(&[start], self.size, 0),
        })
    }
}

/// Whether instance `i` of a file of `size` bytes with table `entries` starts a
/// page-aware unit: the first of its page, or next to a span longer than a page.
/// Entries not yet checked may be out of order: a span is then measured as
/// 0 bytes (the read of it reports the table).
fn starts_unit(entries: &[u64], size: u64, i: usize, page: PageSize) -> bool {
    let span_len = |j: usize| {
        let end = entries.get(j + 1).copied().unwrap_or(size);
        end.saturating_sub(entries[j])
    };
    i == 0
        || page.page_of(entries[i]) != page.page_of(entries[i - 1])
        || span_len(i - 1) > page.get()
        || span_len(i) > page.get()
}

impl Layout {
    /// The layout of `files` (in global id order) for pages of `page`.
    pub(crate) fn new(files: Vec<FileLayout>, page: PageSize) -> Layout {
        let len = files.iter().map(FileLayout::len).sum();
        Layout { files, page, len }
    }

    /// Instances across all files.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// `n` instances described by no file (instance-based orders of a length).
    pub(crate) fn of_len(n: u64) -> crate::Result<Layout> {
        Ok(Layout {
            files: Vec::new(),
            page: crate::format::PageSize::checked(crate::format::DEFAULT_PAGE_SIZE)?,
            len: n,
        })
    }

    /// The data files' bytes per instance on average (a span: the record with its
    /// framing and any padding after it); 0 with no instances.
    pub fn mean_span_bytes(&self) -> u64 {
        let bytes: u64 = self.files.iter().map(|f| f.size).sum();
        bytes.checked_div(self.len).unwrap_or(0)
    }

    /// Whether there are no instances.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The page size units are computed for.
    pub fn page_size(&self) -> PageSize {
        self.page
    }

    /// (file index, index within the file) of global `id`, which must be `< len`.
    pub(crate) fn locate(&self, id: u64) -> (usize, usize) {
        let f = self.files.partition_point(|file| file.first_id <= id) - 1;
        (f, (id - self.files[f].first_id) as usize)
    }

    /// Calls `visit(first_id, len)` for every page-aware unit, in file order. Reads
    /// every table (the units of order version 1); a table that is not mapped is read
    /// into memory for the scan, one file at a time.
    pub(crate) fn for_each_unit(&self, mut visit: impl FnMut(u64, u64)) -> crate::Result<()> {
        for file in &self.files {
            let failed = |e| crate::Error::io(&file.table_path, e);
            let view = file.table.view();
            let read;
            let entries: &[u64] = match &view {
                Some(view) => view,
                None => {
                    let n = usize::try_from(file.len())
                        .map_err(|e| failed(std::io::Error::other(e)))?;
                    let mut all = vec![0u64; n];
                    file.table.read_into(0, &mut all).map_err(failed)?;
                    read = all;
                    &read
                }
            };
            let mut start = 0usize;
            for i in 1..=entries.len() {
                if i == entries.len() || starts_unit(entries, file.size, i, self.page) {
                    visit(file.first_id + start as u64, (i - start) as u64);
                    start = i;
                }
            }
        }
        Ok(())
    }
}
