//! The documentation's links resolve (no server needed).
//!
//! Starting from README.md, every page of docs/ and clients/python/README.md,
//! and following every link to another `.md` file of the repository, each
//! relative link must name a file or folder of the repository, and each
//! `#anchor` a heading of its page by GitHub's rules: the heading's text
//! without its markup, lowercased, every character that is not a letter, a
//! digit, a space, `-` or `_` dropped, each space turned into `-`, and a
//! heading whose anchor was already taken on the page given `-1`, `-2`, …
//! Links inside code (fenced blocks, `code spans`) are not links. External
//! links (`http:`, `https:`, `mailto:`) are not fetched.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages the check starts from, relative to `root`.
fn start_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| PathBuf::from("docs").join(e.file_name()))
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    pages.extend(docs);
    pages.push(PathBuf::from("clients/python/README.md"));
    pages
}

/// `text` with the contents of fenced code blocks and code spans blanked
/// out (newlines kept, so line numbers stay), and whether each line is
/// outside a fenced block.
fn without_code(text: &str) -> (String, Vec<bool>) {
    let mut prose = String::with_capacity(text.len());
    let mut outside = Vec::new();
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let opens = marker.len() >= 3 && marker.chars().all(|c| c == marker.as_bytes()[0] as char);
        match &fence {
            Some(open) => {
                if opens
                    && marker.starts_with(open.as_str())
                    && trimmed[marker.len()..].trim().is_empty()
                {
                    fence = None;
                }
                outside.push(false);
                prose.push_str(&blank(line));
            }
            None if opens => {
                fence = Some(marker);
                outside.push(false);
                prose.push_str(&blank(line));
            }
            None => {
                outside.push(true);
                prose.push_str(line);
            }
        }
    }
    (without_code_spans(&prose), outside)
}

/// Spaces for every character of `s` but its newlines.
fn blank(s: &str) -> String {
    s.chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect()
}

/// `text` with every code span's contents blanked: a run of n backticks
/// opens one, the next run of exactly n closes it (it may cross lines); a
/// run never closed is literal text.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                let span: String = chars[i..j + n].iter().collect();
                out.push_str(&blank(&span));
                i = j + n;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// Every link target of a page outside code, with its line (1-based):
/// inline links and images `[text](target "title")`, `<target>` forms,
/// and reference definitions `[label]: target`.
fn links(text: &str) -> Vec<(usize, String)> {
    let (prose, _) = without_code(text);
    let mut found = Vec::new();
    let line_of = |at: usize| prose[..at].matches('\n').count() + 1;
    let mut from = 0;
    while let Some(k) = prose[from..].find("](") {
        let start = from + k + 2;
        let rest = &prose[start..];
        let target = if let Some(inner) = rest.strip_prefix('<') {
            inner.split('>').next().unwrap_or("").to_string()
        } else {
            // Up to the `)` that closes the link, allowing balanced parens.
            let mut depth = 0usize;
            let mut end = rest.len();
            for (i, c) in rest.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = i;
                        break;
                    }
                    ')' => depth -= 1,
                    '\n' => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
            }
            rest[..end]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string()
        };
        found.push((line_of(start), target));
        from = start;
    }
    for (i, line) in prose.lines().enumerate() {
        let t = line.trim_start();
        if let Some(after) = t.strip_prefix('[') {
            if let Some(close) = after.find("]:") {
                if !after[..close].is_empty() && !after[..close].contains('[') {
                    let target = after[close + 2..].split_whitespace().next().unwrap_or("");
                    let target = target.trim_start_matches('<').trim_end_matches('>');
                    found.push((i + 1, target.to_string()));
                }
            }
        }
    }
    found
}

