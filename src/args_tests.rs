//! Unit and property tests of `args.rs` (kept apart from the module code).
use super::*;
use proptest::prelude::*;

fn parse_strs(command: Command, args: &[&'static str]) -> Result<Request<'static>, ArgError> {
    parse(
        command,
        args.iter().map(|a| a.as_bytes()),
        Bounds::default(),
    )
}

#[test]
fn integers_parse_like_redis() {
    let cases: &[(&str, Option<i64>)] = &[
        ("0", Some(0)),
        ("1", Some(1)),
        ("-1", Some(-1)),
        ("60000", Some(60_000)),
        ("9223372036854775807", Some(i64::MAX)),
        ("-9223372036854775808", Some(i64::MIN)),
        ("9223372036854775808", None),
        ("-9223372036854775809", None),
        ("99999999999999999999999", None),
        ("", None),
        ("-", None),
        ("-0", None),
        ("01", None),
        ("+1", None),
        (" 1", None),
        ("1 ", None),
        ("1e3", None),
        ("1.5", None),
        ("1.0", None),
        ("0x10", None),
        ("inf", None),
        ("nan", None),
        ("--1", None),
        ("1-", None),
    ];
    for (input, expected) in cases {
        assert_eq!(parse_i64(input.as_bytes()), *expected, "input {input:?}");
    }
}

#[test]
fn non_utf8_is_not_an_integer() {
    assert_eq!(parse_i64(&[0xff, b'1']), None);
    assert_eq!(parse_i64(&[b'1', 0x80]), None);
}

#[test]
fn valid_requests() {
    type Case<'a> = (Command, &'a [&'a str], (u64, i64, u64, bool));
    let cases: &[Case] = &[
        (Command::Check, &["5", "60000"], (5, 60_000, 1, false)),
        (Command::Check, &["1", "1"], (1, 1, 1, false)),
        (
            Command::Check,
            &["100000", "31622400000"],
            (100_000, DEFAULT_MAX_WINDOW_MS, 1, false),
        ),
        (Command::Check, &["5", "1000", "DETAIL"], (5, 1000, 1, true)),
        (Command::Check, &["5", "1000", "detail"], (5, 1000, 1, true)),
        (
            Command::Check,
            &["5", "1000", "COST", "3"],
            (5, 1000, 3, false),
        ),
        (
            Command::Check,
            &["5", "1000", "cost", "3", "Detail"],
            (5, 1000, 3, true),
        ),
        (
            Command::Check,
            &["5", "1000", "DETAIL", "CoSt", "7"],
            (5, 1000, 7, true),
        ),
        // A cost above the limit is valid (it can never pass).
        (
            Command::Check,
            &["5", "1000", "COST", "100000"],
            (5, 1000, 100_000, false),
        ),
        (Command::Peek, &["5", "1000"], (5, 1000, 1, true)),
        (
            Command::Peek,
            &["5", "1000", "COST", "2"],
            (5, 1000, 2, true),
        ),
        // PEEK always replies in detail: DETAIL is accepted and changes nothing.
        (
            Command::Peek,
            &["5", "1000", "detail", "COST", "2"],
            (5, 1000, 2, true),
        ),
    ];
    for (command, args, (limit, window_ms, cost, detail)) in cases {
        let expected = Request {
            id: None,
            rule: Rule {
                limit: *limit,
                window_ms: *window_ms,
                cost: *cost,
            },
            reply: Reply {
                detail: *detail,
                with_members: false,
                with_oldest: false,
                shadow: false,
            },
        };
        assert_eq!(
            parse_strs(*command, args),
            Ok(expected),
            "{command:?} {args:?}"
        );
    }
}

#[test]
fn invalid_requests() {
    let limit = ArgError::Limit { max: 100_000 };
    let window = ArgError::Window {
        max: DEFAULT_MAX_WINDOW_MS,
    };
    let count = ArgError::Count { max: 100_000 };
    let cases: Vec<(Command, &[&str], ArgError)> = vec![
        (Command::Check, &["0", "1000"], limit.clone()),
        (Command::Check, &["-5", "1000"], limit.clone()),
        (Command::Check, &["100001", "1000"], limit.clone()),
        (Command::Check, &["1.5", "1000"], limit.clone()),
        (Command::Check, &["1e3", "1000"], limit.clone()),
        (Command::Check, &["", "1000"], limit.clone()),
        (
            Command::Check,
            &["99999999999999999999", "1000"],
            limit.clone(),
        ),
        (Command::Check, &["5", "0"], window.clone()),
        (Command::Check, &["5", "-1"], window.clone()),
        (Command::Check, &["5", "31622400001"], window.clone()),
        (Command::Check, &["5", "1.5"], window.clone()),
        (Command::Check, &["5", ""], window.clone()),
        (Command::Check, &["0", "0"], limit.clone()),
        (Command::Check, &["5"], ArgError::WrongArity),
        (Command::Check, &[], ArgError::WrongArity),
        (
            Command::Check,
            &["5", "1000", "COST"],
            ArgError::MissingCount,
        ),
        (Command::Check, &["5", "1000", "COST", "0"], count.clone()),
        (Command::Check, &["5", "1000", "COST", "-1"], count.clone()),
        (Command::Check, &["5", "1000", "COST", "1.5"], count.clone()),
        (
            Command::Check,
            &["5", "1000", "COST", "100001"],
            count.clone(),
        ),
        (
            Command::Check,
            &["5", "1000", "COST", "DETAIL"],
            count.clone(),
        ),
        (
            Command::Check,
            &["5", "1000", "COST", "1", "COST", "2"],
            ArgError::RepeatedOption("COST"),
        ),
        (
            Command::Check,
            &["5", "1000", "DETAIL", "detail"],
            ArgError::RepeatedOption("DETAIL"),
        ),
        (
            Command::Check,
            &["5", "1000", "extra"],
            ArgError::UnknownOption("extra".into()),
        ),
        (
            Command::Peek,
            &["5", "1000", "WITHMEMBERS"],
            ArgError::PeekMembers,
        ),
        (
            Command::Peek,
            &["5", "1000", "DETAIL", "detail"],
            ArgError::RepeatedOption("DETAIL"),
        ),
        (
            Command::Peek,
            &["5", "1000", "WITHOLDEST", "witholdest"],
            ArgError::RepeatedOption("WITHOLDEST"),
        ),
    ];
    for (command, args, expected) in cases {
        assert_eq!(
            parse_strs(command, args),
            Err(expected),
            "{command:?} {args:?}"
        );
    }
}

#[test]
fn shadow_is_an_option_of_check_and_mcheck_only() {
    // CHECK: any case, with or without DETAIL, among the other options.
    for args in [
        &["5", "1000", "SHADOW"][..],
        &["5", "1000", "shadow"][..],
        &["5", "1000", "Shadow", "COST", "2"][..],
    ] {
        let r = parse_strs(Command::Check, args).unwrap();
        assert!(r.reply.shadow, "{args:?}");
        assert!(
            !r.reply.detail,
            "{args:?}: SHADOW alone keeps the plain reply"
        );
    }
    let r = parse_strs(
        Command::Check,
        &["5", "1000", "DETAIL", "shadow", "WITHOLDEST", "ID", "r"],
    )
    .unwrap();
    assert_eq!(
        r.reply,
        Reply {
            detail: true,
            with_members: false,
            with_oldest: true,
            shadow: true,
        }
    );
    assert_eq!(r.id, Some(&b"r"[..]));
    assert!(
        !parse_strs(Command::Check, &["5", "1000", "DETAIL"])
            .unwrap()
            .reply
            .shadow
    );
    // At most once; PEEK refuses nothing, so it takes no SHADOW.
    assert_eq!(
        parse_strs(Command::Check, &["5", "1000", "SHADOW", "shadow"]),
        Err(ArgError::RepeatedOption("SHADOW"))
    );
    assert_eq!(
        parse_strs(Command::Peek, &["5", "1000", "SHADOW"]),
        Err(ArgError::PeekShadow)
    );
    assert_eq!(
        ArgError::PeekShadow.to_string(),
        "ERR PEEK refuses nothing: SHADOW applies to CHECK and MCHECK"
    );
    // A word that merely starts like it is still unknown.
    assert_eq!(
        parse_strs(Command::Check, &["5", "1000", "SHADOWS"]),
        Err(ArgError::UnknownOption("SHADOWS".into()))
    );
    // MCHECK.
    let p =
        |args: &[&'static str]| parse_multi(args.iter().map(|a| a.as_bytes()), Bounds::default());
    let r = p(&["2", "a", "5", "1000", "b", "1", "1000", "shadow", "DETAIL"]).unwrap();
    assert!(r.reply.shadow && r.reply.detail);
    assert!(!p(&["1", "a", "5", "1000"]).unwrap().reply.shadow);
    assert_eq!(
        p(&["1", "a", "5", "1000", "SHADOW", "SHADOW"]),
        Err(ArgError::RepeatedOption("SHADOW"))
    );
}

#[test]
fn multi_requests() {
    let p =
        |args: &[&'static str]| parse_multi(args.iter().map(|a| a.as_bytes()), Bounds::default());
    let r = p(&[
        "2",
        "ip",
        "5",
        "60000",
        "phone",
        "1",
        "60000",
        "cost",
        "2",
        "WITHMEMBERS",
    ])
    .unwrap();
    assert_eq!(
        r.rules,
        vec![
            KeyedRule {
                key: 2,
                limit: 5,
                window_ms: 60_000
            },
            KeyedRule {
                key: 5,
                limit: 1,
                window_ms: 60_000
            },
        ]
    );
    assert_eq!(
        (r.cost, r.reply.detail, r.reply.with_members),
        (2, true, true)
    );
    assert_eq!(p(&["1", "k", "1", "1"]).unwrap().rules.len(), 1);
    // The oldest entry of several windows is not one number: refused.
    assert_eq!(
        p(&["1", "k", "1", "1", "WITHOLDEST"]),
        Err(ArgError::UnknownOption("WITHOLDEST".into()))
    );
    let cases: &[(&[&str], ArgError)] = &[
        (&[], ArgError::WrongArity),
        (&["0", "k", "1", "1"], ArgError::NumRules),
        (&["65"], ArgError::NumRules),
        (&["x", "k", "1", "1"], ArgError::NumRules),
        (&["2", "k", "1", "1"], ArgError::NumRules),
        (&["2", "k", "1", "1", "k2", "1"], ArgError::NumRules),
        (&["1", "k", "0", "1"], ArgError::Limit { max: 100_000 }),
        (
            &["1", "k", "1", "0"],
            ArgError::Window {
                max: DEFAULT_MAX_WINDOW_MS,
            },
        ),
        (
            &["1", "k", "1", "1", "PEEK"],
            ArgError::UnknownOption("PEEK".into()),
        ),
        (
            &["1", "k", "1", "1", "DETAIL", "DETAIL"],
            ArgError::RepeatedOption("DETAIL"),
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(p(args), Err(expected.clone()), "{args:?}");
    }
}

#[test]
fn configured_bounds_apply() {
    let bounds = Bounds {
        max_limit: 10,
        max_window_ms: 1000,
        max_call_entries: 10,
    };
    let p =
        |args: &[&'static str]| parse(Command::Check, args.iter().map(|a| a.as_bytes()), bounds);
    assert!(p(&["10", "1000"]).is_ok());
    assert_eq!(p(&["11", "1000"]), Err(ArgError::Limit { max: 10 }));
    assert_eq!(p(&["10", "1001"]), Err(ArgError::Window { max: 1000 }));
    assert_eq!(
        p(&["10", "1000", "COST", "11"]),
        Err(ArgError::Count { max: 10 })
    );
}

#[test]
fn error_texts_name_the_argument_and_range() {
    assert_eq!(
        ArgError::Limit { max: 100_000 }.to_string(),
        "ERR limit must be an integer between 1 and 100000 (slidewin.max-limit)"
    );
    assert_eq!(
        ArgError::Window {
            max: DEFAULT_MAX_WINDOW_MS
        }
        .to_string(),
        "ERR window_ms must be an integer between 1 and 31622400000 (slidewin.max-window-ms)"
    );
    assert_eq!(
        ArgError::Count { max: 7 }.to_string(),
        "ERR COST count must be an integer between 1 and 7 (slidewin.max-limit)"
    );
    assert_eq!(
        ArgError::UnknownOption(printable(b"bad\r\n\xff")).to_string(),
        "ERR unknown option 'bad\\x0d\\x0a\\xff'"
    );
    assert_eq!(printable(&[b'a'; 40]), format!("{}...", "a".repeat(32)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn every_i64_round_trips(v in any::<i64>()) {
        prop_assert_eq!(parse_i64(v.to_string().as_bytes()), Some(v));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_agree_with_std(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
        let ours = parse_i64(&bytes);
        // The naive model: std's parser, restricted to Redis's canonical form.
        let model = std::str::from_utf8(&bytes).ok().and_then(|s| {
            let canonical = s.parse::<i64>().ok()?;
            (canonical.to_string() == s).then_some(canonical)
        });
        prop_assert_eq!(ours, model);
    }

    #[test]
    fn arbitrary_argument_vectors_never_panic(
        args in argument_vector(),
        peek in any::<bool>(),
    ) {
        let command = if peek { Command::Peek } else { Command::Check };
        let Ok(r) = parse(command, args.iter().map(|a| a.as_slice()), Bounds::default()) else {
            return Ok(());
        };
        // Accepted: the values are the ones given, in range.
        let int = |i: usize| parse_i64(&args[i]);
        prop_assert_eq!(Some(r.rule.limit as i64), int(0));
        prop_assert_eq!(Some(r.rule.window_ms), int(1));
        prop_assert!(r.rule.limit >= 1 && r.rule.limit <= 100_000);
        prop_assert!(r.rule.window_ms >= 1 && r.rule.window_ms <= DEFAULT_MAX_WINDOW_MS);
        let word = |w: &str| args[2..].iter().any(|a| a.eq_ignore_ascii_case(w.as_bytes()));
        let cost = args[2..]
            .iter()
            .rposition(|a| a.eq_ignore_ascii_case(b"COST"))
            .map_or(Some(1), |i| int(2 + i + 1));
        prop_assert_eq!(Some(r.rule.cost as i64), cost);
        prop_assert!(r.rule.cost >= 1 && r.rule.cost <= 100_000);
        prop_assert_eq!(
            r.reply.detail,
            peek || word("DETAIL") || word("WITHMEMBERS") || word("WITHOLDEST")
        );
        prop_assert_eq!(r.reply.with_members, !peek && word("WITHMEMBERS"));
        prop_assert_eq!(r.reply.with_oldest, word("WITHOLDEST"));
        prop_assert_eq!(r.reply.shadow, !peek && word("SHADOW"));
    }
}

/// One argument: mostly the words and numbers the parser knows (in range or
/// not, in any case), sometimes random bytes, so that a good share of the
/// vectors parse and the checks on accepted requests run.
fn argument() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => (1i64..=12).prop_map(|v| v.to_string().into_bytes()),
        1 => any::<i64>().prop_map(|v| v.to_string().into_bytes()),
        1 => (-2i64..=1).prop_map(|v| v.to_string().into_bytes()),
        2 => proptest::sample::select(vec!["COST", "cost", "Detail", "DETAIL", "withmembers", "WITHMEMBERS", "WithOldest"])
            .prop_map(|w| w.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

/// An option: a word with its count where it takes one, or any argument.
fn option() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        2 => (proptest::sample::select(vec!["COST", "cost", "Cost"]), argument())
            .prop_map(|(w, n)| vec![w.as_bytes().to_vec(), n]),
        2 => proptest::sample::select(vec!["DETAIL", "detail", "WITHMEMBERS", "WithMembers", "WITHOLDEST", "SHADOW", "shadow"])
            .prop_map(|w| vec![w.as_bytes().to_vec()]),
        1 => argument().prop_map(|a| vec![a]),
    ]
}

/// `limit window [options]` shaped vectors, and shapeless ones.
fn argument_vector() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop_oneof![
        3 => (argument(), argument(), proptest::collection::vec(option(), 0..3)).prop_map(
            |(limit, window, options)| {
                let mut v = vec![limit, window];
                v.extend(options.into_iter().flatten());
                v
            }
        ),
        1 => proptest::collection::vec(argument(), 0..7),
    ]
}

/// The generator above really reaches accepted requests (else the checks in
/// `arbitrary_argument_vectors_never_panic` would never run), and errors.
#[test]
fn argument_vectors_reach_both_outcomes() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = argument_vector();
    let (mut ok, mut with_cost, mut with_detail, mut err) = (0, 0, 0, 0);
    for _ in 0..4000 {
        let args = strategy.new_tree(&mut runner).expect("a value").current();
        match parse(
            Command::Check,
            args.iter().map(|a| a.as_slice()),
            Bounds::default(),
        ) {
            Ok(r) => {
                ok += 1;
                with_cost += usize::from(r.rule.cost > 1);
                with_detail += usize::from(r.reply.detail);
            }
            Err(_) => err += 1,
        }
    }
    assert!(ok >= 200, "{ok} of 4000 parsed");
    assert!(
        with_cost >= 20 && with_detail >= 20,
        "{with_cost} with COST, {with_detail} with DETAIL"
    );
    assert!(err >= 400, "{err} of 4000 refused");
}

/// The parser's rule keys, the key-position answer and the key spec's start
/// and step are one layout.
#[test]
fn mcheck_key_layout_is_one() {
    let argv: Vec<&[u8]> = [
        "slidewin.mcheck",
        "3",
        "a",
        "5",
        "60000",
        "b",
        "1",
        "60000",
        "c",
        "10",
        "86400000",
        "DETAIL",
    ]
    .iter()
    .map(|a| a.as_bytes())
    .collect();
    let parsed = parse_multi(argv[1..].iter().copied(), Bounds::default()).expect("valid");
    let from_parser: Vec<usize> = parsed.rules.iter().map(|r| r.key).collect();
    let reported: Vec<usize> = mcheck_key_positions(Some(argv[1]), argv.len()).collect();
    assert_eq!(from_parser, [2, 5, 8]);
    assert_eq!(reported, from_parser);
    assert_eq!(reported[0], MCHECK_FIRST_KEY);
    assert!(reported.windows(2).all(|w| w[1] - w[0] == MCHECK_RULE_ARGS));
    // Invalid or truncated: only the positions argv has, none for a bad count.
    assert_eq!(
        mcheck_key_positions(Some(b"3"), 6).collect::<Vec<_>>(),
        [2, 5]
    );
    assert_eq!(mcheck_key_positions(Some(b"0"), 12).count(), 0);
    assert_eq!(mcheck_key_positions(Some(b"x"), 12).count(), 0);
    assert_eq!(mcheck_key_positions(None, 1).count(), 0);
}

#[test]
fn top_arguments() {
    let p = |args: &[&'static str]| parse_top(args.iter().map(|a| a.as_bytes()));
    let r = |count, allowed, reset| {
        Ok(TopRequest {
            count,
            allowed,
            reset,
        })
    };
    assert_eq!(p(&[]), r(10, false, false));
    assert_eq!(p(&["3"]), r(3, false, false));
    assert_eq!(p(&["3", "allowed"]), r(3, true, false));
    assert_eq!(p(&["RESET", "DENIED"]), r(10, false, true));
    assert_eq!(p(&["100000", "Allowed", "reset"]), r(100_000, true, true));
    // In any order, as every other option list.
    assert_eq!(p(&["DENIED", "3"]), r(3, false, false));
    assert_eq!(p(&["reset", "ALLOWED", "7"]), r(7, true, true));
    let cases: &[(&[&str], ArgError)] = &[
        (&["0"], ArgError::TopCount),
        (&["-1"], ArgError::TopCount),
        (&["100001"], ArgError::TopCount),
        (&["1.5"], ArgError::TopCount),
        (&["DENIED", "0"], ArgError::TopCount),
        (&["3", "DENIED", "4"], ArgError::RepeatedOption("count")),
        (&["DENIED", "ALLOWED"], ArgError::TopOutcomes),
        (&["allowed", "ALLOWED"], ArgError::RepeatedOption("ALLOWED")),
        (&["RESET", "reset"], ArgError::RepeatedOption("RESET")),
        (&["5", "LATER"], ArgError::UnknownOption("LATER".into())),
    ];
    for (args, expected) in cases {
        assert_eq!(p(args).as_ref(), Err(expected), "{args:?}");
    }
    assert_eq!(
        ArgError::TopCount.to_string(),
        "ERR count must be an integer between 1 and 100000"
    );
}

#[test]
fn top_unknown_words_are_named() {
    let p = |args: &[&'static str]| parse_top(args.iter().map(|a| a.as_bytes()));
    assert_eq!(p(&["LATER"]), Err(ArgError::UnknownOption("LATER".into())));
}

#[test]
fn entries_per_call_are_bounded() {
    let bounds = Bounds {
        max_call_entries: 6_400,
        ..Bounds::default()
    };
    assert_eq!(entries_within(100, 64, bounds), Ok(()));
    assert_eq!(entries_within(6_400, 1, bounds), Ok(()));
    let e = entries_within(101, 64, bounds).expect_err("above");
    assert_eq!(
        e,
        ArgError::Entries {
            cost: 101,
            keys: 64,
            entries: 6_464,
            max: 6_400
        }
    );
    assert_eq!(
        e.to_string(),
        "ERR COST 101 on 64 keys would add 6464 entries; slidewin.max-entries-per-call allows 6400 a call"
    );
    assert_eq!(
        entries_within(6_401, 1, bounds)
            .expect_err("above")
            .to_string(),
        "ERR COST 6401 on 1 key would add 6401 entries; slidewin.max-entries-per-call allows 6400 a call"
    );
    // The default: max-limit, so one key at COST max-limit passes and two do not.
    let d = Bounds::default();
    assert_eq!(entries_within(100_000, 1, d), Ok(()));
    assert!(entries_within(100_000, 2, d).is_err());
    assert!(entries_within(50_000, 2, d).is_ok());
    // Nothing overflows.
    assert!(entries_within(u64::MAX, usize::MAX, d).is_err());
}

#[test]
fn undo_arguments() {
    let undo = |args: &[&'static str]| {
        let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        parse_undo(&v)
    };
    assert_eq!(undo(&["ID", "r1"]), Ok(UndoRequest::Id(b"r1")));
    assert_eq!(undo(&["id", "r1"]), Ok(UndoRequest::Id(b"r1")));
    assert_eq!(undo(&["5@1700000000000"]), Ok(UndoRequest::Members));
    assert_eq!(undo(&["5", "ID"]), Ok(UndoRequest::Members));
    assert_eq!(undo(&[]), Err(ArgError::WrongArity));
    assert_eq!(undo(&["ID", ""]), Err(ArgError::RequestId));
    // `ID` first takes exactly one request id.
    for args in [&["ID"][..], &["ID", "r1", "extra"], &["id", "a", "b", "c"]] {
        let e = undo(args).expect_err("a syntax error");
        assert_eq!(
            e.to_string(),
            "ERR syntax error: SLIDEWIN.UNDO key ID request-id",
            "{args:?}"
        );
    }
}
