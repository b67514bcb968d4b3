//! Command metadata for `COMMAND INFO` / `COMMAND DOCS`: arity, key specs,
//! argument tree, summary and complexity, as plain data (the types are
//! `ffi::set_command_info`'s, which turns them into the server's structures
//! for `RedisModule_SetCommandInfo`).

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw;

use crate::ffi::set_command_info::{ArgDoc, CommandDoc, Keys};

const fn required(name: &'static CStr, kind: raw::RedisModuleCommandArgType) -> ArgDoc {
    ArgDoc {
        name,
        kind,
        key_spec: None,
        token: None,
        optional: false,
        multiple: false,
        subargs: &[],
    }
}

const KEY: ArgDoc = ArgDoc {
    key_spec: Some(0),
    ..required(
        c"key",
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
    )
};
const LIMIT: ArgDoc = required(
    c"limit",
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
);
const WINDOW: ArgDoc = required(
    c"window_ms",
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
);
const COST: ArgDoc = ArgDoc {
    token: Some(c"COST"),
    optional: true,
    ..required(
        c"count",
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
    )
};
const DETAIL: ArgDoc = ArgDoc {
    token: Some(c"DETAIL"),
    optional: true,
    ..required(
        c"detail",
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
    )
};
const WITHMEMBERS: ArgDoc = ArgDoc {
    token: Some(c"WITHMEMBERS"),
    optional: true,
    ..required(
        c"withmembers",
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
    )
};
const WITHOLDEST: ArgDoc = ArgDoc {
    token: Some(c"WITHOLDEST"),
    optional: true,
    ..required(
        c"witholdest",
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
    )
};
const SHADOW: ArgDoc = ArgDoc {
    token: Some(c"SHADOW"),
    optional: true,
    ..required(
        c"shadow",
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
    )
};

const ID: ArgDoc = ArgDoc {
    token: Some(c"ID"),
    optional: true,
    ..required(
        c"request-id",
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
    )
};

/// `SLIDEWIN.CHECK key limit window_ms [COST count] [ID request-id] [DETAIL] [WITHMEMBERS] [WITHOLDEST] [SHADOW]`.
pub const CHECK: CommandDoc = CommandDoc {
    name: c"slidewin.check",
    summary: c"Records a call of `count` units (default 1) and replies 1 if they fit under `limit` in the trailing `window_ms` milliseconds; else replies 0 and records nothing. DETAIL replies [allowed, limit, remaining, retry_after_ms, reset_after_ms]; WITHOLDEST adds oldest_age_ms (-1 when empty), WITHMEMBERS the members added (tokens for SLIDEWIN.UNDO). With ID, the units are a charge under that request id: while the key holds it, the same ID charges nothing and replies 1. SHADOW (a dry run): a call the limit refuses records nothing but replies 1 (allowed field 1), and DETAIL adds shadow_refused (1 when the limit refused) after oldest_age_ms and before the members.",
    complexity: c"O(log(N) + M*log(N) + C*log(N)) with N the entries in the key, M the expired entries removed and C the count added; DETAIL on a denied call adds O(min(k, N-k)) to find the entry to wait for.",
    since: c"0.1.0",
    arity: -4,
    key_flags: raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_ACCESS
        | raw::REDISMODULE_CMD_KEY_UPDATE,
    keys: Keys::First,
    args: &[
        KEY,
        LIMIT,
        WINDOW,
        COST,
        ID,
        DETAIL,
        WITHMEMBERS,
        WITHOLDEST,
        SHADOW,
    ],
};

