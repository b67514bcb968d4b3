//! Argument parsing for the SLIDEWIN commands: pure Rust, no Redis types.
//!
//! ```text
//! SLIDEWIN.CHECK key limit window_ms [COST count] [ID request-id] [DETAIL] [WITHMEMBERS] [WITHOLDEST] [SHADOW]
//! SLIDEWIN.PEEK  key limit window_ms [COST count] [DETAIL] [WITHOLDEST]
//! SLIDEWIN.MCHECK numrules key limit window_ms [key limit window_ms ...] [COST count] [ID request-id] [DETAIL] [WITHMEMBERS] [SHADOW]
//! ```
//!
//! Integers are parsed the way Redis parses them (`string2ll`): an optional
//! `-`, then decimal digits, no `+`, no spaces, no leading zeros, no
//! exponent, no fraction, and no overflow. Options are case-insensitive, in
//! any order, each at most once. Anything else is rejected with an error
//! naming the argument and its valid range, before anything is changed.

use std::fmt;

use crate::member::MAX_REQUEST_ID;
use crate::window::{KeyedRule, Rule, Want};

/// Default of `slidewin.max-limit`: the largest `limit` and `count`.
pub const DEFAULT_MAX_LIMIT: i64 = 100_000;
/// Default of `slidewin.max-window-ms`: 366 days.
pub const DEFAULT_MAX_WINDOW_MS: i64 = 366 * 24 * 60 * 60 * 1000;

/// The configured upper bounds that arguments are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub max_limit: i64,
    pub max_window_ms: i64,
    /// The most entries one call may add in all its keys
    /// (`slidewin.max-entries-per-call`, or `max-limit` when that is 0).
    pub max_call_entries: i64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_limit: DEFAULT_MAX_LIMIT,
            max_window_ms: DEFAULT_MAX_WINDOW_MS,
            max_call_entries: DEFAULT_MAX_LIMIT,
        }
    }
}

/// Refuses a call that would add more than `bounds.max_call_entries`
/// entries in all: `cost` in each of `keys` distinct keys. Checked once the
/// arguments are parsed, before any key is opened, whatever the call would
/// decide.
pub fn entries_within(cost: u64, keys: usize, bounds: Bounds) -> Result<(), ArgError> {
    let keys = u64::try_from(keys).unwrap_or(u64::MAX);
    let entries = cost.saturating_mul(keys);
    match u64::try_from(bounds.max_call_entries) {
        Ok(max) if entries <= max => Ok(()),
        _ => Err(ArgError::Entries {
            cost,
            keys,
            entries,
            max: bounds.max_call_entries,
        }),
    }
}

/// Which command is being parsed: they share the syntax but not every option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Check,
    Peek,
}

/// The options after the limit and window (CHECK, PEEK) or the rules (MCHECK).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Options<'a> {
    cost: u64,
    detail: bool,
    with_members: bool,
    with_oldest: bool,
    shadow: bool,
    id: Option<&'a [u8]>,
}

/// A request id as `ID` takes it: 1 to [`MAX_REQUEST_ID`] bytes.
fn request_id(bytes: &[u8]) -> Result<&[u8], ArgError> {
    if (1..=MAX_REQUEST_ID).contains(&bytes.len()) {
        Ok(bytes)
    } else {
        Err(ArgError::RequestId)
    }
}

