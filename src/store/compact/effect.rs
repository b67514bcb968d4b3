//! The effect of a call on a compact log, as `SLIDEWIN.APPLY` carries it
//! (pure): what replication, the AOF and a client send instead of the
//! deciding command, with absolute times only, so that whoever applies it
//! reproduces the master's log without deciding anything.
//!
//! ```text
//! SLIDEWIN.APPLY key [LOG payload] [TRIM cutoff_ms] [REMOVE member]...
//!                    [CUT request-id units]...
//!                    [ADD score_ms first_member count]...
//!                    [CHARGE request-id score_ms first_member count]...
//!                    [PXAT unix_ms]
//! ```
//!
//! Applied in this order whatever the order of the arguments: LOG replaces
//! the whole log by a decoded payload (the AOF rewrite's form); TRIM removes
//! every entry scored at or below `cutoff_ms` (and the charges made with an
//! ID scored there); each REMOVE removes one member (SLIDEWIN.UNDO; never a
//! unit of a charge made with an ID); each CUT keeps the first `units` units
//! of the charge under `request-id` and removes the rest (UNDO ... ID,
//! SETTLE down; 0 removes the charge); each ADD adds `count` entries scored
//! `score_ms` under the members `first_member .. first_member + count`; each
//! CHARGE adds such entries as units of the charge under `request-id` (made
//! when missing; an existing one's own score); PXAT sets the key's expiry.
//! Everything is checked before anything changes: a member to remove must be
//! in the log after the trim, a member to add must not be, and a bad
//! argument names itself.

use super::bounds::{
    Bound, MAX_CHARGES, MAX_ENTRIES, MAX_REQUEST_ID, MAX_RUNS, MAX_SCORE, MAX_STRAYS,
};
use super::codec::DecodeError;
use super::log::CompactLog;
use super::run::Run;
use crate::args::{parse_i64, printable};
use crate::ffi::{CallError, Word};

