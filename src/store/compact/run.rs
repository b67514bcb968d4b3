//! A run: `count` entries scored alike under consecutive member ids, the
//! unit the log is made of (the bounds a log holds are in `bounds.rs`).

/// `count` entries scored `score` under members `first .. first + count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub score: i64,
    pub first: i64,
    pub count: u64,
}

impl Run {
    /// The last member of the run (`first + count - 1`; checked when the
    /// run was made).
    pub fn last(&self) -> i64 {
        let span = i64::try_from(self.count.saturating_sub(1)).unwrap_or(i64::MAX);
        self.first.saturating_add(span)
    }

    /// Whether entries scored `score` from member `first` continue this
    /// run: the same score and the next member. The one rule that joins a
    /// run to the one after it (in the chain, the strays, the small form,
    /// an effect's lists, the canonical order).
    #[inline]
    pub fn is_continued_by(&self, score: i64, first: i64) -> bool {
        self.score == score && self.last().checked_add(1) == Some(first)
    }

    pub(super) fn holds(&self, id: i64) -> bool {
        self.first <= id && id <= self.last()
    }
}

/// The runs (in score order) as the digest groups them, the plain way:
/// each score's runs sorted by member, consecutive members of one score
/// joined. What `canonical_runs` must give (the unit tests' and the fuzz
/// targets' oracle).
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn canonical_by_sorting(runs: &[Run]) -> Vec<Run> {
    let mut groups: Vec<Run> = Vec::new();
    for group in runs.chunk_by(|a, b| a.score == b.score) {
        let mut g = group.to_vec();
        g.sort_unstable_by_key(|r| r.first);
        for r in g {
            match groups.last_mut() {
                Some(p) if p.is_continued_by(r.score, r.first) => p.count += r.count,
                _ => groups.push(r),
            }
        }
    }
    groups
}