/// Parses `[COST count] [ID request-id] [DETAIL] [WITHMEMBERS] [WITHOLDEST]
/// [SHADOW]`; PEEK takes
/// COST, DETAIL (it always replies in detail, so DETAIL changes nothing)
/// and WITHOLDEST, not WITHMEMBERS (it records nothing: the error says so,
/// rather than "unknown option"); MCHECK (several
/// windows, `single` false) takes every option but WITHOLDEST.
fn parse_options<'a>(
    args: &mut impl Iterator<Item = &'a [u8]>,
    write: bool,
    single: bool,
    bounds: Bounds,
) -> Result<Options<'a>, ArgError> {
    let mut o = Options {
        cost: 1,
        detail: false,
        with_members: false,
        with_oldest: false,
        shadow: false,
        id: None,
    };
    let (mut seen_cost, mut seen_detail, mut seen_members, mut seen_oldest) =
        (false, false, false, false);
    let (mut seen_id, mut seen_shadow) = (false, false);
    let once = |seen: &mut bool, name: &'static str| {
        if std::mem::replace(seen, true) {
            Err(ArgError::RepeatedOption(name))
        } else {
            Ok(())
        }
    };
    while let Some(option) = args.next() {
        if option.eq_ignore_ascii_case(b"COST") {
            once(&mut seen_cost, "COST")?;
            let count = args.next().ok_or(ArgError::MissingCount)?;
            o.cost = positive_at_most(count, bounds.max_limit).ok_or(ArgError::Count {
                max: bounds.max_limit,
            })?;
        } else if option.eq_ignore_ascii_case(b"DETAIL") {
            once(&mut seen_detail, "DETAIL")?;
            o.detail = true;
        } else if write && option.eq_ignore_ascii_case(b"WITHMEMBERS") {
            once(&mut seen_members, "WITHMEMBERS")?;
            o.with_members = true;
        } else if !write && option.eq_ignore_ascii_case(b"WITHMEMBERS") {
            return Err(ArgError::PeekMembers);
        } else if write && option.eq_ignore_ascii_case(b"ID") {
            once(&mut seen_id, "ID")?;
            o.id = Some(request_id(args.next().ok_or(ArgError::MissingId)?)?);
        } else if !write && option.eq_ignore_ascii_case(b"ID") {
            return Err(ArgError::PeekId);
        } else if write && option.eq_ignore_ascii_case(b"SHADOW") {
            once(&mut seen_shadow, "SHADOW")?;
            o.shadow = true;
        } else if !write && option.eq_ignore_ascii_case(b"SHADOW") {
            return Err(ArgError::PeekShadow);
        } else if single && option.eq_ignore_ascii_case(b"WITHOLDEST") {
            once(&mut seen_oldest, "WITHOLDEST")?;
            o.with_oldest = true;
        } else {
            return Err(ArgError::UnknownOption(printable(option)));
        }
    }
    if o.with_members && o.id.is_some() {
        return Err(ArgError::MembersWithId);
    }
    Ok(o)
}

/// How a command replies: reply options, which the decision never sees
/// (it is only told what to compute, [`Want`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reply {
    /// Reply with the detail array instead of 1/0.
    pub detail: bool,
    /// Also reply with the members added (implies the detail reply).
    pub with_members: bool,
    /// Also reply with the age of the oldest entry in the window (implies
    /// the detail reply; CHECK and PEEK only).
    pub with_oldest: bool,
    /// SHADOW (CHECK and MCHECK): a call the limit refuses is answered as
    /// allowed (and charged nothing); the detail reply gains the field
    /// `shadow_refused`, after WITHOLDEST's and before WITHMEMBERS'.
    pub shadow: bool,
}

impl Reply {
    /// What the decision must compute for this reply.
    pub fn want(&self) -> Want {
        Want {
            detail: self.detail,
            members: self.with_members,
        }
    }
}

/// The validated arguments that follow the key: the rule (limit, window,
/// cost), the reply options and the request id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    pub rule: Rule,
    pub reply: Reply,
    /// `ID <request-id>`: the call is charged once under it.
    pub id: Option<&'a [u8]>,
}

/// The largest `numrules` of SLIDEWIN.MCHECK.
pub const MAX_RULES: i64 = 64;

/// MCHECK's layout, the one statement of it: argv[1] is `numrules`, then
/// each rule is `key limit window_ms`, so the keys are argv[2], argv[5], ...
/// The parser, the key-position answer and the key spec all use it.
pub const MCHECK_FIRST_KEY: usize = 2;
/// Arguments per MCHECK rule.
pub const MCHECK_RULE_ARGS: usize = 3;

/// The argv positions of MCHECK's keys, as far as `argv` (of `argc`
/// arguments, numrules at argv[1]) has them; none when numrules is invalid.
pub fn mcheck_key_positions(numrules: Option<&[u8]>, argc: usize) -> impl Iterator<Item = usize> {
    let rules = numrules
        .and_then(parse_i64)
        .filter(|n| (1..=MAX_RULES).contains(n))
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0);
    (0..rules)
        .map(|i| MCHECK_FIRST_KEY + MCHECK_RULE_ARGS * i)
        .take_while(move |&p| p < argc)
}

/// The validated arguments of
/// `SLIDEWIN.MCHECK numrules key limit window_ms [...] [COST count] [DETAIL] [WITHMEMBERS]`:
/// each rule's `key` is the key's argument, counted from the command name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiRequest<'a> {
    pub rules: Vec<KeyedRule>,
    pub cost: u64,
    pub reply: Reply,
    /// `ID <request-id>`: the call is charged once under it.
    pub id: Option<&'a [u8]>,
}

