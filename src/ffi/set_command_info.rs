//! `RedisModule_SetCommandInfo`: the server's view of a [`CommandDoc`], the
//! plain data `command_info.rs` describes each command with.
//! The server copies everything it is handed, so the raw structures built
//! here only need to live for the call.

use std::ffi::CStr;
use std::mem::size_of;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context};

use super::base::{api, get_command, status, CallError};

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

/// Where a command's keys are.
pub enum Keys {
    /// No key (SLIDEWIN.TOP).
    None,
    /// One key, at argv[1].
    First,
    /// A count of rules at argv[1], the first key at argv[`first`], then
    /// every `step`-th argument (MCHECK: 2 and 3), options after the last
    /// rule.
    Counted { first: c_int, step: c_int },
}

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
        // `None` never reaches here (a keyless command has no key spec).
        Keys::None | Keys::First => (
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
        Keys::Counted { step, .. } => (
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
        Keys::None => (0, flags),
        Keys::First => (1, flags),
        Keys::Counted { first, .. } => (*first, flags | raw::REDISMODULE_CMD_KEY_INCOMPLETE),
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
pub fn set_command_info(ctx: &Context, doc: &CommandDoc) -> Result<(), CallError> {
    let set_info = api!(RedisModule_SetCommandInfo)?;
    let command = get_command(ctx, doc.name)?;
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
    };
    // Both arrays end with a zeroed terminator, as the API requires.
    let mut key_specs = match doc.keys {
        Keys::None => vec![zeroed_key_spec()],
        _ => vec![key_spec(&doc.keys, doc.key_flags), zeroed_key_spec()],
    };
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
    let set_status = unsafe { set_info(command, ptr::addr_of_mut!(info)) };
    status(set_status, "setting the command info")
}