/// `SLIDEWIN.PEEK key limit window_ms [COST count] [DETAIL] [WITHOLDEST]`.
pub const PEEK: CommandDoc = CommandDoc {
    name: c"slidewin.peek",
    summary: c"Replies what SLIDEWIN.CHECK ... DETAIL would reply now, [allowed, limit, remaining, retry_after_ms, reset_after_ms], without writing, trimming, replicating or creating anything. It always replies in detail: DETAIL is accepted and changes nothing; WITHOLDEST adds oldest_age_ms (-1 when empty).",
    complexity: c"O(log(N) + M) with N the entries in the key and M the expired entries not yet removed; a denied call adds O(min(k, N-k)).",
    since: c"0.1.0",
    arity: -4,
    key_flags: raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
    keys: Keys::First,
    args: &[KEY, LIMIT, WINDOW, COST, DETAIL, WITHOLDEST],
};

/// `SLIDEWIN.MCHECK numrules key limit window_ms [...] [COST count] [ID request-id] [DETAIL] [WITHMEMBERS] [SHADOW]`.
pub const MCHECK: CommandDoc = CommandDoc {
    name: c"slidewin.mcheck",
    summary: c"Judges several sliding-window rules (key limit window_ms) on one clock reading and records `count` units in every key only if every rule allows them; replies 1/0, or with DETAIL [allowed, retry_after_ms, one five-field array per rule]. With ID, the units are a charge under that request id in each key: while any of the keys holds it, the same ID charges nothing and replies 1. SHADOW (a dry run): a call the rules refuse records nothing but replies 1 (top allowed field 1; each rule's own field stays real), and DETAIL adds shadow_refused after the rules' arrays and before the members.",
    complexity: c"The sum over its keys of SLIDEWIN.CHECK's complexity.",
    since: c"0.1.0",
    arity: -5,
    key_flags: raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_ACCESS
        | raw::REDISMODULE_CMD_KEY_UPDATE,
    keys: Keys::Counted {
        first: crate::args::MCHECK_FIRST_KEY as c_int,
        step: crate::args::MCHECK_RULE_ARGS as c_int,
    },
    args: &[
        required(
            c"numrules",
            raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ),
        ArgDoc {
            multiple: true,
            subargs: &[KEY, LIMIT, WINDOW],
            ..required(
                c"rule",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
            )
        },
        COST,
        ID,
        DETAIL,
        WITHMEMBERS,
        SHADOW,
    ],
};

/// `SLIDEWIN.UNDO key member [member ...]` or `SLIDEWIN.UNDO key ID request-id`.
pub const UNDO: CommandDoc = CommandDoc {
    name: c"slidewin.undo",
    summary: c"Removes entries a check added, giving the attempt back: the members WITHMEMBERS handed out (a token <id>@<ms> only while its entry is still scored ms), or with ID the whole charge made under that request id; replies how many entries were removed.",
    complexity: c"O(M*log(N)) with M the members given (or the units of the charge) and N the entries in the key.",
    since: c"0.1.0",
    arity: -3,
    key_flags: raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE,
    keys: Keys::First,
    args: &[
        KEY,
        ArgDoc {
            subargs: &[
                ArgDoc {
                    multiple: true,
                    ..required(
                        c"member",
                        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                    )
                },
                ArgDoc {
                    token: Some(c"ID"),
                    ..required(
                        c"request-id",
                        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                    )
                },
            ],
            ..required(
                c"what",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            )
        },
    ],
};

/// `SLIDEWIN.SETTLE key ID request-id COST units`.
pub const SETTLE: CommandDoc = CommandDoc {
    name: c"slidewin.settle",
    summary: c"Sets the units of the charge a CHECK or MCHECK made under a request id: fewer gives the difference back, more adds it at the charge's own time (past the limit if need be), 0 gives it all back. Replies the units now charged, or -1 when the key holds no charge under that id.",
    complexity: c"O((log(U) + D)*log(N)) with U the charge's units, D the units added or removed and N the entries in the key.",
    since: c"0.2.0",
    arity: 6,
    key_flags: raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
    keys: Keys::First,
    args: &[
        KEY,
        ArgDoc {
            token: Some(c"ID"),
            ..required(
                c"request-id",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            )
        },
        ArgDoc {
            token: Some(c"COST"),
            ..required(
                c"units",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            )
        },
    ],
};

