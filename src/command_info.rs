//! Command metadata for `COMMAND INFO` / `COMMAND DOCS`: arity, key specs,
//! argument tree, summary and complexity, given to the server with
//! `RedisModule_SetCommandInfo` (Redis 7.0+). The server copies everything it
//! is handed, so the structures here only need to live for the call.

use std::ffi::CStr;
use std::mem::size_of;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context};

use crate::zset::{api, StoreError};

/// One argument of a command, as `COMMAND DOCS` shows it.
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: raw::RedisModuleCommandArgType,
    /// Index into the command's key specs, for key arguments.
    pub key_spec: Option<c_int>,
    /// The keyword that introduces the argument (`COST`, `DETAIL`).
    pub token: Option<&'static CStr>,
    pub optional: bool,
}

const fn required(name: &'static CStr, kind: raw::RedisModuleCommandArgType) -> ArgDoc {
    ArgDoc {
        name,
        kind,
        key_spec: None,
        token: None,
        optional: false,
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

/// Everything the server is told about one command.
pub struct CommandDoc {
    pub name: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    pub since: &'static CStr,
    pub arity: c_int,
    /// Key spec flags (REDISMODULE_CMD_KEY_*) of the single key at argv[1].
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

fn key_spec(flags: u32) -> raw::RedisModuleCommandKeySpec {
    raw::RedisModuleCommandKeySpec {
        notes: ptr::null(),
        flags: u64::from(flags),
        begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
        bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: 1 },
        },
        find_keys_type: raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
        fk: raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            },
        },
    }
}

fn zeroed_key_spec() -> raw::RedisModuleCommandKeySpec {
    let mut spec = key_spec(0);
    spec.begin_search_type = 0;
    spec.find_keys_type = 0;
    spec
}

/// Gives the server the metadata of an already created command.
pub fn set_command_info(ctx: &Context, doc: &CommandDoc) -> Result<(), StoreError> {
    let get_command = api!(RedisModule_GetCommand)?;
    let set_info = api!(RedisModule_SetCommandInfo)?;
    // SAFETY: live load-time context and a NUL-terminated command name.
    let command = unsafe { get_command(ctx.ctx, doc.name.as_ptr()) };
    if command.is_null() {
        return Err(StoreError::Failed("looking up the command"));
    }
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
    };
    // Both arrays end with a zeroed terminator, as the API requires.
    let mut key_specs = [key_spec(doc.key_flags), zeroed_key_spec()];
    let mut args: Vec<raw::RedisModuleCommandArg> = doc
        .args
        .iter()
        .map(|a| raw::RedisModuleCommandArg {
            name: a.name.as_ptr(),
            type_: a.kind,
            key_spec_index: a.key_spec.unwrap_or(-1),
            token: a.token.map_or(ptr::null(), CStr::as_ptr),
            flags: if a.optional {
                raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int
            } else {
                0
            },
            ..zeroed_arg()
        })
        .collect();
    args.push(zeroed_arg());
    let mut info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: doc.summary.as_ptr(),
        complexity: doc.complexity.as_ptr(),
        since: doc.since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: doc.arity,
        key_specs: key_specs.as_mut_ptr(),
        args: args.as_mut_ptr(),
    };
    // SAFETY: every pointer in `info` refers to data alive until this call
    // returns (the server copies what it keeps), both arrays are terminated
    // by a zeroed element, and `command` came from GetCommand above.
    let status = unsafe { set_info(command, ptr::addr_of_mut!(info)) };
    if status == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(StoreError::Failed("setting the command info"))
    }
}

/// `SLIDEWIN.CHECK key limit window_ms [COST count] [DETAIL]`.
pub const CHECK: CommandDoc = CommandDoc {
    name: c"slidewin.check",
    summary: c"Records a call of `count` units (default 1) and replies 1 if they fit under `limit` in the trailing `window_ms` milliseconds; else replies 0 and records nothing. DETAIL replies [allowed, limit, remaining, retry_after_ms, reset_after_ms].",
    complexity: c"O(log(N) + M*log(N) + C*log(N)) with N the entries in the key, M the expired entries removed and C the count added; DETAIL on a denied call adds O(min(k, N-k)) to find the entry to wait for.",
    since: c"0.1.0",
    arity: -4,
    key_flags: raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_ACCESS
        | raw::REDISMODULE_CMD_KEY_UPDATE,
    args: &[KEY, LIMIT, WINDOW, COST, DETAIL],
};

/// `SLIDEWIN.PEEK key limit window_ms [COST count]`.
pub const PEEK: CommandDoc = CommandDoc {
    name: c"slidewin.peek",
    summary: c"Replies what SLIDEWIN.CHECK ... DETAIL would reply now, [allowed, limit, remaining, retry_after_ms, reset_after_ms], without writing, trimming, replicating or creating anything.",
    complexity: c"O(log(N) + M) with N the entries in the key and M the expired entries not yet removed; a denied call adds O(min(k, N-k)).",
    since: c"0.1.0",
    arity: -4,
    key_flags: raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
    args: &[KEY, LIMIT, WINDOW, COST],
};
