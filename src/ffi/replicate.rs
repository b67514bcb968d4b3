//! Replication: the typed builder [`Propagate`] (any command, argument by
//! argument), [`replicate_words`] (a command of up to [`MAX_WORDS`]
//! [`Word`]s from the stack, with the keyword and integer strings it keeps
//! for the life of the process) and [`replicate_verbatim`].

use std::ffi::CStr;
use std::marker::PhantomData;

use redis_module::{raw, Context};

use super::base::{api, status, CallError};
use super::string::{ModuleString, RawString};

/// One command to propagate to replicas and the AOF, built argument by
/// argument, so no format string is ever matched to its arguments by hand:
///
/// ```text
/// Propagate::new(ctx, c"ZADD").key(name).int(now)?.string(&member).send()
/// ```
///
/// Borrowed strings must live as long as the builder (`'a`); integers and
/// words are turned into strings the builder owns and frees after sending.
pub struct Propagate<'a> {
    ctx: &'a Context,
    command: &'static CStr,
    argv: Argv,
    /// Strings the builder made; at most two in every command slidewin
    /// propagates, so they live inline (no allocation on the hot path).
    owned: [Option<ModuleString<'a>>; 2],
    more_owned: Vec<ModuleString<'a>>,
    _borrowed: PhantomData<&'a ()>,
}

/// The argument pointers: inline up to `INLINE`, on the heap beyond (COST n
/// with a large n).
struct Argv {
    inline: [*mut raw::RedisModuleString; Argv::INLINE],
    len: usize,
    heap: Vec<*mut raw::RedisModuleString>,
}

impl Argv {
    const INLINE: usize = 8;

    fn push(&mut self, p: *mut raw::RedisModuleString) {
        if self.heap.is_empty() && self.len < Self::INLINE {
            if let Some(slot) = self.inline.get_mut(self.len) {
                *slot = p;
                self.len += 1;
                return;
            }
        }
        if self.heap.is_empty() {
            self.heap.extend(self.inline.iter().take(self.len).copied());
        }
        self.heap.push(p);
    }

    /// The pointers, contiguous.
    fn as_mut_slice(&mut self) -> &mut [*mut raw::RedisModuleString] {
        if self.heap.is_empty() {
            self.inline.get_mut(..self.len).unwrap_or(&mut [])
        } else {
            &mut self.heap
        }
    }
}

impl<'a> Propagate<'a> {
    pub fn new(ctx: &'a Context, command: &'static CStr) -> Self {
        Propagate {
            ctx,
            command,
            argv: Argv {
                inline: [std::ptr::null_mut(); Argv::INLINE],
                len: 0,
                heap: Vec::new(),
            },
            owned: [None, None],
            more_owned: Vec::new(),
            _borrowed: PhantomData,
        }
    }

    /// A key name (any live string).
    pub fn key(self, key: &'a impl RawString) -> Self {
        self.string(key)
    }

    /// A live string, as it is.
    pub fn string(mut self, s: &'a impl RawString) -> Self {
        self.argv.push(s.raw());
        self
    }

    /// Live strings, as they are.
    pub fn strings<S: RawString + 'a>(mut self, ss: impl IntoIterator<Item = &'a S>) -> Self {
        for s in ss {
            self.argv.push(s.raw());
        }
        self
    }

    /// A string the builder made: pushed, and kept alive until after send.
    fn own(mut self, s: ModuleString<'a>) -> Self {
        self.argv.push(s.as_ptr());
        match self.owned.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(s),
            None => self.more_owned.push(s),
        }
        self
    }

    /// An integer, in decimal.
    pub fn int(self, v: i64) -> Result<Self, CallError> {
        let s = ModuleString::from_i64(self.ctx, v)?;
        Ok(self.own(s))
    }

    /// A fixed word such as `-inf`.
    pub fn word(self, w: &'static CStr) -> Result<Self, CallError> {
        let s = ModuleString::from_bytes(self.ctx, w.to_bytes())?;
        Ok(self.own(s))
    }

    /// Propagates the command (wrapped with the call's other effects in
    /// MULTI/EXEC by the server).
    pub fn send(mut self) -> Result<(), CallError> {
        let replicate = api!(RedisModule_Replicate)?;
        let argv = self.argv.as_mut_slice();
        // SAFETY: the live command context; "v" is followed by a pointer to
        // `argv.len()` contiguous strings and that length. Every pointer is a
        // live string: borrowed for `'a` or owned by `self`, both alive until
        // after this call; the server takes its own references.
        status(
            unsafe {
                replicate(
                    self.ctx.ctx,
                    self.command.as_ptr(),
                    c"v".as_ptr(),
                    argv.as_mut_ptr(),
                    argv.len(),
                )
            },
            "replicating",
        )
    }
}

