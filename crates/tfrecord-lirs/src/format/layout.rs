//! Where the instances are, and the page-aware units they form: the offset tables of a
//! set of files, one global id space. Pure (no I/O): the [`Reader`](crate::Reader)
//! builds it from the tables it opened, the orders ([`EpochOrder`](crate::EpochOrder))
//! read units from it.

use crate::format::PageSize;

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
    /// The offset table: record starts, strictly increasing.
    pub(crate) offsets: Vec<u64>,
    /// The data file's size.
    pub(crate) size: u64,
    /// The global id of the file's instance 0.
    pub(crate) first_id: u64,
}

impl FileLayout {
    /// `[start, end)` of instance `i`'s span: its record and the padding after it.
    pub(crate) fn span(&self, i: usize) -> (u64, u64) {
        let end = self.offsets.get(i + 1).copied().unwrap_or(self.size);
        (self.offsets[i], end)
    }

    /// The length of instance `i`'s span.
    pub(crate) fn span_len(&self, i: usize) -> u64 {
        let (s, e) = self.span(i);
        e - s
    }

    /// Whether instance `i` starts a page-aware unit: the first of its page, or next to
    /// a span longer than a page.
    pub(crate) fn starts_unit(&self, i: usize, page: PageSize) -> bool {
        i == 0
            || page.page_of(self.offsets[i]) != page.page_of(self.offsets[i - 1])
            || self.span_len(i - 1) > page.get()
            || self.span_len(i) > page.get()
    }
}

impl Layout {
    /// The layout of `files` (in global id order) for pages of `page`.
    pub(crate) fn new(files: Vec<FileLayout>, page: PageSize) -> Layout {
        let len = files.iter().map(|f| f.offsets.len() as u64).sum();
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

    /// Calls `visit(first_id, len)` for every page-aware unit, in file order.
    pub(crate) fn for_each_unit(&self, mut visit: impl FnMut(u64, u64)) {
        for file in &self.files {
            let mut start = 0usize;
            for i in 1..=file.offsets.len() {
                if i == file.offsets.len() || file.starts_unit(i, self.page) {
                    visit(file.first_id + start as u64, (i - start) as u64);
                    start = i;
                }
            }
        }
    }

    /// Length of the unit that starts at `start`.
    pub(crate) fn unit_len(&self, start: u64) -> u64 {
        let (f, i) = self.locate(start);
        let file = &self.files[f];
        let mut end = i + 1;
        while end < file.offsets.len() && !file.starts_unit(end, self.page) {
            end += 1;
        }
        (end - i) as u64
    }
}
