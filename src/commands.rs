//! Thin command wrappers: parse, read the clock once, run the pure decision
//! on the Redis-backed log, count, reply. No window logic lives here.

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisError, RedisResult, RedisValue};

use crate::args::{self, ArgError, Command, Reply, UndoRequest};
use crate::ffi::key::Key;
use crate::ffi::{Arg, CallError};
use crate::store::compact::effect::{ApplyError, Effect};
use crate::store::compact::store as compact_store;
use crate::store::key_log::{self, Held, KeyLog};
use crate::top::Outcome;
use crate::window::{self, Detail, KeyedRule, SettleBounds, Settled, Verdict};
use crate::{clock, config, counters, member, top::hitters};

impl From<ArgError> for RedisError {
    fn from(e: ArgError) -> Self {
        match e {
            ArgError::WrongArity => RedisError::WrongArity,
            other => RedisError::String(other.to_string()),
        }
    }
}

/// An effect SLIDEWIN.APPLY refused: its text, as it always was.
impl From<ApplyError> for RedisError {
    fn from(e: ApplyError) -> Self {
        RedisError::String(e.to_string())
    }
}

/// Runs a command body, turning a panic into an error reply: a panic that
/// crossed into the server would abort it and take every client's data down.
fn guarded(body: impl FnOnce() -> RedisResult) -> RedisResult {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        Err(RedisError::Str(
            "ERR slidewin internal error (a bug; see the server log)",
        ))
    })
}

/// The server's clock, read once per command.
fn server_now() -> Result<i64, RedisError> {
    clock::now_ms().ok_or(RedisError::Str("ERR the server clock is unavailable"))
}