/// Why `SLIDEWIN.APPLY` refused an effect; `Display` gives the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// `{0} needs a request id`.
    NoRequestId(&'static str),
    /// `{0}`'s request id is empty or too long.
    RequestIdLength(&'static str),
    /// `{0} needs a value`.
    NoValue(&'static str),
    /// `what` is not an integer in `min ..= max`.
    Integer {
        what: &'static str,
        min: i64,
        max: i64,
        got: Vec<u8>,
    },
    /// LOG without its payload.
    NoPayload,
    /// An option that may come once came again.
    Repeated(&'static str),
    /// A LOG payload that does not decode.
    Payload(DecodeError),
    /// An ADD or a CHARGE (`what`) whose members pass `i64::MAX`.
    MembersPass {
        what: &'static str,
        first: i64,
        count: i64,
    },
    /// A request id cut twice.
    CutTwice(Vec<u8>),
    /// An option the command does not know.
    UnknownOption(Vec<u8>),
    /// A member removed twice.
    RemoveTwice(i64),
    /// A member to remove that the log (after the trim) does not hold.
    NotInLog(i64),
    /// A member to remove that is a unit of a charge made with an ID.
    RemoveCharged(i64),
    /// A CUT of a request id the log holds no charge under.
    NoCharge(Vec<u8>),
    /// A CUT to more units than the charge holds.
    CutUnits { held: u64, units: u64 },
    /// A CHARGE of an existing charge at another score than its own.
    ChargeScore(i64),
    /// CHARGEs of one request id at different scores.
    ChargeScores,
    /// ADD or CHARGE ranges that overlap.
    AddTwice(i64, i64),
    /// ADD or CHARGE members the log already holds.
    AlreadyInLog(i64, i64),
    /// More entries than a log may hold.
    Entries,
    /// A step would pass a bound a log holds.
    Bound(Bound),
    /// A raw call on the key failed.
    Call(CallError),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use ApplyError as E;
        match self {
            E::NoRequestId(what) => write!(f, "ERR {what} needs a request id"),
            E::RequestIdLength(what) => write!(
                f,
                "ERR {what} request-id must be 1 to {MAX_REQUEST_ID} bytes"
            ),
            E::NoValue(what) => write!(f, "ERR {what} needs a value"),
            E::Integer {
                what,
                min,
                max,
                got,
            } => write!(
                f,
                "ERR {what} must be an integer between {min} and {max}, got '{}'",
                printable(got)
            ),
            E::NoPayload => f.write_str("ERR LOG needs a payload"),
            E::Repeated(option) => write!(f, "ERR option {option} given more than once"),
            E::Payload(why) => write!(f, "ERR LOG payload is not a compact log: {why}"),
            E::MembersPass { what, first, count } => write!(
                f,
                "ERR {what} count {count} from member {first} passes {}",
                i64::MAX
            ),
            E::CutTwice(request) => {
                write!(f, "ERR CUT request-id '{}' given twice", printable(request))
            }
            E::UnknownOption(word) => write!(
                f,
                "ERR unknown option '{}' (known: LOG, TRIM, REMOVE, CUT, ADD, CHARGE, PXAT)",
                printable(word)
            ),
            E::RemoveTwice(id) => write!(f, "ERR REMOVE member {id} given twice"),
            E::NotInLog(id) => write!(f, "ERR REMOVE member {id} is not in the log"),
            E::RemoveCharged(id) => write!(
                f,
                "ERR REMOVE member {id} is a unit of a charge made with an ID (CUT removes it)"
            ),
            E::NoCharge(request) => write!(
                f,
                "ERR CUT request-id '{}' names no charge in the log",
                printable(request)
            ),
            E::CutUnits { held, units } => write!(
                f,
                "ERR CUT units must be an integer between 0 and {held}, got {units}"
            ),
            E::ChargeScore(s) => {
                write!(f, "ERR CHARGE score_ms must be the charge's own score, {s}")
            }
            E::ChargeScores => {
                f.write_str("ERR CHARGE score_ms must be one score for one request-id")
            }
            E::AddTwice(first, last) => {
                write!(f, "ERR ADD members {first} to {last} given twice")
            }
            E::AlreadyInLog(first, last) => {
                write!(
                    f,
                    "ERR ADD members {first} to {last} are already in the log"
                )
            }
            E::Entries => write!(
                f,
                "ERR ADD would make the log hold more than {MAX_ENTRIES} entries"
            ),
            E::Bound(b) => write!(f, "ERR {}", b.message()),
            E::Call(e) => write!(f, "{e}"),
        }
    }
}

/// One effect, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effect {
    pub log: Option<CompactLog>,
    pub trim: Option<i64>,
    pub remove: Vec<i64>,
    pub add: Vec<Run>,
    /// The CUTs and CHARGEs, when there are any (boxed: the effect of a
    /// call without an ID stays as small as it was).
    pub ids: Option<Box<IdOps>>,
    pub expire_at: Option<i64>,
}

/// The words of an effect on charges made with an ID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdOps {
    /// CUT request-id units.
    pub cut: Vec<(Vec<u8>, u64)>,
    /// CHARGE request-id score first count.
    pub charge: Vec<(Vec<u8>, Run)>,
}

/// How many request ids' blocks (and CUTs and CHARGEs) [`Effect::recycle`]
/// keeps for the next call.
const SPARE_KEPT: usize = 4;

thread_local! {
    /// The CUTs and CHARGEs of the last effect recycled, emptied.
    static SPARE_IDS: std::cell::Cell<Option<Box<IdOps>>> = const { std::cell::Cell::new(None) };
    /// The blocks of its request ids, emptied (at most [`SPARE_KEPT`]).
    static SPARE_REQUESTS: std::cell::Cell<Vec<Vec<u8>>> = const { std::cell::Cell::new(Vec::new()) };
}

/// `request` in a block of its own, a kept one when there is one.
fn request_block(request: &[u8]) -> Vec<u8> {
    let kept = SPARE_REQUESTS
        .try_with(|cell| {
            let mut spare = cell.take();
            let r = spare.pop();
            cell.set(spare);
            r
        })
        .ok()
        .flatten();
    let mut block = kept.unwrap_or_default();
    block.clear();
    block.extend_from_slice(request);
    block
}

/// A request id argument (1 to [`MAX_REQUEST_ID`] bytes).
fn request_id(what: &'static str, bytes: Option<&&[u8]>) -> Result<Vec<u8>, ApplyError> {
    let Some(bytes) = bytes else {
        return Err(ApplyError::NoRequestId(what));
    };
    if bytes.is_empty() || bytes.len() > MAX_REQUEST_ID {
        return Err(ApplyError::RequestIdLength(what));
    }
    Ok(bytes.to_vec())
}

fn integer(what: &'static str, bytes: Option<&&[u8]>, min: i64) -> Result<i64, ApplyError> {
    integer_in(what, bytes, min, i64::MAX)
}

