//! Keyspace notifications, read up to a marker write.

use std::time::Duration;

use redis::{Connection, Value};

use super::Server;

/// Keyspace notifications seen by a subscriber, read up to a marker write
/// instead of until a read timeout: [`KeyEvents::drain`] writes the marker
/// key, so every event fired before it has arrived once the marker's has.
pub struct KeyEvents {
    sub: Connection,
}

impl KeyEvents {
    const MARKER: &'static str = "__events_marker__";

    /// Turns on every keyspace and keyevent notification (`KEA`) and
    /// subscribes to both channels of database 0.
    pub fn subscribe(server: &Server) -> KeyEvents {
        let mut c = server.conn();
        let _: () = redis::cmd("CONFIG")
            .arg(&["SET", "notify-keyspace-events", "KEA"])
            .query(&mut c)
            .expect("CONFIG SET notify-keyspace-events");
        let mut sub = server.conn();
        sub.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        // Raw commands and replies: redis-rs's PubSub unsubscribes when it is
        // dropped, and this subscription must last over several drains.
        sub.send_packed_command(
            &redis::cmd("PSUBSCRIBE")
                .arg("__keyevent@0__:*")
                .arg("__keyspace@0__:*")
                .get_packed_command(),
        )
        .expect("PSUBSCRIBE");
        for _ in 0..2 {
            let confirmed = sub.recv_response().expect("PSUBSCRIBE confirmed");
            assert!(
                matches!(&confirmed, Value::Array(v) if v.first() == Some(&Value::BulkString(b"psubscribe".to_vec()))),
                "{confirmed:?}"
            );
        }
        KeyEvents { sub }
    }

    /// The events fired since the last drain, as (channel, message) pairs in
    /// order, without the marker's. `c` must be a connection to the same
    /// server; every read has a 20 s deadline.
    pub fn drain(&mut self, c: &mut Connection) -> Vec<(String, String)> {
        let _: () = redis::cmd("SET")
            .arg(Self::MARKER)
            .arg(1)
            .query(c)
            .expect("SET marker");
        let text = |v: &Value| -> String {
            match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("not a string: {other:?}"),
            }
        };
        let mut events = Vec::new();
        loop {
            let msg = self
                .sub
                .recv_response()
                .expect("an event before the deadline");
            let Value::Array(items) = &msg else {
                panic!("not a message: {msg:?}")
            };
            assert_eq!(items.len(), 4, "a pmessage: {msg:?}");
            let (channel, payload) = (text(&items[2]), text(&items[3]));
            // The server publishes the keyspace message of an event, then
            // the keyevent one: the marker's keyevent message comes last.
            if channel == "__keyevent@0__:set" && payload == Self::MARKER {
                return events;
            }
            if channel != format!("__keyspace@0__:{}", Self::MARKER) {
                events.push((channel, payload));
            }
        }
    }
}