fn int(v: u64) -> RedisValue {
    RedisValue::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

/// The five DETAIL fields `[allowed, limit, remaining, retry_after_ms, reset_after_ms]`.
fn five(allowed: bool, limit: u64, d: &Detail) -> Vec<RedisValue> {
    vec![
        RedisValue::Integer(i64::from(allowed)),
        int(limit),
        int(d.remaining),
        RedisValue::Integer(d.retry_after_ms),
        RedisValue::Integer(d.reset_after_ms),
    ]
}

/// The members added, as the tokens `<id>@<ms>` SLIDEWIN.UNDO takes back
/// (every entry of a call is scored `now_ms`).
fn members(ids: &[i64], now_ms: i64) -> RedisValue {
    RedisValue::Array(
        ids.iter()
            .map(|&id| RedisValue::BulkString(member::token(id, now_ms)))
            .collect(),
    )
}

/// The reply for a verdict: `1`/`0`, or the five-field DETAIL array, plus
/// the oldest entry's age with WITHOLDEST (`oldest_age_ms`, -1 for an
/// empty window), plus `shadow_refused` with SHADOW, plus, last, the
/// members added with WITHMEMBERS. With SHADOW a refused call is answered
/// as allowed (`1`, or an allowed field of 1); its other fields are the
/// real ones.
fn reply(
    options: Reply,
    limit: u64,
    verdict: &Verdict,
    oldest_age: Option<i64>,
    now_ms: i64,
) -> RedisValue {
    let shadow_refused = options.shadow && !verdict.allowed;
    let answered = verdict.allowed || options.shadow;
    match &verdict.detail {
        Some(d) if options.detail => {
            let mut fields = five(answered, limit, d);
            if options.with_oldest {
                fields.push(RedisValue::Integer(oldest_age.unwrap_or(-1)));
            }
            if options.shadow {
                fields.push(RedisValue::Integer(i64::from(shadow_refused)));
            }
            if options.with_members {
                fields.push(members(&verdict.members, now_ms));
            }
            RedisValue::Array(fields)
        }
        _ => RedisValue::Integer(i64::from(answered)),
    }
}

/// Charges a decision on `key` to the node's heavy hitters; a denial also
/// fires the keyspace event `slidewin.denied` (class `d`, module events).
/// A refusal under SHADOW (`shadow`) is charged to the hitters as a denial
/// (SLIDEWIN.TOP DENIED lists it) but fires no event: the caller was
/// allowed.
fn observe(ctx: &Context, now_ms: i64, allowed: bool, shadow: bool, key: &Arg) {
    hitters::record(config::top_settings(), now_ms, allowed, key.as_slice());
    if !allowed && !shadow {
        crate::ffi::notify(
            ctx,
            redis_module::raw::REDISMODULE_NOTIFY_MODULE as std::os::raw::c_int,
            c"slidewin.denied",
            key,
        );
    }
}

fn execute(ctx: &Context, argv: &[Arg], command: Command) -> RedisResult {
    let [_, key, rest @ ..] = argv else {
        return Err(RedisError::WrongArity);
    };
    let bounds = config::bounds();
    let request = args::parse(command, rest.iter().map(|a| a.as_slice()), bounds)?;
    if command == Command::Check {
        args::entries_within(request.rule.cost, 1, bounds)?;
    }
    let now = server_now()?;
    let rule = &request.rule;
    let oldest = |log: &mut KeyLog, verdict: &Verdict| match request.reply.with_oldest {
        true => window::oldest_age(log, now, rule.window_ms, verdict.count),
        false => Ok(None),
    };
    let (verdict, oldest_age) = match command {
        Command::Check => {
            let mut log = KeyLog::open_write(ctx, key)?;
            let verdict =
                window::check_request(&mut log, now, rule, request.reply.want(), request.id)?;
            let oldest_age = oldest(&mut log, &verdict)?;
            match (verdict.repeated, request.reply.shadow && !verdict.allowed) {
                (true, _) => counters::record_repeat(),
                (false, true) => counters::record_shadow_refused(),
                (false, false) => counters::record_check(verdict.allowed, verdict.added),
            }
            drop(log);
            observe(ctx, now, verdict.allowed, request.reply.shadow, key);
            (verdict, oldest_age)
        }
        Command::Peek => {
            let mut log = KeyLog::open_read(ctx, key)?;
            let verdict = window::peek(&mut log, now, rule)?;
            let oldest_age = oldest(&mut log, &verdict)?;
            counters::record_peek();
            (verdict, oldest_age)
        }
    };
    Ok(reply(request.reply, rule.limit, &verdict, oldest_age, now))
}

fn counted(result: RedisResult) -> RedisResult {
    if result.is_err() {
        counters::record_error();
    }
    result
}

fn run(ctx: &Context, argv: &[Arg], command: Command) -> RedisResult {
    counted(guarded(|| execute(ctx, argv, command)))
}

/// Answers a key-position request (COMMAND GETKEYS, cluster routing, ACL
/// key checks) for MCHECK: its keys are argv[2], argv[5], ... one per rule.
fn report_multi_keys(ctx: &Context, argv: &[Arg]) -> RedisResult {
    for pos in args::mcheck_key_positions(argv.get(1).map(|n| n.as_slice()), argv.len()) {
        crate::ffi::key_at_pos(ctx, argv.len(), pos)?;
    }
    Ok(RedisValue::NoReply)
}

fn execute_multi(ctx: &Context, argv: &[Arg]) -> RedisResult {
    if crate::ffi::is_keys_position_request(ctx) {
        return report_multi_keys(ctx, argv);
    }
    let bounds = config::bounds();
    let request = args::parse_multi(argv.iter().skip(1).map(|a| a.as_slice()), bounds)?;
    // One log per distinct key, in order of first appearance.
    let mut keys: Vec<&Arg> = Vec::new();
    let mut rules = Vec::with_capacity(request.rules.len());
    for r in &request.rules {
        let key = argv.get(r.key).ok_or(RedisError::WrongArity)?;
        let log = match keys.iter().position(|k| k.as_slice() == key.as_slice()) {
            Some(i) => i,
            None => {
                keys.push(key);
                keys.len() - 1
            }
        };
        rules.push(KeyedRule { key: log, ..*r });
    }
    // COST entries in each distinct key: refused above the per-call bound
    // before any key is opened.
    args::entries_within(request.cost, keys.len(), bounds)?;
    let now = server_now()?;
    // Every key is opened and type-checked before anything changes.
    let mut logs = keys
        .iter()
        .map(|k| KeyLog::open_write(ctx, k))
        .collect::<Result<Vec<_>, _>>()?;
    let want = request.reply.want();
    let v = window::mcheck_request(&mut logs, &rules, now, request.cost, want, request.id)?;
    let shadow = request.reply.shadow;
    match (v.repeated, v.allowed) {
        (true, _) => counters::record_repeat(),
        (false, true) => {
            counters::record_check(true, request.cost.saturating_mul(logs.len() as u64))
        }
        (false, false) if shadow => counters::record_shadow_refused(),
        (false, false) => counters::record_check(false, 0),
    }
    drop(logs);
    if v.repeated {
        // A repeat decides nothing new: the heavy hitters saw the first.
    } else if v.allowed {
        for key in &keys {
            observe(ctx, now, true, shadow, key);
        }
    } else {
        for &i in &v.refused_logs {
            if let Some(key) = keys.get(i) {
                observe(ctx, now, false, shadow, key);
            }
        }
    }
    // SHADOW answers a refused call as allowed; every other field is real
    // (each rule's own allowed field says which rule would have refused).
    let answered = v.allowed || shadow;
    if !request.reply.detail {
        return Ok(RedisValue::Integer(i64::from(answered)));
    }
    let mut fields = vec![
        RedisValue::Integer(i64::from(answered)),
        RedisValue::Integer(v.retry_after_ms),
    ];
    for (rule, (ok, d)) in rules.iter().zip(&v.rules) {
        fields.push(RedisValue::Array(five(*ok, rule.limit, d)));
    }
    if shadow {
        fields.push(RedisValue::Integer(i64::from(!v.allowed)));
    }
    if request.reply.with_members {
        fields.push(members(&v.members, now));
    }
    Ok(RedisValue::Array(fields))
}

fn execute_undo(ctx: &Context, argv: &[Arg]) -> RedisResult {
    let [_, key, members @ ..] = argv else {
        return Err(RedisError::WrongArity);
    };
    let words: Vec<&[u8]> = members.iter().map(|a| a.as_slice()).collect();
    let request = args::parse_undo(&words)?;
    let now = server_now()?;
    let (mut log, expires_at) = KeyLog::open_write_expiring(ctx, key)?;
    let removed = match request {
        UndoRequest::Members => {
            window::trim_own(&mut log, now, expires_at)?;
            log.remove_members(members, now)?
        }
        UndoRequest::Id(id) => window::undo_request(&mut log, id, now, expires_at)?,
    };
    counters::record_undo(removed);
    Ok(int(removed))
}

fn execute_settle(ctx: &Context, argv: &[Arg]) -> RedisResult {
    let [_, key, rest @ ..] = argv else {
        return Err(RedisError::WrongArity);
    };
    let words: Vec<&[u8]> = rest.iter().map(|a| a.as_slice()).collect();
    let bounds = config::bounds();
    let request = args::parse_settle(&words, bounds)?;
    let now = server_now()?;
    let (mut log, expires_at) = KeyLog::open_write_expiring(ctx, key)?;
    // A raise adds entries: bounded per call as CHECK's COST is, and the
    // key stays within max-limit entries as CHECK's limit keeps it.
    let limits = SettleBounds {
        max_added: u64::try_from(bounds.max_call_entries).unwrap_or(0),
        max_entries: u64::try_from(bounds.max_limit).unwrap_or(0),
    };
    let units = request.units;
    match window::settle(&mut log, request.id, units, now, expires_at, limits)? {
        Settled::Units(units) => {
            counters::record_settle();
            Ok(int(units))
        }
        Settled::NoCharge => Ok(RedisValue::Integer(-1)),
        Settled::TooManyAdded { added } => Err(RedisError::String(format!(
            "ERR SETTLE to {units} units would add {added} entries; slidewin.max-entries-per-call allows {} a call",
            bounds.max_call_entries
        ))),
        Settled::TooManyEntries { entries } => Err(RedisError::String(format!(
            "ERR SETTLE to {units} units would leave the key with {entries} entries; slidewin.max-limit allows {}",
            bounds.max_limit
        ))),
    }
}

fn execute_top(argv: &[Arg]) -> RedisResult {
    let request = args::parse_top(argv.iter().skip(1).map(|a| a.as_slice()))?;
    let now = server_now()?;
    let outcome = if request.allowed {
        Outcome::Allowed
    } else {
        Outcome::Denied
    };
    let list = hitters::top(
        config::top_settings(),
        now,
        outcome,
        request.count,
        request.reset,
    )
    .map_err(|_| {
        RedisError::Str("ERR the heavy-hitters summary is off: slidewin.top-capacity is 0")
    })?;
    Ok(RedisValue::Array(
        list.into_iter()
            .map(|h| {
                RedisValue::Array(vec![
                    RedisValue::StringBuffer(h.key),
                    int(h.count),
                    int(h.error),
                ])
            })
            .collect(),
    ))
}

fn execute_apply(ctx: &Context, argv: &[Arg]) -> RedisResult {
    let [_, name, rest @ ..] = argv else {
        return Err(RedisError::WrongArity);
    };
    if rest.is_empty() {
        return Err(RedisError::WrongArity);
    }
    let words: Vec<&[u8]> = rest.iter().map(|a| a.as_slice()).collect();
    let effect = Effect::parse(&words)?;
    let key = Key::open_write(ctx, name)?;
    if key_log::held(&key)? == Held::Zset {
        return Err(CallError::WrongType.into());
    }
    compact_store::apply(ctx, name, key, &effect)?;
    crate::ffi::replicate_verbatim(ctx)?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `SLIDEWIN.CHECK key limit window_ms [COST count] [ID request-id] [DETAIL]
/// [WITHMEMBERS] [WITHOLDEST] [SHADOW]`
///
/// Trims the entries of `key` scored at or below `now - window_ms`; if
/// `count` more fit under `limit`, records them at `now`, sets the key to
/// expire when the newest entry leaves the window, and replies 1; otherwise
/// replies 0 and adds nothing. DETAIL replies with the five-field array.
/// SHADOW replies 1 where it would reply 0 (still adding nothing) and adds
/// the field `shadow_refused` to the detail reply.
pub fn check(ctx: &Context, argv: &[Arg]) -> RedisResult {
    run(ctx, argv, Command::Check)
}

/// `SLIDEWIN.MCHECK numrules key limit window_ms [key limit window_ms ...]
/// [COST count] [ID request-id] [DETAIL] [WITHMEMBERS] [SHADOW]`
///
/// Judges every rule on one `now`; allowed only if every rule allows
/// `count`, and then adds `count` entries (the same members) to each
/// distinct key once. Replies 1/0, or with DETAIL
/// `[allowed, retry_after_ms, [rule 1's five fields], ...]`.
pub fn mcheck(ctx: &Context, argv: &[Arg]) -> RedisResult {
    counted(guarded(|| execute_multi(ctx, argv)))
}

/// `SLIDEWIN.UNDO key <member [member ...] | ID request-id>`
///
/// Removes entries a check added (give an attempt back): the members
/// given, or the units of the charge made under `request-id`; replies how
/// many were removed. Replicated as `ZREM` of the removed members (a
/// compact log: as `SLIDEWIN.APPLY`).
pub fn undo(ctx: &Context, argv: &[Arg]) -> RedisResult {
    counted(guarded(|| execute_undo(ctx, argv)))
}

/// `SLIDEWIN.SETTLE key ID request-id COST units`
///
/// Sets the units of the charge made under `request-id` (by CHECK or
/// MCHECK with `ID`): fewer gives the difference back, more adds it at the
/// charge's own time (past the limit if need be), 0 gives it all back.
/// Replies the units now charged, or -1 when the key holds no such charge.
pub fn settle(ctx: &Context, argv: &[Arg]) -> RedisResult {
    counted(guarded(|| execute_settle(ctx, argv)))
}

/// `SLIDEWIN.TOP [count] [DENIED | ALLOWED] [RESET]`
///
/// The `count` keys (10 unless given) with the most denied (or allowed)
/// decisions on this node in the last `slidewin.top-period-ms`, most first,
/// as `[key, count, error_bound]`: the true count lies in
/// `[count - error_bound, count]`. RESET clears the summary after reading.
pub fn top(_ctx: &Context, argv: &[Arg]) -> RedisResult {
    counted(guarded(|| execute_top(argv)))
}

/// `SLIDEWIN.PEEK key limit window_ms [COST count] [DETAIL] [WITHOLDEST]`
///
/// Replies what `SLIDEWIN.CHECK ... DETAIL` would reply now, changing,
/// creating and replicating nothing.
pub fn peek(ctx: &Context, argv: &[Arg]) -> RedisResult {
    run(ctx, argv, Command::Peek)
}

/// `SLIDEWIN.APPLY key [LOG payload] [TRIM cutoff_ms] [REMOVE member]...
/// [ADD score_ms first_member count]... [PXAT unix_ms]`
///
/// The effect command of compact logs (see `store/compact/effect.rs`): applies absolute
/// changes, checked first; replicated as it came.
pub fn apply(ctx: &Context, argv: &[Arg]) -> RedisResult {
    counted(guarded(|| execute_apply(ctx, argv)))
}

/// `SLIDEWIN.DEBUG-PANIC key` (fault-injection build only): panics with a
/// message holding `%` conversions, which must reach the server log as text.
#[cfg(feature = "fault-injection")]
pub fn debug_panic(ctx: &Context, argv: &[Arg]) -> RedisResult {
    let _ = ctx;
    counted(guarded(|| {
        let key = argv
            .get(1)
            .map(|k| String::from_utf8_lossy(k.as_slice()).into_owned())
            .unwrap_or_default();
        panic!("fault injection on {key}: %s%s%n")
    }))
}