fn integer_in(
    what: &'static str,
    bytes: Option<&&[u8]>,
    min: i64,
    max: i64,
) -> Result<i64, ApplyError> {
    let Some(bytes) = bytes else {
        return Err(ApplyError::NoValue(what));
    };
    parse_i64(bytes)
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| ApplyError::Integer {
            what,
            min,
            max,
            got: bytes.to_vec(),
        })
}

impl Effect {
    /// The CUTs.
    pub fn cuts(&self) -> &[(Vec<u8>, u64)] {
        self.ids.as_ref().map_or(&[], |i| &i.cut)
    }

    /// The CHARGEs.
    pub fn charges(&self) -> &[(Vec<u8>, Run)] {
        self.ids.as_ref().map_or(&[], |i| &i.charge)
    }

    fn ids_mut(&mut self) -> &mut IdOps {
        self.ids.get_or_insert_with(|| {
            SPARE_IDS
                .try_with(std::cell::Cell::take)
                .ok()
                .flatten()
                .unwrap_or_default()
        })
    }

    /// Keeps the blocks of its CUTs and CHARGEs (emptied) for the next
    /// call's effect, unless they grew large: recording a call's charge
    /// then allocates nothing. Commands run on one thread.
    pub fn recycle(&mut self) {
        let Some(mut ids) = self.ids.take() else {
            return;
        };
        let _ = SPARE_REQUESTS.try_with(|cell| {
            let mut spare = cell.take();
            let requests = ids.cut.drain(..).map(|(r, _)| r);
            for r in requests.chain(ids.charge.drain(..).map(|(r, _)| r)) {
                if spare.len() < SPARE_KEPT && r.capacity() <= MAX_REQUEST_ID {
                    spare.push(r);
                }
            }
            cell.set(spare);
        });
        if ids.cut.capacity() <= SPARE_KEPT && ids.charge.capacity() <= SPARE_KEPT {
            let _ = SPARE_IDS.try_with(|cell| cell.set(Some(ids)));
        }
    }

    /// Whether applying it would change nothing.
    pub fn is_empty(&self) -> bool {
        self.log.is_none()
            && self.trim.is_none()
            && self.remove.is_empty()
            && self.add.is_empty()
            && self.cuts().is_empty()
            && self.charges().is_empty()
            && self.expire_at.is_none()
    }

    /// Parses the arguments after the key.
    pub fn parse(args: &[&[u8]]) -> Result<Effect, ApplyError> {
        let mut e = Effect::default();
        let mut at = 0usize;
        while let Some(word) = args.get(at) {
            let upper = word.to_ascii_uppercase();
            let rest = args.get(at + 1..).unwrap_or(&[]);
            let used = match upper.as_slice() {
                b"LOG" => {
                    let payload = rest.first().ok_or(ApplyError::NoPayload)?;
                    if e.log.is_some() {
                        return Err(ApplyError::Repeated("LOG"));
                    }
                    let log = CompactLog::decode(payload).map_err(ApplyError::Payload)?;
                    e.log = Some(log);
                    2
                }
                b"TRIM" => {
                    if e.trim.is_some() {
                        return Err(ApplyError::Repeated("TRIM"));
                    }
                    e.trim = Some(integer("TRIM cutoff_ms", rest.first(), i64::MIN)?);
                    2
                }
                b"REMOVE" => {
                    e.remove.push(integer("REMOVE member", rest.first(), 0)?);
                    2
                }
                b"ADD" => {
                    let score = integer_in("ADD score_ms", rest.first(), 0, MAX_SCORE)?;
                    let first = integer("ADD first_member", rest.get(1), 0)?;
                    let count = integer("ADD count", rest.get(2), 1)?;
                    // `first + count - 1` must be a member id too.
                    if first.checked_add(count - 1).is_none() {
                        return Err(ApplyError::MembersPass {
                            what: "ADD",
                            first,
                            count,
                        });
                    }
                    e.add.push(Run {
                        score,
                        first,
                        count: count as u64,
                    });
                    4
                }
                b"CUT" => {
                    let request = request_id("CUT", rest.first())?;
                    let units = integer("CUT units", rest.get(1), 0)?;
                    if e.ids_mut().cut.iter().any(|(r, _)| *r == request) {
                        return Err(ApplyError::CutTwice(request));
                    }
                    e.ids_mut().cut.push((request, units as u64));
                    3
                }
                b"CHARGE" => {
                    let request = request_id("CHARGE", rest.first())?;
                    let score = integer_in("CHARGE score_ms", rest.get(1), 0, MAX_SCORE)?;
                    let first = integer("CHARGE first_member", rest.get(2), 0)?;
                    let count = integer("CHARGE count", rest.get(3), 1)?;
                    if first.checked_add(count - 1).is_none() {
                        return Err(ApplyError::MembersPass {
                            what: "CHARGE",
                            first,
                            count,
                        });
                    }
                    e.ids_mut().charge.push((
                        request,
                        Run {
                            score,
                            first,
                            count: count as u64,
                        },
                    ));
                    5
                }
                b"PXAT" => {
                    if e.expire_at.is_some() {
                        return Err(ApplyError::Repeated("PXAT"));
                    }
                    e.expire_at = Some(integer("PXAT unix_ms", rest.first(), 0)?);
                    2
                }
                _ => return Err(ApplyError::UnknownOption(word.to_vec())),
            };
            at += used;
        }
        Ok(e)
    }

