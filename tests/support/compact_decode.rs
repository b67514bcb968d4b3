//! The suite's own decoder of the compact log's DUMP payload (not the
//! module's), so that tests read a compact log's entries as they read a
//! sorted set's.

use redis::Connection;

/// The entries of a compact log (`log-type compact`), read from its DUMP
/// payload by a decoder of this test suite's own (not the module's): the
/// RDB module value is the type byte, the module id, one string (the log's
/// encoding, see `src/store/compact/codec.rs`) and an end marker. String compression
/// is turned off first, so that the string is stored as it is.
pub(super) fn compact_entries(c: &mut Connection, key: &[u8]) -> Vec<(Vec<u8>, f64)> {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdbcompression")
        .arg("no")
        .query(c)
        .expect("CONFIG SET rdbcompression");
    let p: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).expect("DUMP");
    assert_eq!(p[0], 7, "RDB_TYPE_MODULE_2");
    assert_eq!(p[1], 0x81, "a 64-bit module id");
    assert_eq!(p[10], 5, "RDB_MODULE_OPCODE_STRING");
    let (len, at) = match p[11] >> 6 {
        0 => (usize::from(p[11] & 0x3F), 12),
        1 => ((usize::from(p[11] & 0x3F) << 8) | usize::from(p[12]), 13),
        _ => {
            assert_eq!(p[11], 0x80, "a 32-bit length");
            let n = u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
            (n as usize, 16)
        }
    };
    let log = &p[at..at + len];
    let mut r = 0usize;
    let varint = |r: &mut usize| -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = log[*r];
            *r += 1;
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    };
    let unzigzag = |v: u64| ((v >> 1) as i64) ^ -((v & 1) as i64);
    // Version 2 (a key holding charges made with an ID) adds the charge
    // records after the runs (read over below).
    assert!(log[0] == 1 || log[0] == 2, "encoding version 1 or 2");
    r += 1;
    r += 1;
    if log[1] == 1 {
        varint(&mut r);
    }
    let runs = varint(&mut r);
    let mut out = Vec::new();
    if runs == 0 {
        return out;
    }
    let mut score = unzigzag(varint(&mut r));
    let mut expected = 1i64;
    for _ in 0..runs {
        let tag = log[r];
        r += 1;
        let (gap, first, count) = match tag {
            0x00..=0x7F => (u64::from(tag), expected, 1u64),
            0x80..=0xBF => {
                let low = log[r];
                r += 1;
                ((u64::from(tag & 0x3F) << 8) | u64::from(low), expected, 1)
            }
            _ => {
                let gap = varint(&mut r);
                let first = expected + unzigzag(varint(&mut r));
                (gap, first, varint(&mut r) + 1)
            }
        };
        score += gap as i64;
        for i in 0..count as i64 {
            out.push(((first + i).to_string().into_bytes(), score as f64));
        }
        expected = (first + count as i64 - 1).saturating_add(1);
    }
    if log[0] == 2 {
        // Records: a request id (length, bytes), a score, runs of ids.
        for _ in 0..varint(&mut r) {
            let len = varint(&mut r) as usize;
            r += len;
            varint(&mut r);
            for _ in 0..varint(&mut r) {
                varint(&mut r);
                varint(&mut r);
            }
        }
    }
    assert_eq!(r, log.len(), "the whole encoding read");
    // In the server's order: score, then member bytes.
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    out
}