/// GitHub's anchor for a heading's text.
fn anchor_of(heading: &str) -> String {
    // Links and images show their text; other markup is punctuation.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let (before, after) = rest.split_at(open);
        text.push_str(before.trim_end_matches('!'));
        match after
            .find("](")
            .and_then(|mid| after[mid..].find(')').map(|close| (mid, mid + close)))
        {
            Some((mid, close)) => {
                text.push_str(&after[1..mid]);
                rest = &after[close + 1..];
            }
            None => {
                text.push('[');
                rest = &after[1..];
            }
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a page offers: its ATX headings outside fenced code (a
/// repeated anchor gets `-1`, `-2`, …), and `id`/`name` attributes of HTML.
fn anchors(text: &str) -> BTreeSet<String> {
    let (_, outside) = without_code(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut all = BTreeSet::new();
    for (line, is_prose) in text.lines().zip(outside) {
        if !is_prose {
            continue;
        }
        for attr in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attr) {
                let value = &rest[at + attr.len()..];
                if let Some(end) = value.find('"') {
                    all.insert(value[..end].to_string());
                }
                rest = &rest[at + attr.len()..];
            }
        }
        let indent = line.len() - line.trim_start_matches(' ').len();
        let hashes = line.trim_start().chars().take_while(|&c| c == '#').count();
        let after = &line.trim_start()[hashes..];
        if indent > 3 || !(1..=6).contains(&hashes) || !(after.is_empty() || after.starts_with(' '))
        {
            continue;
        }
        // A closing sequence of `#` is not part of the heading.
        let title = after.trim().trim_end_matches('#').trim_end();
        let base = anchor_of(title);
        let n = seen.entry(base.clone()).or_insert(0);
        let anchor = if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        *n += 1;
        all.insert(anchor);
    }
    all
}

/// `path` without `.` and `..` steps; `None` if it leaves the root.
fn normalized(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// What the check found: every broken link, and what was checked.
#[derive(Debug, Default)]
struct Report {
    broken: Vec<String>,
    links: usize,
    pages: BTreeSet<PathBuf>,
}

/// Checks the links of `start` (paths relative to `root`) and of every
/// `.md` page they lead to.
fn check(root: &Path, start: &[PathBuf]) -> Report {
    let mut report = Report::default();
    let mut queue: Vec<PathBuf> = start.to_vec();
    let mut texts: BTreeMap<PathBuf, Option<String>> = BTreeMap::new();
    let mut read = |page: &Path| -> Option<String> {
        texts
            .entry(page.to_path_buf())
            .or_insert_with(|| std::fs::read_to_string(root.join(page)).ok())
            .clone()
    };
    while let Some(page) = queue.pop() {
        if !report.pages.insert(page.clone()) {
            continue;
        }
        let Some(text) = read(&page) else {
            report
                .broken
                .push(format!("{}: cannot be read", page.display()));
            continue;
        };
        for (line, target) in links(&text) {
            let external = ["http://", "https://", "mailto:"]
                .iter()
                .any(|s| target.starts_with(s));
            if external {
                continue;
            }
            report.links += 1;
            let at = format!("{}:{line}: ({target})", page.display());
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            if target.is_empty() || path.starts_with('/') {
                report.broken.push(format!("{at}: not a relative link"));
                continue;
            }
            let path = path.replace("%20", " ");
            let resolved = if path.is_empty() {
                Some(page.clone())
            } else {
                normalized(&page.parent().unwrap_or(Path::new("")).join(&path))
            };
            let Some(resolved) = resolved else {
                report.broken.push(format!("{at}: leaves the repository"));
                continue;
            };
            if !root.join(&resolved).exists() {
                report
                    .broken
                    .push(format!("{at}: no file {}", resolved.display()));
                continue;
            }
            let is_page = resolved.extension().is_some_and(|x| x == "md");
            if is_page {
                queue.push(resolved.clone());
            }
            if let Some(anchor) = anchor {
                if !is_page {
                    report.broken.push(format!(
                        "{at}: an anchor into {}, not a page",
                        resolved.display()
                    ));
                } else if !read(&resolved).is_some_and(|t| anchors(&t).contains(anchor)) {
                    report.broken.push(format!(
                        "{at}: {} has no heading with the anchor #{anchor}",
                        resolved.display()
                    ));
                }
            }
        }
    }
    report
}

#[test]
fn every_link_of_the_documentation_resolves() {
    let root = root();
    let report = check(&root, &start_pages(&root));
    assert!(
        report.broken.is_empty(),
        "{} broken links:\n{}",
        report.broken.len(),
        report.broken.join("\n")
    );
    // The check saw the pages and links it should have.
    assert!(report.pages.contains(Path::new("docs/reference.md")));
    assert!(report.links >= 50, "only {} links checked", report.links);
    eprintln!(
        "links: {} relative links on {} pages resolve",
        report.links,
        report.pages.len()
    );
}

#[test]
fn every_docs_page_is_reachable_from_the_readme() {
    // Following links from README.md alone reaches every page of docs/.
    let root = root();
    let report = check(&root, &[PathBuf::from("README.md")]);
    let missing: Vec<String> = start_pages(&root)
        .into_iter()
        .filter(|p| !report.pages.contains(p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "not linked from README.md or a page it links to: {missing:?}"
    );
}

#[test]
fn the_link_rules_can_fail() {
    // GitHub's anchors.
    assert_eq!(anchor_of("`SLIDEWIN.CHECK`"), "slidewincheck");
    assert_eq!(
        anchor_of("`SLIDEWIN.MCHECK`: several rules, all or nothing"),
        "slidewinmcheck-several-rules-all-or-nothing"
    );
    assert_eq!(
        anchor_of("Java (Spring Boot, `StringRedisTemplate`)"),
        "java-spring-boot-stringredistemplate"
    );
    assert_eq!(
        anchor_of("[Install](install.md) and load"),
        "install-and-load"
    );
    assert_eq!(
        anchor_of("Data, memory, persistence"),
        "data-memory-persistence"
    );
    assert_eq!(anchor_of("a_b  c"), "a_b--c");
    let page = "# Title\n## Errors\n## Errors\n### Errors ##\n```\n# not a heading\n```\n    # indented code\n";
    let got = anchors(page);
    let want: BTreeSet<String> = ["title", "errors", "errors-1", "errors-2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(got, want);
    // Links outside code only.
    let text = "see [a](a.md#x) and `[b](b.md)`\n```\n[c](c.md)\n```\n[d]: d.md\n![e](e.png \"title\") [f](<f g.md>) [h](h.md#k(1))\n``x `[i](i.md)` y``\n";
    let targets: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(targets, ["a.md#x", "e.png", "f g.md", "h.md#k(1)", "d.md"]);
    assert_eq!(links("a\n\n[x](y.md)\n")[0].0, 3);
    // A small tree: good links pass, every kind of bad one is reported.
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "README.md",
        "# Top\n[ok](docs/b.md#two) [ok](#top) [ok](docs/) [ok](https://example.com/x#y)\n\
         [bad anchor](docs/b.md#three) [no file](docs/c.md) [out](../x.md) [abs](/docs/b.md)\n\
         [self](#nowhere) [dup](docs/b.md#two-1) [file anchor](data.txt#l1)\n",
    );
    write("data.txt", "x\n");
    write(
        "docs/b.md",
        "# One\n## Two\n## Two\n[back](../README.md#top) [bad](../README.md#gone)\n",
    );
    let report = check(dir.path(), &[PathBuf::from("README.md")]);
    let broken = report.broken.join("\n");
    for expected in [
        "README.md:3: (docs/b.md#three): docs/b.md has no heading with the anchor #three",
        "README.md:3: (docs/c.md): no file docs/c.md",
        "README.md:3: (../x.md): leaves the repository",
        "README.md:3: (/docs/b.md): not a relative link",
        "README.md:4: (#nowhere): README.md has no heading with the anchor #nowhere",
        "README.md:4: (data.txt#l1): an anchor into data.txt, not a page",
        "docs/b.md:4: (../README.md#gone): README.md has no heading with the anchor #gone",
    ] {
        assert!(
            broken.contains(expected),
            "missing {expected:?} in:\n{broken}"
        );
    }
    assert_eq!(report.broken.len(), 7, "{broken}");
    assert_eq!(report.links, 12);
}