/// Why an argument vector was refused. `Display` gives the exact reply text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// The number of arguments is wrong; the server words this reply itself.
    WrongArity,
    /// `limit` is not an integer in `1..=max`.
    Limit { max: i64 },
    /// `window_ms` is not an integer in `1..=max`.
    Window { max: i64 },
    /// `COST`'s `count` is not an integer in `1..=max`.
    Count { max: i64 },
    /// `COST` was the last argument.
    MissingCount,
    /// An option this command does not know (shown printable).
    UnknownOption(String),
    /// An option given twice.
    RepeatedOption(&'static str),
    /// PEEK was given WITHMEMBERS: it records nothing, so has no members.
    PeekMembers,
    /// MCHECK's `numrules` is not an integer in `1..=MAX_RULES`.
    NumRules,
    /// `ID`'s request id is empty or longer than [`MAX_REQUEST_ID`].
    RequestId,
    /// `ID` was the last argument.
    MissingId,
    /// PEEK was given ID: it records nothing.
    PeekId,
    /// PEEK was given SHADOW: it refuses nothing.
    PeekShadow,
    /// WITHMEMBERS with ID: a charge made with an ID is given back by it.
    MembersWithId,
    /// SETTLE's `units` is not an integer in `0..=max`.
    SettleUnits { max: i64 },
    /// SETTLE's or UNDO's words are not where its syntax puts them.
    Syntax(&'static str),
    /// TOP's `count` is not an integer in `1..=MAX_TOP_COUNT`.
    TopCount,
    /// TOP was given both DENIED and ALLOWED.
    TopOutcomes,
    /// The call would add more entries in all than
    /// `slidewin.max-entries-per-call` allows.
    Entries {
        cost: u64,
        keys: u64,
        entries: u64,
        max: i64,
    },
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::WrongArity => f.write_str("ERR wrong number of arguments"),
            ArgError::Limit { max } => {
                write!(
                    f,
                    "ERR limit must be an integer between 1 and {max} (slidewin.max-limit)"
                )
            }
            ArgError::Window { max } => {
                write!(
                    f,
                    "ERR window_ms must be an integer between 1 and {max} (slidewin.max-window-ms)"
                )
            }
            ArgError::Count { max } => {
                write!(
                    f,
                    "ERR COST count must be an integer between 1 and {max} (slidewin.max-limit)"
                )
            }
            ArgError::MissingCount => f.write_str("ERR COST needs a count"),
            ArgError::UnknownOption(name) => write!(f, "ERR unknown option '{name}'"),
            ArgError::PeekMembers => f.write_str(
                "ERR PEEK records nothing, so it takes no WITHMEMBERS (CHECK and MCHECK do)",
            ),
            ArgError::RepeatedOption(name) => {
                write!(f, "ERR option {name} given more than once")
            }
            ArgError::NumRules => write!(
                f,
                "ERR numrules must be an integer between 1 and {MAX_RULES}, followed by that many 'key limit window_ms' triples"
            ),
            ArgError::RequestId => write!(f, "ERR ID must be 1 to {MAX_REQUEST_ID} bytes"),
            ArgError::MissingId => f.write_str("ERR ID needs a request id"),
            ArgError::PeekId => {
                f.write_str("ERR PEEK records nothing: ID applies to CHECK and MCHECK")
            }
            ArgError::PeekShadow => {
                f.write_str("ERR PEEK refuses nothing: SHADOW applies to CHECK and MCHECK")
            }
            ArgError::MembersWithId => f.write_str(
                "ERR WITHMEMBERS and ID cannot be combined: give a charge made with an ID back with SLIDEWIN.UNDO key ID request-id",
            ),
            ArgError::SettleUnits { max } => write!(
                f,
                "ERR COST units must be an integer between 0 and {max} (slidewin.max-limit)"
            ),
            ArgError::Syntax(usage) => write!(f, "ERR syntax error: {usage}"),
            ArgError::TopCount => write!(
                f,
                "ERR count must be an integer between 1 and {MAX_TOP_COUNT}"
            ),
            ArgError::TopOutcomes => f.write_str("ERR DENIED and ALLOWED exclude each other"),
            ArgError::Entries {
                cost,
                keys,
                entries,
                max,
            } => write!(
                f,
                "ERR COST {cost} on {keys} key{} would add {entries} entries; slidewin.max-entries-per-call allows {max} a call",
                if *keys == 1 { "" } else { "s" }
            ),
        }
    }
}