    /// Checks the effect against `log` (the key's log, empty when the key
    /// is missing) and applies it; on an error `log` is unchanged.
    pub fn apply(&self, log: &mut CompactLog) -> Result<(), ApplyError> {
        let base: &CompactLog = self.log.as_ref().unwrap_or(log);
        let cutoff = self.trim.unwrap_or(i64::MIN);
        let mut removing: Vec<i64> = self.remove.clone();
        removing.sort_unstable();
        if let Some(w) = removing.windows(2).find(|w| w[0] == w[1]) {
            return Err(ApplyError::RemoveTwice(w[0]));
        }
        for &id in &self.remove {
            if !base.holds_above(id, cutoff) {
                return Err(ApplyError::NotInLog(id));
            }
            // Its score is above the cutoff: its charge survives the trim.
            if base.charged(id) {
                return Err(ApplyError::RemoveCharged(id));
            }
        }
        // The charges as the trim leaves them: CUT needs one, CHARGE keeps
        // an existing one's score.
        let alive = |request: &[u8]| base.charge_of(request).filter(|&(s, _)| s > cutoff);
        let mut cutting = 0u64;
        for (request, units) in self.cuts() {
            let Some((_, held)) = alive(request) else {
                return Err(ApplyError::NoCharge(request.clone()));
            };
            if *units > held {
                return Err(ApplyError::CutUnits {
                    held,
                    units: *units,
                });
            }
            cutting = cutting.saturating_add(held - units);
        }
        for (request, run) in self.charges() {
            let cut_whole = self
                .cuts()
                .iter()
                .any(|(r, units)| r == request && *units == 0);
            let score = self
                .charges()
                .iter()
                .find(|(r, _)| r == request)
                .map(|(_, first)| first.score);
            match alive(request) {
                Some((s, _)) if s != run.score && !cut_whole => {
                    return Err(ApplyError::ChargeScore(s))
                }
                _ if score != Some(run.score) => return Err(ApplyError::ChargeScores),
                _ => {}
            }
        }
        // The ADD and CHARGE ranges, sorted: checked against each other
        // (neighbours) and against the log (each chunk they meet decoded
        // once).
        let mut adding: Vec<(i64, i64)> = self
            .add
            .iter()
            .chain(self.charges().iter().map(|(_, r)| r))
            .map(|r| (r.first, r.last()))
            .collect();
        adding.sort_unstable();
        if let Some(w) = adding.windows(2).find(|w| w[1].0 <= w[0].1) {
            return Err(ApplyError::AddTwice(w[1].0, w[1].1));
        }
        if let Some((first, last)) = base.first_overlap_above(&adding, cutoff) {
            return Err(ApplyError::AlreadyInLog(first, last));
        }
        // What the log holds after the trim and the removals, plus the adds.
        let mut total = base
            .entries_above(cutoff)
            .saturating_sub(self.remove.len() as u64)
            .saturating_sub(cutting);
        for run in self.add.iter().chain(self.charges().iter().map(|(_, r)| r)) {
            total = total.saturating_add(run.count);
        }
        if total > MAX_ENTRIES {
            return Err(ApplyError::Entries);
        }
        // The bounds on runs and on runs out of member order: what a
        // CHECK's effect does (entries appended at the end, or members
        // given back) cannot pass them when this says so; anything else is
        // applied to a copy first and refused if a step passes one.
        if self.within_bounds(base) || (self.log.is_none() && self.charge_fits(base)) {
            self.apply_checked(log).map_err(ApplyError::Bound)
        } else {
            let mut copy = base.clone();
            Effect {
                log: None,
                trim: self.trim,
                remove: self.remove.clone(),
                add: self.add.clone(),
                ids: self.ids.clone(),
                expire_at: self.expire_at,
            }
            .apply_checked(&mut copy)
            .map_err(ApplyError::Bound)?;
            *log = copy;
            Ok(())
        }
    }

