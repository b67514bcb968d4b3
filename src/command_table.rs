//! The one command table: every command slidewin declares, with all the
//! server is told about it. Registration, flags, the legacy key triple, ACL
//! categories, COMMAND INFO/DOCS (arity, key specs, arguments) and the
//! `INFO slidewin` counters all derive from [`COMMANDS`]; nothing else lists
//! the commands.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::Context;

use crate::command_info;
use crate::commands;
use crate::counters::Counter;
use crate::ffi::set_command_info::CommandDoc;
use crate::ffi::{self, command_fn, CallError, CommandFn};

/// One command.
pub struct CommandSpec {
    /// Name, arity, key specs, arguments and texts for COMMAND DOCS.
    pub doc: &'static CommandDoc,
    pub handler: CommandFn,
    /// Command flags, as `RedisModule_CreateCommand` takes them.
    pub flags: &'static CStr,
    /// The legacy (first, last, step) key triple; (0, 0, 0) when the command
    /// answers key-position requests itself (`getkeys-api`).
    pub keys: (c_int, c_int, c_int),
    /// ACL categories, set where the server lets modules do so (Redis 7.0
    /// has no API for it). As for Redis's own commands, what is not `fast`
    /// is `slow`.
    pub acl_categories: &'static CStr,
    /// The `INFO slidewin` counters the command moves (besides `errors`,
    /// which every command moves); INFO shows these, in table order.
    pub counters: &'static [Counter],
    /// Registered only with `slidewin.log-type compact` (the effect command
    /// of compact logs).
    pub compact_only: bool,
}

pub const COMMANDS: [CommandSpec; 7] = [
    CommandSpec {
        doc: &command_info::CHECK,
        handler: command_fn!(commands::check),
        flags: c"write deny-oom",
        keys: (1, 1, 1),
        acl_categories: c"write sortedset slow",
        counters: &[
            Counter::ChecksAllowed,
            Counter::ChecksDenied,
            Counter::CostGranted,
            Counter::Repeated,
            Counter::ShadowRefused,
        ],
        compact_only: false,
    },
    CommandSpec {
        // Not `fast`: PEEK steps over the expired entries a CHECK would have
        // trimmed, O(M) in them (like ZRANGEBYSCORE, which is @slow too).
        doc: &command_info::PEEK,
        handler: command_fn!(commands::peek),
        flags: c"readonly",
        keys: (1, 1, 1),
        acl_categories: c"read sortedset slow",
        counters: &[Counter::Peeks],
        compact_only: false,
    },
    CommandSpec {
        // MCHECK's keys (every third argument after numrules) are reported by
        // the command itself and declared by its key spec.
        doc: &command_info::MCHECK,
        handler: command_fn!(commands::mcheck),
        flags: c"write deny-oom getkeys-api",
        keys: (0, 0, 0),
        acl_categories: c"write sortedset slow",
        counters: &[
            Counter::ChecksAllowed,
            Counter::ChecksDenied,
            Counter::CostGranted,
            Counter::Repeated,
            Counter::ShadowRefused,
        ],
        compact_only: false,
    },
    CommandSpec {
        doc: &command_info::UNDO,
        handler: command_fn!(commands::undo),
        flags: c"write fast",
        keys: (1, 1, 1),
        acl_categories: c"write sortedset fast",
        counters: &[Counter::Undone],
        compact_only: false,
    },
    CommandSpec {
        // Not `fast`: it adds or removes as many entries as the units change.
        doc: &command_info::SETTLE,
        handler: command_fn!(commands::settle),
        flags: c"write deny-oom",
        keys: (1, 1, 1),
        acl_categories: c"write sortedset slow",
        counters: &[Counter::Settled],
        compact_only: false,
    },
    CommandSpec {
        // Keyless; it reveals key names from the whole keyspace, so it is
        // an admin command (which makes it @admin and @dangerous) and slow.
        doc: &command_info::TOP,
        handler: command_fn!(commands::top),
        flags: c"admin",
        keys: (0, 0, 0),
        acl_categories: c"admin dangerous slow",
        counters: &[],
        compact_only: false,
    },
    CommandSpec {
        // Only what replication, the AOF and restoring clients send: it
        // decides nothing, so it moves no counter. @sortedset like the
        // others: ACL rules written for them cover it.
        doc: &command_info::APPLY,
        handler: command_fn!(commands::apply),
        flags: c"write deny-oom",
        keys: (1, 1, 1),
        acl_categories: c"write sortedset slow",
        counters: &[],
        compact_only: true,
    },
];