/// Parses a signed 64-bit integer exactly as Redis's `string2ll` does.
/// Returns `None` for anything Redis would refuse as "not an integer".
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first() {
        None => return None,
        Some((b'-', rest)) => (true, rest),
        Some(_) => (false, bytes),
    };
    match digits {
        [] => return None,
        [b'0'] => return if negative { None } else { Some(0) },
        [b'0', ..] => return None,
        _ => {}
    }
    // Accumulate as a negative number so that i64::MIN is representable.
    let mut acc: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = i64::from(b - b'0');
        acc = acc.checked_mul(10)?.checked_sub(d)?;
    }
    if negative {
        Some(acc)
    } else {
        acc.checked_neg()
    }
}

/// Parses `bytes` as an integer in `1..=max`, as a `u64`.
fn positive_at_most(bytes: &[u8], max: i64) -> Option<u64> {
    parse_i64(bytes)
        .filter(|v| (1..=max).contains(v))
        .and_then(|v| u64::try_from(v).ok())
}

/// A client-supplied token made safe to quote in an error reply: printable
/// ASCII kept, every other byte as `\xNN`, at most 32 bytes shown.
pub fn printable(bytes: &[u8]) -> String {
    const SHOWN: usize = 32;
    let mut out = String::new();
    for &b in bytes.iter().take(SHOWN) {
        if b.is_ascii_graphic() || b == b' ' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if bytes.len() > SHOWN {
        out.push_str("...");
    }
    out
}

/// Parses a `limit window_ms` pair against the configured bounds.
fn limit_and_window(limit: &[u8], window: &[u8], bounds: Bounds) -> Result<(u64, i64), ArgError> {
    let limit = positive_at_most(limit, bounds.max_limit).ok_or(ArgError::Limit {
        max: bounds.max_limit,
    })?;
    let window_ms = positive_at_most(window, bounds.max_window_ms)
        .and_then(|w| i64::try_from(w).ok())
        .ok_or(ArgError::Window {
            max: bounds.max_window_ms,
        })?;
    Ok((limit, window_ms))
}

/// Parses what follows the key: `limit window_ms [options]`.
pub fn parse<'a>(
    command: Command,
    mut args: impl Iterator<Item = &'a [u8]>,
    bounds: Bounds,
) -> Result<Request<'a>, ArgError> {
    let (Some(limit), Some(window)) = (args.next(), args.next()) else {
        return Err(ArgError::WrongArity);
    };
    let (limit, window_ms) = limit_and_window(limit, window, bounds)?;
    let o = parse_options(&mut args, command == Command::Check, true, bounds)?;
    Ok(Request {
        id: o.id,
        rule: Rule {
            limit,
            window_ms,
            cost: o.cost,
        },
        reply: Reply {
            // PEEK always replies in detail; WITHMEMBERS and WITHOLDEST
            // extend the detail reply.
            detail: o.detail || o.with_members || o.with_oldest || command == Command::Peek,
            with_members: o.with_members,
            with_oldest: o.with_oldest,
            shadow: o.shadow,
        },
    })
}

/// Parses the arguments of SLIDEWIN.MCHECK after the command name:
/// `numrules key limit window_ms [key limit window_ms ...] [options]`.
pub fn parse_multi<'a>(
    args: impl Iterator<Item = &'a [u8]>,
    bounds: Bounds,
) -> Result<MultiRequest<'a>, ArgError> {
    let mut args = args.enumerate().map(|(i, a)| (i + 1, a));
    let Some((_, numrules)) = args.next() else {
        return Err(ArgError::WrongArity);
    };
    let numrules = parse_i64(numrules)
        .filter(|n| (1..=MAX_RULES).contains(n))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(ArgError::NumRules)?;
    let mut rules = Vec::with_capacity(numrules);
    for _ in 0..numrules {
        let (Some((key_arg, _)), Some((_, limit)), Some((_, window))) =
            (args.next(), args.next(), args.next())
        else {
            return Err(ArgError::NumRules);
        };
        let (limit, window_ms) = limit_and_window(limit, window, bounds)?;
        rules.push(KeyedRule {
            key: key_arg,
            limit,
            window_ms,
        });
    }
    let o = parse_options(&mut args.map(|(_, a)| a), true, false, bounds)?;
    Ok(MultiRequest {
        id: o.id,
        rules,
        cost: o.cost,
        reply: Reply {
            detail: o.detail || o.with_members,
            with_members: o.with_members,
            with_oldest: false,
            shadow: o.shadow,
        },
    })
}

