//! What a server supports, asked of the server itself (never of its name):
//! one clock for a MULTI or a script, the module API it exports, ACL
//! categories as the module detected them.

use redis::Connection;

use super::{info_field, Server};

impl Server {
    /// through its own commands: two `SET ... PX` around a `DEBUG SLEEP` in
    /// one transaction get the same expiry time only when the server freezes
    /// its command clock for the transaction (the same clock
    /// `RedisModule_CachedMicroseconds` gives the module).
    pub fn clock_frozen_in_multi(&self) -> bool {
        let mut c = self.conn();
        let (a, b) = ("__clock_probe_a", "__clock_probe_b");
        let _: () = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(a)
            .arg(1)
            .arg("PX")
            .arg(600_000)
            .ignore()
            .cmd("DEBUG")
            .arg("SLEEP")
            .arg("0.005")
            .ignore()
            .cmd("SET")
            .arg(b)
            .arg(1)
            .arg("PX")
            .arg(600_000)
            .ignore()
            .query(&mut c)
            .expect("clock probe");
        let at = |c: &mut Connection, k: &str| -> i64 {
            redis::cmd("PEXPIRETIME")
                .arg(k)
                .query(c)
                .expect("PEXPIRETIME")
        };
        let frozen = at(&mut c, a) == at(&mut c, b);
        let _: i64 = redis::cmd("DEL").arg(a).arg(b).query(&mut c).expect("DEL");
        frozen
    }

    /// Whether one clock value holds for a whole script, asked the same way
    /// as [`Server::clock_frozen_in_multi`]: the script busy-waits on `TIME`
    /// (never frozen) between the two `SET ... PX`.
    pub fn clock_frozen_in_script(&self) -> bool {
        let mut c = self.conn();
        let script = r"
            redis.call('SET', KEYS[1], 1, 'PX', 600000)
            local t = redis.call('TIME')
            local start = t[1] * 1000000 + t[2]
            repeat
                t = redis.call('TIME')
            until t[1] * 1000000 + t[2] >= start + 5000
            redis.call('SET', KEYS[2], 1, 'PX', 600000)
            local a = redis.call('PEXPIRETIME', KEYS[1])
            local b = redis.call('PEXPIRETIME', KEYS[2])
            redis.call('DEL', KEYS[1], KEYS[2])
            return a == b and 1 or 0
        ";
        let frozen: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(2)
            .arg("__clock_probe_a")
            .arg("__clock_probe_b")
            .query(&mut c)
            .expect("clock probe");
        frozen == 1
    }

    /// Whether the server binary exports the module API function `name`
    /// (e.g. `SetCommandACLCategories`): the server registers each API under
    /// its name (`RedisModule_…`, on Valkey also `ValkeyModule_…`), so the
    /// name is in the binary exactly where the API exists. A fact about the
    /// server independent of what the module detected.
    pub fn exports_api(&self, name: &str) -> bool {
        let bytes = std::fs::read(self.flavor.binary()).expect("read the server binary");
        let needle = format!("Module_{name}\0");
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    /// Whether the server lets a module give its commands ACL categories, as
    /// the module detected it (`slidewin_acl_categories` in `INFO slidewin`:
    /// the server exports `RedisModule_SetCommandACLCategories`).
    pub fn acl_categories(&self) -> bool {
        let mut c = self.conn();
        match info_field(&mut c, "slidewin", "slidewin_acl_categories").as_deref() {
            Some("1") => true,
            Some("0") => false,
            other => panic!("INFO slidewin has no slidewin_acl_categories: {other:?}"),
        }
    }
}