    /// Whether the effect is one charge's change that fits `base` as it
    /// is, so applying it in place cannot stop half-way: a CHARGE alone
    /// (a SETTLE raise, however old the charge), or a CUT to 0 then a
    /// CHARGE of the same request appended (a SETTLE moving its charge to
    /// the newest score). A TRIM before it only takes runs away. So a
    /// replica applies a raise in O(log n), without copying the log.
    fn charge_fits(&self, base: &CompactLog) -> bool {
        if !self.remove.is_empty() || !self.add.is_empty() {
            return false;
        }
        let [(request, run)] = self.charges() else {
            return false;
        };
        match self.cuts() {
            [] => base.charge_fits(request, run),
            [(cut, 0)] if cut == request => base.move_fits(request, run),
            _ => false,
        }
    }

    /// Whether applying the effect to `base` cannot pass a bound on runs or
    /// runs out of member order: removals only, each splitting a run at
    /// most, or adds each appended after the last (members above every
    /// other, scored at or after it).
    /// A CUT alone is checked whole before it changes anything; CHARGEs
    /// are appends too when each makes a new charge within the bound on
    /// charges.
    fn within_bounds(&self, base: &CompactLog) -> bool {
        if !self.cuts().is_empty() {
            return self.cuts().len() == 1
                && self.remove.is_empty()
                && self.add.is_empty()
                && self.charges().is_empty();
        }
        if !self.charges().is_empty() {
            let mut requests: Vec<&[u8]> =
                self.charges().iter().map(|(r, _)| r.as_slice()).collect();
            requests.sort_unstable();
            let distinct = requests.windows(2).all(|w| w[0] != w[1]);
            let new = self
                .charges()
                .iter()
                .all(|(r, _)| base.charge_of(r).is_none());
            if !distinct
                || !new
                || base.charge_count().saturating_add(self.charges().len()) > MAX_CHARGES
            {
                return false;
            }
        }
        let (runs, strays) = base.shape();
        let removes = self.remove.len() as u64;
        let adds = (self.add.len() + self.charges().len()) as u64;
        if runs.saturating_add(removes).saturating_add(adds) > MAX_RUNS
            || strays.saturating_add(self.remove.len()) > MAX_STRAYS
        {
            return false;
        }
        if self.add.is_empty() && self.charges().is_empty() {
            return true;
        }
        if !self.remove.is_empty() {
            return false;
        }
        // In the order they are applied: the ADDs, then the CHARGEs.
        let runs: Vec<&Run> = self
            .add
            .iter()
            .chain(self.charges().iter().map(|(_, r)| r))
            .collect();
        let Some((first, rest)) = runs.split_first() else {
            return true;
        };
        base.appends(first)
            && rest.iter().zip(&runs).all(|(next, prev)| {
                (prev.score, prev.first) < (next.score, next.first) && prev.last() < next.first
            })
    }

    /// Applies the checked effect to `log`, step by step: a step that would
    /// pass a bound stops it there with the bound (the caller applies to a
    /// copy unless `within_bounds` said no step can).
    fn apply_checked(&self, log: &mut CompactLog) -> Result<(), Bound> {
        if let Some(l) = &self.log {
            *log = l.clone();
        }
        if let Some(c) = self.trim {
            use crate::window::WindowLog;
            let _ = log.trim(c);
        }
        for &id in &self.remove {
            log.remove(id)?;
        }
        for (request, units) in self.cuts() {
            log.cut_charge(request, *units)?;
        }
        for &run in &self.add {
            log.add_run(run)?;
        }
        for (request, run) in self.charges() {
            log.add_charge(request, *run)?;
        }
        if let Some(at) = self.expire_at {
            log.set_expiry(at);
        }
        Ok(())
    }

