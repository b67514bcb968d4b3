//! Command metadata for `COMMAND INFO` / `COMMAND DOCS`: arity, key specs,
//! argument tree, summary and complexity, given to the server with
//! `RedisModule_SetCommandInfo` (Redis 7.0+). The server copies everything it
//! is handed, so the structures here only need to live for the call.

use std::ffi::CStr;
use std::mem::size_of;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context};

use crate::ffi::{api, StoreError};

/// One argument of a command, as `COMMAND DOCS` shows it.
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: raw::RedisModuleCommandArgType,
    /// Index into the command's key specs, for key arguments.
    pub key_spec: Option<c_int>,
    /// The keyword that introduces the argument (`COST`, `DETAIL`).
    pub token: Option<&'static CStr>,
    pub optional: bool,
    /// May repeat (MCHECK's rules).
    pub multiple: bool,
    /// The parts of a block argument.
    pub subargs: &'static [ArgDoc],
}

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

/// Where a command's keys are.
pub enum Keys {
    /// One key, at argv[1].
    First,
    /// A count of rules at argv[1], the first key at argv[2], then every
    /// `step`-th argument (MCHECK: step 3), options after the last rule.
    Counted { step: c_int },
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

/// Everything the server is told about one command.
pub struct CommandDoc {
    pub name: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub since: &'static CStr,
    pub arity: c_int,
    /// Where the keys are, and their key spec flags (REDISMODULE_CMD_KEY_*).
    pub keys: Keys,
    pub key_flags: u32,
    pub args: &'static [ArgDoc],
}

fn zeroed_arg() -> raw::RedisModuleCommandArg {
    raw::RedisModuleCommandArg {
        name: ptr::null(),
        type_: 0,
        key_spec_index: -1,
        token: ptr::null(),
        summary: ptr::null(),
        since: ptr::null(),
        flags: 0,
        deprecated_since: ptr::null(),
        subargs: ptr::null_mut(),
        display_text: ptr::null(),
    }
}

fn key_spec(keys: &Keys, flags: u32) -> raw::RedisModuleCommandKeySpec {
    let (find_keys_type, fk) = match keys {
        Keys::First => (
            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
            raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
                range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                    lastkey: 0,
                    keystep: 1,
                    limit: 0,
                },
            },
        ),
        // From argv[2], every `step`-th argument. The servers read a keynum
        // spec's count as a number of *arguments*, not of rules, so the spec
        // is a range marked INCOMPLETE (options follow the rules) and the
        // exact keys come from the command's getkeys-api answer.
        Keys::Counted { step } => (
            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
            raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
                range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                    lastkey: -1,
                    keystep: *step,
                    limit: 0,
                },
            },
        ),
    };
    let (pos, flags) = match keys {
        Keys::First => (1, flags),
        Keys::Counted { .. } => (
            crate::args::MCHECK_FIRST_KEY as c_int,
            flags | raw::REDISMODULE_CMD_KEY_INCOMPLETE,
        ),
    };
    raw::RedisModuleCommandKeySpec {
        notes: ptr::null(),
        flags: u64::from(flags),
        begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
        bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos },
        },
        find_keys_type,
        fk,
    }
}

fn zeroed_key_spec() -> raw::RedisModuleCommandKeySpec {
    let mut spec = key_spec(&Keys::First, 0);
    spec.begin_search_type = 0;
    spec.find_keys_type = 0;
    spec
}

/// The server's view of `args`, zero-terminated; nested blocks are kept
/// alive in `keep` until the server has copied them.
fn raw_args(
    args: &[ArgDoc],
    keep: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = args
        .iter()
        .map(|a| {
            let mut flags = 0;
            if a.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if a.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            raw::RedisModuleCommandArg {
                name: a.name.as_ptr(),
                type_: a.kind,
                key_spec_index: a.key_spec.unwrap_or(-1),
                token: a.token.map_or(ptr::null(), CStr::as_ptr),
                flags: flags as c_int,
                subargs: if a.subargs.is_empty() {
                    ptr::null_mut()
                } else {
                    raw_args(a.subargs, keep)
                },
                ..zeroed_arg()
            }
        })
        .collect();
    out.push(zeroed_arg());
    let p = out.as_mut_ptr();
    // Moving the Vec into `keep` does not move its heap buffer.
    keep.push(out);
    p
}