/// Test-only commands of the fault-injection build (see Cargo.toml).
#[cfg(feature = "fault-injection")]
pub const FAULT_COMMANDS: [CommandSpec; 1] = [CommandSpec {
    doc: &command_info::DEBUG_PANIC,
    handler: command_fn!(commands::debug_panic),
    flags: c"readonly",
    keys: (1, 1, 1),
    acl_categories: c"read sortedset slow",
    counters: &[],
    compact_only: false,
}];
#[cfg(not(feature = "fault-injection"))]
pub const FAULT_COMMANDS: [CommandSpec; 0] = [];

/// Creates every command with its flags, ACL categories and COMMAND DOCS
/// metadata. MCHECK's keys are only known to the server through its key
/// spec and its key-position answer, so any failure refuses the load.
pub fn register(ctx: &Context, compact: bool) -> Result<(), String> {
    for c in COMMANDS.iter().chain(&FAULT_COMMANDS) {
        if c.compact_only && !compact {
            continue;
        }
        let name = c.doc.name;
        let fail = |what: &str, e: CallError| format!("{what} {}: {e}", name.to_string_lossy());
        ffi::create_command(ctx, name, c.handler, c.flags, c.keys)
            .map_err(|e| fail("cannot create", e))?;
        ffi::set_acl_categories(ctx, name, c.acl_categories)
            .map_err(|e| fail("cannot set the ACL categories of", e))?;
        ffi::set_command_info::set_command_info(ctx, c.doc)
            .map_err(|e| fail("cannot set the command info of", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::set_command_info::{ArgDoc, Keys};

    #[test]
    fn every_command_is_declared_once_with_docs_and_keys() {
        let names: Vec<&CStr> = COMMANDS.iter().map(|c| c.doc.name).collect();
        assert_eq!(
            names,
            [
                c"slidewin.check",
                c"slidewin.peek",
                c"slidewin.mcheck",
                c"slidewin.undo",
                c"slidewin.settle",
                c"slidewin.top",
                c"slidewin.apply"
            ]
        );
        for c in COMMANDS.iter().chain(&FAULT_COMMANDS) {
            let name = c.doc.name.to_string_lossy();
            assert!(!c.doc.summary.is_empty(), "{name}: summary");
            assert!(!c.doc.complexity.is_empty(), "{name}: complexity");
            assert!(!c.doc.args.is_empty(), "{name}: arguments");
            let flags = c.flags.to_string_lossy();
            let cats = c.acl_categories.to_string_lossy();
            let has = |f: &str| flags.split(' ').any(|x| x == f);
            // The legacy key triple agrees with the key spec.
            match c.doc.keys {
                Keys::None => {
                    assert_eq!(c.keys, (0, 0, 0), "{name}");
                    assert_eq!(c.doc.arity, -1, "{name}: any arguments");
                    // Keyless: an admin command, and its categories say so.
                    assert!(has("admin"), "{name}: {flags}");
                    assert!(cats.starts_with("admin dangerous "), "{name}: {cats}");
                }
                Keys::First => assert_eq!(c.keys, (1, 1, 1), "{name}"),
                Keys::Counted { .. } => {
                    assert_eq!(c.keys, (0, 0, 0), "{name}");
                    assert!(has("getkeys-api"), "{name}: {flags}");
                }
            }
            if !matches!(c.doc.keys, Keys::None) {
                // At least the name and a key: variadic (negative) or fixed.
                assert!(
                    c.doc.arity <= -3 || c.doc.arity >= 2,
                    "{name}: arity {}",
                    c.doc.arity
                );
                // Read or write, and the matching category.
                let writes = has("write");
                assert_eq!(writes, !has("readonly"), "{name}");
                assert!(
                    cats.starts_with(if writes { "write " } else { "read " }),
                    "{name}: {cats}"
                );
            }
            // fast commands are @fast, the others @slow.
            let fast = has("fast");
            assert!(
                cats.ends_with(if fast { " fast" } else { " slow" }),
                "{name}: {cats}"
            );
        }
    }
    /// A command's syntax as COMMAND DOCS gives it, from its arguments:
    /// `[x]` optional, `x [x ...]` repeated, `[x]...` optional and repeated,
    /// `a | b` one of (`<a | b>` when required), a block's parts in order.
    fn syntax(args: &[ArgDoc]) -> String {
        args.iter().map(arg_syntax).collect::<Vec<_>>().join(" ")
    }

    fn arg_syntax(a: &ArgDoc) -> String {
        use redis_module::raw::{
            RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK as BLOCK,
            RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF as ONEOF,
            RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN as PURE_TOKEN,
        };
        let name = a.name.to_string_lossy().into_owned();
        let token = a.token.map(|t| t.to_string_lossy().into_owned());
        let with_token = |v: String| match &token {
            Some(t) => format!("{t} {v}"),
            None => v,
        };
        let body = match a.kind {
            PURE_TOKEN => token.clone().unwrap_or(name),
            BLOCK => with_token(syntax(a.subargs)),
            ONEOF => {
                let alternatives: Vec<String> = a.subargs.iter().map(arg_syntax).collect();
                let alternatives = alternatives.join(" | ");
                if a.optional {
                    alternatives
                } else {
                    format!("<{alternatives}>")
                }
            }
            _ => with_token(name),
        };
        match (a.optional, a.multiple) {
            (true, true) => format!("[{body}]..."),
            (true, false) => format!("[{body}]"),
            (false, true) => format!("{body} [{body} ...]"),
            (false, false) => body,
        }
    }

    /// The syntax lines of the handlers' doc comments in `commands.rs`
    /// (the backquoted `SLIDEWIN.<NAME> ...` opening a `///` block, over
    /// one or more lines), as (command name in lower case, syntax).
    fn documented_syntax(source: &str) -> Vec<(String, String)> {
        let mut found = Vec::new();
        let mut lines = source.lines().map(str::trim_start).peekable();
        while let Some(line) = lines.next() {
            let Some(rest) = line.strip_prefix("/// `SLIDEWIN.") else {
                continue;
            };
            let mut text = format!("SLIDEWIN.{rest}");
            while text.matches('`').count() == 0 {
                match lines.next_if(|l| l.starts_with("///")) {
                    Some(more) => {
                        text.push(' ');
                        text.push_str(more.trim_start_matches("///").trim());
                    }
                    None => break,
                }
            }
            let syntax = text.split('`').next().unwrap_or_default();
            let syntax = syntax.split_whitespace().collect::<Vec<_>>().join(" ");
            let name = syntax.split(' ').next().unwrap_or_default().to_lowercase();
            found.push((name, syntax));
        }
        found
    }

    /// Each command's doc comment in `commands.rs` opens with its syntax,
    /// which must be the one the command table gives COMMAND DOCS: a new
    /// argument in the table without it in the comment (or the reverse)
    /// fails here.
    #[test]
    fn the_handlers_doc_comments_give_the_table_s_syntax() {
        let documented = documented_syntax(include_str!("commands.rs"));
        for c in COMMANDS.iter().chain(&FAULT_COMMANDS) {
            let name = c.doc.name.to_string_lossy();
            let want = format!("{} {}", name.to_uppercase(), syntax(c.doc.args));
            let got: Vec<&String> = documented
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, s)| s)
                .collect();
            assert_eq!(got, [&want], "the doc comment of {name} in commands.rs");
        }
        for (name, _) in &documented {
            let known = COMMANDS
                .iter()
                .chain(&FAULT_COMMANDS)
                .any(|c| c.doc.name.to_string_lossy() == name.as_str());
            // DEBUG-PANIC is in the table of the fault-injection build only.
            let fault_only = name == "slidewin.debug-panic" && FAULT_COMMANDS.is_empty();
            assert!(
                known || fault_only,
                "commands.rs documents {name}, which the table lacks"
            );
        }
    }
}
