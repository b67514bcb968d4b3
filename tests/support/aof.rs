//! Reading a server's append-only file back as commands.

use std::path::Path;

/// The commands of a RESP-encoded AOF, as byte vectors.
pub fn parse_aof(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line(b: &[u8], at: &mut usize) -> Option<Vec<u8>> {
        let end = b[*at..].windows(2).position(|w| w == b"\r\n")? + *at;
        let l = b[*at..end].to_vec();
        *at = end + 2;
        Some(l)
    }
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let Some(head) = line(bytes, &mut at) else {
            break;
        };
        let Some(n) = head.strip_prefix(b"*") else {
            panic!("unexpected AOF line {:?}", String::from_utf8_lossy(&head));
        };
        let n: usize = std::str::from_utf8(n).unwrap().parse().unwrap();
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let len_line = line(bytes, &mut at).expect("bulk length");
            let len: usize = std::str::from_utf8(&len_line[1..])
                .unwrap()
                .parse()
                .unwrap();
            cmd.push(bytes[at..at + len].to_vec());
            at += len + 2;
        }
        out.push(cmd);
    }
    out
}

/// The commands of every incremental AOF file of a server directory (what
/// the server appended since its last rewrite), in order.
pub fn aof_commands(dir: &Path) -> Vec<Vec<Vec<u8>>> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| parse_aof(&std::fs::read(f).expect("read aof")))
        .collect()
}