/// Gives the server the metadata of an already created command.
pub fn set_command_info(ctx: &Context, doc: &CommandDoc) -> Result<(), StoreError> {
    let set_info = api!(RedisModule_SetCommandInfo)?;
    let command = crate::ffi::get_command(ctx, doc.name)?;
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
    };
    // Both arrays end with a zeroed terminator, as the API requires.
    let mut key_specs = [key_spec(&doc.keys, doc.key_flags), zeroed_key_spec()];
    let mut keep = Vec::new();
    let args = raw_args(doc.args, &mut keep);
    let mut info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: doc.summary.as_ptr(),
        complexity: doc.complexity.as_ptr(),
        since: doc.since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: doc.arity,
        key_specs: key_specs.as_mut_ptr(),
        args,
    };
    // SAFETY: every pointer in `info` refers to data alive until this call
    // returns (the server copies what it keeps), both arrays are terminated
    // by a zeroed element, and `command` came from GetCommand above.
    let status = unsafe { set_info(command, ptr::addr_of_mut!(info)) };
    crate::ffi::status(status, "setting the command info")
}

/// `SLIDEWIN.CHECK key limit window_ms [COST count] [DETAIL] [WITHMEMBERS]`.
pub const CHECK: CommandDoc = CommandDoc {
    name: c"slidewin.check",
    summary: c"Records a call of `count` units (default 1) and replies 1 if they fit under `limit` in the trailing `window_ms` milliseconds; else replies 0 and records nothing. DETAIL replies [allowed, limit, remaining, retry_after_ms, reset_after_ms].",
    complexity: c"O(log(N) + M*log(N) + C*log(N)) with N the entries in the key, M the expired entries removed and C the count added; DETAIL on a denied call adds O(min(k, N-k)) to find the entry to wait for.",
    since: c"0.1.0",
    arity: -4,
    key_flags: raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_ACCESS
        | raw::REDISMODULE_CMD_KEY_UPDATE,
    keys: Keys::First,
    args: &[KEY, LIMIT, WINDOW, COST, DETAIL, WITHMEMBERS],
};

/// `SLIDEWIN.PEEK key limit window_ms [COST count]`.
pub const PEEK: CommandDoc = CommandDoc {
    name: c"slidewin.peek",
    summary: c"Replies what SLIDEWIN.CHECK ... DETAIL would reply now, [allowed, limit, remaining, retry_after_ms, reset_after_ms], without writing, trimming, replicating or creating anything.",
    complexity: c"O(log(N) + M) with N the entries in the key and M the expired entries not yet removed; a denied call adds O(min(k, N-k)).",
    since: c"0.1.0",
    arity: -4,
    key_flags: raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
    keys: Keys::First,
    args: &[KEY, LIMIT, WINDOW, COST],
};

/// `SLIDEWIN.MCHECK numrules key limit window_ms [...] [COST count] [DETAIL] [WITHMEMBERS]`.
pub const MCHECK: CommandDoc = CommandDoc {
    name: c"slidewin.mcheck",
    summary: c"Judges several sliding-window rules (key limit window_ms) on one clock reading and records `count` units in every key only if every rule allows them; replies 1/0, or with DETAIL [allowed, retry_after_ms, one five-field array per rule].",
    complexity: c"The sum over its keys of SLIDEWIN.CHECK's complexity.",
    since: c"0.1.0",
    arity: -5,
    key_flags: raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_ACCESS
        | raw::REDISMODULE_CMD_KEY_UPDATE,
    keys: Keys::Counted {
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
        DETAIL,
        WITHMEMBERS,
    ],
};

/// `SLIDEWIN.UNDO key member [member ...]`.
pub const UNDO: CommandDoc = CommandDoc {
    name: c"slidewin.undo",
    summary: c"Removes entries a check added (members from WITHMEMBERS), giving the attempt back; replies how many were removed.",
    complexity: c"O(M*log(N)) with M the members given and N the entries in the key.",
    since: c"0.1.0",
    arity: -3,
    key_flags: raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE,
    keys: Keys::First,
    args: &[
        KEY,
        ArgDoc {
            multiple: true,
            ..required(
                c"member",
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            )
        },
    ],
};
