//! The placement policies of the padded writer: which instance goes into which page.

/// How the `PaddedWriter` of the engine (tfrecord-lirs) places instances into pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Streaming: instances keep their input order; a page is closed as soon as the next
    /// instance does not fit.
    Next,
    /// Look ahead over up to `lookahead` pending instances: each page opens with the oldest
    /// pending instance (so none waits more than `lookahead` pages) and the rest of the page
    /// is filled with the pending instance that leaves the least room. May reorder.
    Best {
        /// Pending instances held back (memory: their payloads).
        lookahead: usize,
    },
    /// No padding: the instances back to back in input order, as a plain TFRecord file
    /// with its table (what `--fit auto` writes when padding does not pay).
    Unpadded,
}

impl Fit {
    /// The default best-fit lookahead, in records: large enough that pages fill well on
    /// mixed record sizes, small enough that the pending payloads stay a few MiB.
    pub const DEFAULT_LOOKAHEAD: usize = 1024;
    /// Best-fit with the default lookahead.
    pub const BEST: Fit = Fit::Best {
        lookahead: Fit::DEFAULT_LOOKAHEAD,
    };
}