    /// The arguments after the key as words (`c"TRIM"`, an integer, ...),
    /// into `out`; `None` when they do not fit (or the effect carries a
    /// LOG payload, which is bytes). What the store propagates without
    /// formatting strings (a CUT's or a CHARGE's request id as bytes).
    pub fn words<'a, const N: usize>(&'a self, out: &mut [Word<'a>; N]) -> Option<usize> {
        if self.log.is_some() {
            return None;
        }
        let mut n = 0usize;
        let mut push = |t: Word<'a>| -> Option<()> {
            *out.get_mut(n)? = t;
            n += 1;
            Some(())
        };
        if let Some(c) = self.trim {
            push(Word::Text(c"TRIM"))?;
            push(Word::Repeated(c))?;
        }
        for &id in &self.remove {
            push(Word::Text(c"REMOVE"))?;
            push(Word::Int(id))?;
        }
        for (request, units) in self.cuts() {
            push(Word::Text(c"CUT"))?;
            push(Word::Bytes(request))?;
            push(Word::Repeated(i64::try_from(*units).ok()?))?;
        }
        for r in &self.add {
            push(Word::Text(c"ADD"))?;
            push(Word::Repeated(r.score))?;
            push(Word::Int(r.first))?;
            push(Word::Repeated(i64::try_from(r.count).unwrap_or(i64::MAX)))?;
        }
        for (request, r) in self.charges() {
            push(Word::Text(c"CHARGE"))?;
            push(Word::Bytes(request))?;
            push(Word::Repeated(r.score))?;
            push(Word::Int(r.first))?;
            push(Word::Repeated(i64::try_from(r.count).unwrap_or(i64::MAX)))?;
        }
        if let Some(at) = self.expire_at {
            push(Word::Text(c"PXAT"))?;
            push(Word::Repeated(at))?;
        }
        Some(n)
    }

    /// The arguments after the key, as `SLIDEWIN.APPLY` takes them.
    pub fn to_args(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        if let Some(c) = self.trim {
            out.push(b"TRIM".to_vec());
            out.push(c.to_string().into_bytes());
        }
        for &id in &self.remove {
            out.push(b"REMOVE".to_vec());
            out.push(id.to_string().into_bytes());
        }
        for (request, units) in self.cuts() {
            out.push(b"CUT".to_vec());
            out.push(request.clone());
            out.push(units.to_string().into_bytes());
        }
        for r in &self.add {
            let count = i64::try_from(r.count).unwrap_or(i64::MAX);
            out.push(b"ADD".to_vec());
            for v in [r.score, r.first, count] {
                out.push(v.to_string().into_bytes());
            }
        }
        for (request, r) in self.charges() {
            let count = i64::try_from(r.count).unwrap_or(i64::MAX);
            out.push(b"CHARGE".to_vec());
            out.push(request.clone());
            for v in [r.score, r.first, count] {
                out.push(v.to_string().into_bytes());
            }
        }
        if let Some(at) = self.expire_at {
            out.push(b"PXAT".to_vec());
            out.push(at.to_string().into_bytes());
        }
        if let Some(l) = &self.log {
            out.push(b"LOG".to_vec());
            out.push(l.encode());
        }
        out
    }

    /// Records that `count` units were added to the charge under `request`
    /// at `score` from `first` on (joining the previous CHARGE of the same
    /// request when it continues it).
    pub fn record_charge(&mut self, request: &[u8], score: i64, first: i64, count: u64) {
        if let Some((r, prev)) = self.ids_mut().charge.last_mut() {
            if r.as_slice() == request && prev.is_continued_by(score, first) {
                prev.count = prev.count.saturating_add(count);
                return;
            }
        }
        let request = request_block(request);
        self.ids_mut().charge.push((
            request,
            Run {
                score,
                first,
                count,
            },
        ));
    }

    /// Records that the charge under `request` was cut to `units` (a later
    /// cut of the same request replaces it).
    pub fn record_cut(&mut self, request: &[u8], units: u64) {
        let cut = &mut self.ids_mut().cut;
        match cut.iter_mut().find(|(r, _)| r.as_slice() == request) {
            Some((_, u)) => *u = units,
            None => cut.push((request_block(request), units)),
        }
    }

    /// Records that `count` entries were added at `score` from `first` on
    /// (joining the previous add when it continues it).
    pub fn record_add(&mut self, score: i64, first: i64) {
        if let Some(prev) = self.add.last_mut() {
            if prev.is_continued_by(score, first) {
                prev.count = prev.count.saturating_add(1);
                return;
            }
        }
        self.add.push(Run {
            score,
            first,
            count: 1,
        });
    }
}

#[cfg(test)]
#[path = "effect_tests.rs"]
mod tests;