/// `SLIDEWIN.SETTLE key ID request-id COST units`, after the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettleRequest<'a> {
    pub id: &'a [u8],
    /// The units the charge is to hold: 0 to `max-limit`.
    pub units: u64,
}

const SETTLE_USAGE: &str = "SLIDEWIN.SETTLE key ID request-id COST units";

/// Parses `ID request-id COST units` (the server checked the arity).
pub fn parse_settle<'a>(args: &[&'a [u8]], bounds: Bounds) -> Result<SettleRequest<'a>, ArgError> {
    let [id_word, id, cost_word, units] = args else {
        return Err(ArgError::WrongArity);
    };
    if !id_word.eq_ignore_ascii_case(b"ID") || !cost_word.eq_ignore_ascii_case(b"COST") {
        return Err(ArgError::Syntax(SETTLE_USAGE));
    }
    let units = parse_i64(units)
        .filter(|v| (0..=bounds.max_limit).contains(v))
        .and_then(|v| u64::try_from(v).ok())
        .ok_or(ArgError::SettleUnits {
            max: bounds.max_limit,
        })?;
    Ok(SettleRequest {
        id: request_id(id)?,
        units,
    })
}

/// What `SLIDEWIN.UNDO key ...` gives back: the entries named by members
/// (or tokens), or the charge under a request id (`ID request-id`: a first
/// argument `ID` takes exactly one id after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UndoRequest<'a> {
    Members,
    Id(&'a [u8]),
}

const UNDO_ID_USAGE: &str = "SLIDEWIN.UNDO key ID request-id";

/// Reads UNDO's arguments after the key. `ID` first is the ID form, with
/// exactly one request id (no member or token is the word `ID`).
pub fn parse_undo<'a>(args: &[&'a [u8]]) -> Result<UndoRequest<'a>, ArgError> {
    match args {
        [] => Err(ArgError::WrongArity),
        [word, id] if word.eq_ignore_ascii_case(b"ID") => Ok(UndoRequest::Id(request_id(id)?)),
        [word, ..] if word.eq_ignore_ascii_case(b"ID") => Err(ArgError::Syntax(UNDO_ID_USAGE)),
        _ => Ok(UndoRequest::Members),
    }
}

/// The largest `count` of SLIDEWIN.TOP.
pub const MAX_TOP_COUNT: i64 = 100_000;

/// The validated arguments of `SLIDEWIN.TOP [count] [DENIED | ALLOWED] [RESET]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopRequest {
    /// How many keys to list; 10 unless given.
    pub count: usize,
    /// Denied decisions (the default) or allowed ones.
    pub allowed: bool,
    /// Clear the summary after reading it.
    pub reset: bool,
}

/// Parses the arguments of SLIDEWIN.TOP after the command name: a count
/// and the words, in any order, each at most once.
pub fn parse_top<'a>(args: impl Iterator<Item = &'a [u8]>) -> Result<TopRequest, ArgError> {
    let mut r = TopRequest {
        count: 10,
        allowed: false,
        reset: false,
    };
    let (mut seen_outcome, mut seen_reset, mut seen_count) = (None::<&'static str>, false, false);
    for arg in args {
        if arg.eq_ignore_ascii_case(b"DENIED") || arg.eq_ignore_ascii_case(b"ALLOWED") {
            let word = if arg.eq_ignore_ascii_case(b"DENIED") {
                "DENIED"
            } else {
                "ALLOWED"
            };
            match seen_outcome {
                Some(w) if w == word => return Err(ArgError::RepeatedOption(word)),
                Some(_) => return Err(ArgError::TopOutcomes),
                None => seen_outcome = Some(word),
            }
            r.allowed = word == "ALLOWED";
        } else if arg.eq_ignore_ascii_case(b"RESET") {
            if seen_reset {
                return Err(ArgError::RepeatedOption("RESET"));
            }
            seen_reset = true;
            r.reset = true;
        } else if arg
            .first()
            .is_some_and(|b| b.is_ascii_digit() || *b == b'-')
        {
            if std::mem::replace(&mut seen_count, true) {
                return Err(ArgError::RepeatedOption("count"));
            }
            r.count = positive_at_most(arg, MAX_TOP_COUNT)
                .and_then(|c| usize::try_from(c).ok())
                .ok_or(ArgError::TopCount)?;
        } else {
            return Err(ArgError::UnknownOption(printable(arg)));
        }
    }
    Ok(r)
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