/// A word of a command propagated by [`replicate_words`]; a compact log's
/// effect writes its words as these (`Effect::words`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word<'a> {
    /// An integer seldom sent twice: formatted on the stack each time,
    /// unless it is small (below 1,024: a kept string, made once).
    Int(i64),
    /// An integer that calls close in time repeat (a time, a count): sent
    /// as a kept server string when one holds it.
    Repeated(i64),
    Text(&'static CStr),
    /// Bytes (a request id: any bytes, NUL included): a server string made
    /// for the call and released after it.
    Bytes(&'a [u8]),
}

/// The most words [`replicate_words`] takes.
pub const MAX_WORDS: usize = 12;

/// The two-digit decimal forms of 0 to 99, back to back.
const PAIRS: &[u8; 200] = b"00010203040506070809\
10111213141516171819\
20212223242526272829\
30313233343536373839\
40414243444546474849\
50515253545556575859\
60616263646566676869\
70717273747576777879\
80818283848586878889\
90919293949596979899";

/// Writes `v` in decimal at the end of `buf`, NUL-terminated (20 digits
/// and a sign at most: 22 bytes of the 24), two digits a step; returns
/// where the text starts.
fn decimal(v: i64, buf: &mut [u8; 24]) -> usize {
    let mut at = buf.len() - 1;
    buf[at] = 0;
    let mut m = v.unsigned_abs();
    let mut put = |at: &mut usize, pair: u64| {
        // `pair` < 100 and `at` >= 3 here (at most 10 pairs from 23), so
        // both lookups always succeed.
        let p = (pair as usize) * 2;
        *at -= 2;
        if let (Some(to), Some(from)) = (buf.get_mut(*at..*at + 2), PAIRS.get(p..p + 2)) {
            to.copy_from_slice(from);
        }
    };
    while m >= 100 {
        put(&mut at, m % 100);
        m /= 100;
    }
    if m >= 10 {
        put(&mut at, m);
    } else {
        at -= 1;
        buf[at] = b'0' + m as u8;
    }
    if v < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    at
}

thread_local! {
    /// The server strings of the keywords [`replicate_words`] has sent,
    /// made once (with no context: never freed by auto memory) and kept:
    /// the server takes a reference to such a string rather than copying
    /// a C string into a new one each call. Commands run on one thread.
    static KEYWORDS: std::cell::RefCell<Vec<(*const std::os::raw::c_char, *mut raw::RedisModuleString)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The kept server string of keyword `text` (made on first use).
fn keyword(text: &'static CStr) -> Option<*mut raw::RedisModuleString> {
    KEYWORDS
        .try_with(|k| {
            let mut k = k.try_borrow_mut().ok()?;
            if let Some(&(_, s)) = k.iter().find(|(p, _)| *p == text.as_ptr()) {
                return Some(s);
            }
            let create = api!(RedisModule_CreateString).ok()?;
            let bytes = text.to_bytes();
            // SAFETY: a NULL context is allowed (the string is then owned by
            // the caller, here for the life of the process); `bytes` is live
            // for the call and the server copies it.
            let s = unsafe { create(std::ptr::null_mut(), bytes.as_ptr().cast(), bytes.len()) };
            if s.is_null() {
                return None;
            }
            k.push((text.as_ptr(), s));
            Some(s)
        })
        .ok()
        .flatten()
}

/// How many integer strings [`replicate_words`] keeps.
const KEPT_INTS: usize = 8;

/// A kept server string of an integer; `string` null: an empty slot.
#[derive(Clone, Copy)]
struct KeptInt {
    value: i64,
    string: *mut raw::RedisModuleString,
    /// When it was last sent (a count of lookups), for replacing the
    /// least recently sent.
    used: u64,
}

struct KeptInts {
    slots: [KeptInt; KEPT_INTS],
    clock: u64,
}

thread_local! {
    /// The server strings of the last few repeated integers sent (the
    /// call's time, its expiry, a count), made with no context and kept,
    /// as the keywords are: calls in the same millisecond send the same
    /// ones, and the server takes a reference to a kept string where it
    /// would make (and later free) a new one from a C string.
    static KEPT: std::cell::RefCell<KeptInts> = const {
        std::cell::RefCell::new(KeptInts {
            slots: [KeptInt { value: 0, string: std::ptr::null_mut(), used: 0 }; KEPT_INTS],
            clock: 0,
        })
    };
}

/// The kept server string of `v`, found or made from its decimal `text`;
/// a string it replaces goes to `evicted`, for the caller to free after
/// the call that may still send it. `None`: not kept (then sent as text).
fn kept_int(
    v: i64,
    text: impl FnOnce() -> Option<(*const std::os::raw::c_char, usize)>,
    evicted: &mut *mut raw::RedisModuleString,
) -> Option<*mut raw::RedisModuleString> {
    KEPT.try_with(|k| {
        let mut k = k.try_borrow_mut().ok()?;
        k.clock = k.clock.wrapping_add(1);
        let now = k.clock;
        if let Some(slot) = k
            .slots
            .iter_mut()
            .find(|s| !s.string.is_null() && s.value == v)
        {
            slot.used = now;
            return Some(slot.string);
        }
        let create = api!(RedisModule_CreateString).ok()?;
        let (ptr, len) = text()?;
        // SAFETY: a NULL context is allowed (the string is then owned by the
        // caller, here until it is replaced); `ptr` holds `len` readable
        // bytes for the call and the server copies them.
        let s = unsafe { create(std::ptr::null_mut(), ptr, len) };
        if s.is_null() {
            return None;
        }
        let slot = k.slots.iter_mut().min_by_key(|s| s.used)?;
        *evicted = slot.string;
        *slot = KeptInt {
            value: v,
            string: s,
            used: now,
        };
        Some(s)
    })
    .ok()
    .flatten()
}

/// Integers below this are sent as strings made once and kept for the
/// life of the process ([`small_int`]), as the server keeps its shared
/// integers: member ids count up from 1 in every key and a call's count
/// is mostly 1, so these repeat across keys, where the few slots of
/// [`kept_int`] would keep replacing one another.
const SMALL_INTS: usize = 1024;

thread_local! {
    /// The server strings of the integers `0..SMALL_INTS` sent so far
    /// (null: not made yet), made with no context and never freed: at
    /// most `SMALL_INTS` strings of a few bytes each.
    static SMALL: std::cell::RefCell<[*mut raw::RedisModuleString; SMALL_INTS]> =
        const { std::cell::RefCell::new([std::ptr::null_mut(); SMALL_INTS]) };
}

/// The kept server string of `v` when `0 <= v < SMALL_INTS`, made on first
/// use; `None` for any other value (or when the server cannot make one).
fn small_int(v: i64) -> Option<*mut raw::RedisModuleString> {
    let i = usize::try_from(v).ok().filter(|&i| i < SMALL_INTS)?;
    SMALL
        .try_with(|t| {
            let mut t = t.try_borrow_mut().ok()?;
            let slot = t.get_mut(i)?;
            if slot.is_null() {
                let create = api!(RedisModule_CreateString).ok()?;
                let mut buf = [0u8; 24];
                let start = decimal(v, &mut buf);
                let digits = buf.get(start..buf.len() - 1)?;
                // SAFETY: a NULL context is allowed (the string is then
                // owned by the caller, here for the life of the process);
                // `digits` is live for the call and the server copies it.
                let s =
                    unsafe { create(std::ptr::null_mut(), digits.as_ptr().cast(), digits.len()) };
                if s.is_null() {
                    return None;
                }
                *slot = s;
            }
            Some(*slot)
        })
        .ok()
        .flatten()
}

/// Drops the module's reference to strings [`kept_int`] replaced.
fn free_evicted(evicted: &[*mut raw::RedisModuleString]) {
    let Ok(free) = api!(RedisModule_FreeString) else {
        return;
    };
    for &s in evicted.iter().filter(|s| !s.is_null()) {
        // SAFETY: `s` was made with no context by `kept_int` and is no
        // longer in its table: this is the one release of the module's
        // reference (the server holds its own, if it still needs it).
        unsafe { free(std::ptr::null_mut(), s) };
    }
}

/// Propagates `command key word...` (at most [`MAX_WORDS`] words) with one
/// `RedisModule_Replicate` and no string objects of the module's but the
/// kept keywords and integers: a keyword goes as its kept server string
/// (format `s`: the server takes a reference), so does a small integer, a
/// repeated integer as its kept string when one is kept or can be made,
/// any other integer as a C string from the stack (format `c`: the server
/// makes its one object).
/// More words: `Failed`.
pub fn replicate_words(
    ctx: &Context,
    command: &CStr,
    key: &impl RawString,
    words: &[Word<'_>],
) -> Result<(), CallError> {
    let replicate = api!(RedisModule_Replicate)?;
    if words.len() > MAX_WORDS {
        return Err(CallError::Failed("replicating (too many words)"));
    }
    // "s" for the key, one letter a word, NUL.
    let mut fmt = [0u8; MAX_WORDS + 2];
    fmt[0] = b's';
    let mut bufs = [[0u8; 24]; MAX_WORDS];
    let mut p = [std::ptr::null::<std::os::raw::c_char>(); MAX_WORDS];
    let mut evicted = [std::ptr::null_mut::<raw::RedisModuleString>(); MAX_WORDS];
    for (i, w) in words.iter().enumerate() {
        let (Some(letter), Some(slot), Some(buf), Some(old)) = (
            fmt.get_mut(i + 1),
            p.get_mut(i),
            bufs.get_mut(i),
            evicted.get_mut(i),
        ) else {
            return Err(CallError::Failed("replicating (too many words)"));
        };
        (*letter, *slot) = match *w {
            Word::Text(t) => match keyword(t) {
                Some(s) => (b's', s.cast_const().cast()),
                None => (b'c', t.as_ptr()),
            },
            Word::Bytes(b) => {
                let Ok(create) = api!(RedisModule_CreateString) else {
                    free_evicted(&evicted);
                    return Err(CallError::Failed("replicating (no CreateString)"));
                };
                // SAFETY: a NULL context is allowed (the string is then
                // owned by the caller: released after the call below, as
                // an evicted one is); `b` is live for the call and the
                // server copies it.
                let s = unsafe { create(std::ptr::null_mut(), b.as_ptr().cast(), b.len()) };
                if s.is_null() {
                    free_evicted(&evicted);
                    return Err(CallError::Failed("replicating (no string)"));
                }
                *old = s;
                (b's', s.cast_const().cast())
            }
            Word::Int(v) | Word::Repeated(v) => {
                let text = || {
                    let start = decimal(v, buf);
                    let digits = buf.get(start..buf.len() - 1)?;
                    Some((digits.as_ptr().cast(), digits.len()))
                };
                let kept = match small_int(v) {
                    Some(s) => Some(s),
                    None if matches!(*w, Word::Repeated(_)) => kept_int(v, text, old),
                    None => None,
                };
                match kept {
                    Some(s) => (b's', s.cast_const().cast()),
                    None => {
                        let start = decimal(v, buf);
                        (b'c', buf.get(start..).unwrap_or(&[0]).as_ptr().cast())
                    }
                }
            }
        };
    }
    let fmt = fmt.as_ptr().cast::<std::os::raw::c_char>();
    let key = key.raw();
    // One call per arity (a C variadic call needs its arguments spelled
    // out): the key, then the first `n` word pointers.
    macro_rules! replicate_with {
        ($($i:literal)*) => {
            replicate(ctx.ctx, command.as_ptr(), fmt, key $(, p[$i])*)
        };
    }
    // SAFETY: the live command context; `fmt` is "s" then one letter per
    // word, NUL-terminated, and exactly that many arguments follow it: the
    // key (a live string), then per word a pointer: for `s` a kept server
    // string (a keyword or a small integer, live for the process, or
    // another integer, whose reference is released only after this call,
    // even when it was replaced meanwhile: `evicted`), for `c` a
    // NUL-terminated C string (static words, or `bufs`, alive until after
    // the call). Both are read as pointers (`void *`, `char *`), which a
    // `char` pointer may be passed as. The server copies the C strings and
    // references the others.
    let replicated = unsafe {
        #[rustfmt::skip]
        let r = match words.len() {
            0 => replicate_with!(),
            1 => replicate_with!(0),
            2 => replicate_with!(0 1),
            3 => replicate_with!(0 1 2),
            4 => replicate_with!(0 1 2 3),
            5 => replicate_with!(0 1 2 3 4),
            6 => replicate_with!(0 1 2 3 4 5),
            7 => replicate_with!(0 1 2 3 4 5 6),
            8 => replicate_with!(0 1 2 3 4 5 6 7),
            9 => replicate_with!(0 1 2 3 4 5 6 7 8),
            10 => replicate_with!(0 1 2 3 4 5 6 7 8 9),
            11 => replicate_with!(0 1 2 3 4 5 6 7 8 9 10),
            12 => replicate_with!(0 1 2 3 4 5 6 7 8 9 10 11),
            _ => return Err(CallError::Failed("replicating (too many words)")),
        };
        r
    };
    // The server holds its own references to what it keeps.
    free_evicted(&evicted);
    status(replicated, "replicating")
}

/// Propagates the running command as it came (`RedisModule_ReplicateVerbatim`).
pub fn replicate_verbatim(ctx: &Context) -> Result<(), CallError> {
    let verbatim = api!(RedisModule_ReplicateVerbatim)?;
    // SAFETY: the live command context.
    status(unsafe { verbatim(ctx.ctx) }, "replicating")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_nul_terminated() {
        for v in [
            0i64,
            7,
            -7,
            9,
            10,
            99,
            100,
            101,
            -100,
            999,
            1000,
            1_796_000_000_000,
            i64::MAX,
            i64::MIN,
            -1,
        ] {
            let mut buf = [0xAAu8; 24];
            let start = decimal(v, &mut buf);
            let text = CStr::from_bytes_until_nul(&buf[start..]).expect("a NUL");
            assert_eq!(text.to_str().expect("ASCII"), v.to_string());
        }
    }

    #[test]
    fn argv_stays_in_order_inline_and_beyond() {
        for n in [0usize, 1, 7, 8, 9, 20] {
            let mut argv = Argv {
                inline: [std::ptr::null_mut(); Argv::INLINE],
                len: 0,
                heap: Vec::new(),
            };
            // Distinct fake addresses, never dereferenced.
            let want: Vec<*mut raw::RedisModuleString> = (1..=n)
                .map(|i| (i * 8) as *mut raw::RedisModuleString)
                .collect();
            for &p in &want {
                argv.push(p);
            }
            assert_eq!(argv.as_mut_slice(), &want[..], "{n} arguments");
            assert_eq!(argv.heap.is_empty(), n <= Argv::INLINE, "{n} arguments");
        }
    }
}
