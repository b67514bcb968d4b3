//! A panic inside a command, on every server of the suite, with the
//! fault-injection build of the module (`make fault-module`): the client
//! gets an error reply, the server keeps running with its data, and the
//! panic's message and place reach the server log as text (its `%`
//! conversions are not read as a format).
#![allow(clippy::unwrap_used)]

mod support;

use support::*;

on_every_server! {
    a_panic_is_answered_logged_and_survived => panic_is_caught;
}

fn panic_is_caught(flavor: Flavor) {
    let server = Options::new(flavor)
        .module_file(fault_module_path())
        .start();
    let mut c = server.conn();
    assert_eq!(check(&mut c, "before", 5, 60_000), 1);
    let err = redis::cmd("SLIDEWIN.DEBUG-PANIC")
        .arg("victim")
        .query::<redis::Value>(&mut c)
        .expect_err("the panic must become an error reply");
    assert_eq!(
        error_text(&err),
        "ERR slidewin internal error (a bug; see the server log)"
    );
    // The server is alive, with its data, and the module still answers.
    assert_eq!(zcard(&mut c, "before"), 1);
    assert_eq!(check(&mut c, "before", 5, 60_000), 1);
    assert_eq!(
        info_field(&mut c, "slidewin", "slidewin_errors").as_deref(),
        Some("1")
    );
    let logged = wait_until(std::time::Duration::from_secs(5), || {
        server.log().contains("fault injection on victim: %s%s%n")
    });
    let log = server.log();
    assert!(logged, "the panic message is not in the server log:\n{log}");
    let line = log
        .lines()
        .find(|l| l.contains("fault injection on victim"))
        .unwrap_or_default();
    assert!(
        line.contains(
            "slidewin: internal error (a bug; please report it): panic at src/commands.rs:"
        ),
        "the log line names the place: {line}"
    );
}