/// `SLIDEWIN.APPLY key [LOG payload] [TRIM cutoff_ms] [REMOVE member]...
/// [ADD score_ms first_member count]... [PXAT unix_ms]`: the effect command
/// of compact logs (only with `slidewin.log-type compact`).
pub const APPLY: CommandDoc = CommandDoc {
    name: c"slidewin.apply",
    summary: c"Applies the effect of a call to a compact log with absolute times, deciding nothing: what replication and the AOF carry instead of CHECK, MCHECK and UNDO (only with slidewin.log-type compact). LOG replaces the log by an encoded one, TRIM removes the entries scored at or below cutoff_ms, REMOVE removes one member, ADD adds count entries scored score_ms under members first_member onwards, PXAT sets the expiry; all are checked before anything changes.",
    complexity: c"O(N + A + R) with N the runs in the log, A the runs added and R the members removed; O(P) for a LOG payload of P bytes.",
    since: c"0.2.0",
    arity: -3,
    // The server takes one of INSERT, DELETE and UPDATE: UPDATE, as
    // SLIDEWIN.APPLY's changes (it may also delete an emptied log).
    key_flags: raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE,
    keys: Keys::First,
    args: &[
        KEY,
        ArgDoc {
            token: Some(c"LOG"),
            optional: true,
            ..required(
                c"payload",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            )
        },
        ArgDoc {
            token: Some(c"TRIM"),
            optional: true,
            ..required(
                c"cutoff_ms",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            )
        },
        ArgDoc {
            token: Some(c"REMOVE"),
            optional: true,
            multiple: true,
            ..required(
                c"member",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            )
        },
        ArgDoc {
            token: Some(c"ADD"),
            optional: true,
            multiple: true,
            subargs: &[
                required(
                    c"score_ms",
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ),
                required(
                    c"first_member",
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ),
                required(
                    c"count",
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ),
            ],
            ..required(
                c"run",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
            )
        },
        ArgDoc {
            token: Some(c"PXAT"),
            optional: true,
            ..required(
                c"unix_ms",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
            )
        },
    ],
};

/// `SLIDEWIN.DEBUG-PANIC key`: only in the fault-injection build.
#[cfg(feature = "fault-injection")]
pub const DEBUG_PANIC: CommandDoc = CommandDoc {
    name: c"slidewin.debug-panic",
    summary: c"Test-only (fault-injection build): panics inside the command, to show the panic is caught, answered with an error and logged.",
    complexity: c"O(1)",
    since: c"0.1.0",
    arity: 2,
    key_flags: raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
    keys: Keys::First,
    args: &[KEY],
};

/// `SLIDEWIN.TOP [count] [DENIED | ALLOWED] [RESET]`.
pub const TOP: CommandDoc = CommandDoc {
    name: c"slidewin.top",
    summary: c"Lists the keys with the most denied (or allowed) decisions on this node in the last slidewin.top-period-ms, most first, as [key, count, error_bound] (the true count is within error_bound below count). RESET clears the summary after reading it. Node-local, never replicated or persisted.",
    complexity: c"O(C*log(C)) with C the summary's capacity (slidewin.top-capacity); CHECK and MCHECK pay O(log(C)) per decision to feed it.",
    since: c"0.1.0",
    arity: -1,
    key_flags: 0,
    keys: Keys::None,
    args: &[
        ArgDoc {
            optional: true,
            ..required(
                c"count",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            )
        },
        ArgDoc {
            optional: true,
            subargs: &[
                ArgDoc {
                    token: Some(c"DENIED"),
                    ..required(
                        c"denied",
                        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                    )
                },
                ArgDoc {
                    token: Some(c"ALLOWED"),
                    ..required(
                        c"allowed",
                        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                    )
                },
            ],
            ..required(
                c"outcome",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            )
        },
        ArgDoc {
            token: Some(c"RESET"),
            optional: true,
            ..required(
                c"reset",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            )
        },
    ],
};
