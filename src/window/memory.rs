//! An in-memory [`WindowLog`](super::log::WindowLog) for the tests.

use super::log::*;

/// An in-memory [`WindowLog`] for tests: a vector of scores and an expiry.
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    pub scores: Vec<f64>,
    pub expire_at_ms: Option<i64>,
    /// The member of each score, in the same order, when every entry was
    /// added through [`WindowLog::add`] (tests that push bare scores leave
    /// it short, and then members are not tracked through trims).
    pub members: Vec<i64>,
    /// Charges under request ids: their score and units; their entries are
    /// in `scores` under the member [`CHARGE_UNIT`].
    pub charges: std::collections::BTreeMap<Vec<u8>, (f64, u64)>,
}

/// The member [`MemoryLog`] gives the entries of a charge (never an id).
#[cfg(test)]
pub const CHARGE_UNIT: i64 = i64::MIN;

#[cfg(test)]
impl MemoryLog {
    pub(super) fn sorted_above(&self, cutoff_ms: i64) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .scores
            .iter()
            .copied()
            .filter(|&s| s > cutoff_ms as f64)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }
}

#[cfg(test)]
impl WindowLog for MemoryLog {
    type Error = NoFreeMember;

    fn trim(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        let before = self.scores.len();
        let mut kept_members = Vec::new();
        let mut kept_scores = Vec::new();
        for (i, &s) in self.scores.iter().enumerate() {
            if s > cutoff_ms as f64 {
                kept_scores.push(s);
                if let Some(&m) = self.members.get(i) {
                    kept_members.push(m);
                }
            }
        }
        self.scores = kept_scores;
        if self.members.len() == before {
            self.members = kept_members;
        }
        self.charges.retain(|_, (s, _)| *s > cutoff_ms as f64);
        Ok((before - self.scores.len()) as u64)
    }

    fn count(&self) -> Result<u64, Self::Error> {
        Ok(self.scores.len() as u64)
    }

    fn count_above(&mut self, cutoff_ms: i64) -> Result<u64, Self::Error> {
        Ok(self.sorted_above(cutoff_ms).len() as u64)
    }

    fn nth_above(&mut self, cutoff_ms: i64, k: u64, _n: u64) -> Result<Option<f64>, Self::Error> {
        let v = self.sorted_above(cutoff_ms);
        Ok(usize::try_from(k)
            .ok()
            .and_then(|k| k.checked_sub(1))
            .and_then(|i| v.get(i).copied()))
    }

    fn newest_above(&mut self, min_ms: i64) -> Result<Option<f64>, Self::Error> {
        Ok(self.sorted_above(min_ms).last().copied())
    }

    fn newest_entry(&mut self) -> Result<Option<(f64, Option<i64>)>, Self::Error> {
        // The highest score; among equal scores, the greatest member in the
        // server's order (byte-wise on the decimal forms).
        let tracked = self.members.len() == self.scores.len();
        let mut best: Option<(f64, Option<i64>)> = None;
        for (i, &score) in self.scores.iter().enumerate() {
            let id = if tracked {
                self.members.get(i).copied()
            } else {
                None
            };
            let better = match best {
                None => true,
                Some((s, m)) => {
                    score > s
                        || (score == s && id.map(|v| v.to_string()) > m.map(|v| v.to_string()))
                }
            };
            if better {
                best = Some((score, id));
            }
        }
        Ok(best)
    }

    fn has_member(&mut self, id: i64) -> Result<bool, Self::Error> {
        Ok(self.members.contains(&id))
    }

    fn add(&mut self, now_ms: i64, id: i64) -> Result<bool, Self::Error> {
        if self.members.contains(&id) {
            return Ok(false);
        }
        self.scores.push(now_ms as f64);
        self.members.push(id);
        Ok(true)
    }

    fn expire_at(&mut self, at_ms: i64) -> Result<(), Self::Error> {
        self.expire_at_ms = Some(at_ms);
        Ok(())
    }

    fn charge(&mut self, request: &[u8]) -> Result<Option<Charge>, Self::Error> {
        Ok(self
            .charges
            .get(request)
            .map(|&(score_ms, units)| Charge { score_ms, units }))
    }

    fn add_units(
        &mut self,
        request: &[u8],
        score_ms: f64,
        held: u64,
        to: u64,
    ) -> Result<(), Self::Error> {
        for _ in held..to {
            self.scores.push(score_ms);
            self.members.push(CHARGE_UNIT);
        }
        self.charges.insert(request.to_vec(), (score_ms, to));
        Ok(())
    }

    fn remove_units(&mut self, request: &[u8], keep: u64, held: u64) -> Result<u64, Self::Error> {
        let Some(&(score, _)) = self.charges.get(request) else {
            return Ok(0);
        };
        let mut left = held.saturating_sub(keep);
        let removed = left;
        while left > 0 {
            let Some(i) = self
                .members
                .iter()
                .zip(&self.scores)
                .rposition(|(&m, &s)| m == CHARGE_UNIT && s == score)
            else {
                break;
            };
            self.members.remove(i);
            self.scores.remove(i);
            left -= 1;
        }
        if keep == 0 {
            self.charges.remove(request);
        } else {
            self.charges.insert(request.to_vec(), (score, keep));
        }
        Ok(removed - left)
    }
}
