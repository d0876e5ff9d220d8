//! The README's figures, and its chapters' under `docs/`, are what their commands print
//! at the flags they give.
//!
//! A figure is marked in README.md or a `docs/` chapter by an HTML comment, which Markdown does not show:
//! - `<!-- figure: ARGS -->` right before a fenced block: the block is the whole
//!   output of `leasehold ARGS`;
//! - `<!-- figure: ARGS => TEXT -->` before a paragraph or a table: `TEXT` is a piece
//!   of one line the command prints, and every number in it appears in the paragraph
//!   or table that follows (the figures the prose quotes).
//!
//! `figure, slow:` marks a command that takes more than a few seconds; those are
//! checked by the ignored test (`--ignored`). Elapsed times are masked on both sides.
//! `scripts/readme-figures` rewrites every figure from its command's output
//! (`LEASEHOLD_README_WRITE=1`), and each test then checks the result.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug)]
struct Figure {
    /// The marker's line, 0-based.
    line: usize,
    args: String,
    slow: bool,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The block's lines, fences excluded.
    Block { start: usize, end: usize },
    /// A piece of one output line, quoted by the text from `quoted` up to a blank line.
    Piece { text: String, quoted: usize },
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Every figure marked in `readme`, or what is wrong with a marker.
fn figures(readme: &str) -> Result<Vec<Figure>, String> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let near = line.trim_start().starts_with("<!--") && line.to_lowercase().contains("figure");
        let Some(body) = line
            .trim()
            .strip_prefix("<!-- figure")
            .and_then(|b| b.strip_suffix("-->"))
        else {
            // A marker written almost right would otherwise be skipped without a word.
            if near {
                return Err(format!(
                    "line {}: a figure marker is one line, `<!-- figure: ARGS -->`",
                    i + 1
                ));
            }
            continue;
        };
        let (slow, body) = match body.strip_prefix(", slow:") {
            Some(rest) => (true, rest),
            None => (
                false,
                body.strip_prefix(':').ok_or(format!(
                    "line {}: `<!-- figure:` or `<!-- figure, slow:`",
                    i + 1
                ))?,
            ),
        };
        let kind = match body.split_once("=>") {
            Some((args, text)) => {
                // The quoted text starts after the markers stacked on this one.
                let mut quoted = i + 1;
                while lines
                    .get(quoted)
                    .is_some_and(|l| l.trim().starts_with("<!-- figure"))
                {
                    quoted += 1;
                }
                out.push(Figure {
                    line: i,
                    args: args.trim().to_string(),
                    slow,
                    kind: Kind::Piece {
                        text: text.trim().to_string(),
                        quoted,
                    },
                });
                continue;
            }
            None => {
                if !lines.get(i + 1).is_some_and(|l| l.starts_with("```")) {
                    return Err(format!(
                        "line {}: a figure without `=>` must stand right before a fenced block",
                        i + 1
                    ));
                }
                let end = (i + 2..lines.len())
                    .find(|&j| lines[j].starts_with("```"))
                    .ok_or(format!("line {}: the block is never closed", i + 1))?;
                Kind::Block { start: i + 2, end }
            }
        };
        out.push(Figure {
            line: i,
            args: body.trim().to_string(),
            slow,
            kind,
        });
    }
    Ok(out)
}

/// What `leasehold ARGS` prints, run from the workspace root: it must exit 1 with
/// `--bug` (a counterexample) and 0 without.
fn output(args: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(args.split_whitespace())
        .current_dir(root())
        .output()
        .expect("the leasehold binary runs");
    // A known-bad variant's counterexample exits 1; anything else quoted must pass,
    // or a proof that broke would still show its state counts.
    let expected = if args.split_whitespace().any(|a| a == "--bug") {
        1
    } else {
        0
    };
    assert_eq!(
        out.status.code(),
        Some(expected),
        "`leasehold {args}`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn is_number_char(c: char) -> bool {
    c.is_ascii_digit() || c == ',' || c == '.'
}

/// The numbers in `text`, as written (`142,736`, `8.8`), each with the word that
/// follows it, if one does (`17 steps`): the prose quotes a figure's number with its
/// word, so that a count of steps is not met by a like number of seconds.
fn numbers(text: &str) -> Vec<Quote> {
    let mut quotes = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let len = number_len(&rest[start..]);
        let number = rest[start..start + len].to_string();
        rest = &rest[start + len..];
        let unit = word_after(rest);
        quotes.push(Quote {
            number,
            unit: (!unit.is_empty()).then_some(unit),
        });
    }
    quotes
}

/// The word right after a number, one space on (`steps` in ` steps)`), or nothing.
fn word_after(rest: &str) -> String {
    rest.strip_prefix(' ')
        .unwrap_or("")
        .chars()
        .take_while(|c| c.is_alphabetic())
        .collect()
}

/// A number a figure quotes, and the word after it.
#[derive(Clone, Debug, PartialEq)]
struct Quote {
    number: String,
    unit: Option<String>,
}

impl Quote {
    /// As the figure writes it.
    fn text(&self) -> String {
        match &self.unit {
            Some(unit) => format!("{} {unit}", self.number),
            None => self.number.clone(),
        }
    }

    /// Whether `after`, the text after an equal number, goes on as this quote does: a
    /// quote with a word goes on with that word or with none (a table's `142,736
    /// (112,888)`), never with another (`17 s` does not quote `17 steps`).
    fn goes_on_as(&self, after: &str) -> bool {
        let Some(unit) = &self.unit else {
            return true;
        };
        let word = word_after(after);
        word.is_empty() || *unit == word
    }

    /// Whether it stands in `prose` ([`stands_in`]), going on as it should.
    fn stands_in(&self, prose: &str) -> bool {
        self.times_in(prose) > 0
    }

    /// How many times it stands in `prose`, going on as it should.
    fn times_in(&self, prose: &str) -> usize {
        standing(prose, &self.number)
            .filter(|at| self.goes_on_as(&prose[at + self.number.len()..]))
            .count()
    }
}

/// A line with its elapsed times masked: a check's `, 1.1 s: complete` and the
/// simulator's `wall time (s)` row differ from run to run.
fn mask(line: &str) -> String {
    if line.starts_with("wall time") {
        return "wall time …".to_string();
    }
    let mut out = line.to_string();
    if let Some(at) = out.find(" s: ") {
        let head = &out[..at];
        let start = head.trim_end_matches(is_number_char).len();
        if start < at && head[..start].ends_with(", ") {
            out.replace_range(start..at, "…");
        }
    }
    out
}

fn masked(text: &str) -> Vec<String> {
    text.lines().map(mask).collect()
}

/// `text` with each run of white space as one space: a table's column widths follow
/// its widest cell, which is not the figure.
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text a piece quotes: from `quoted` up to the next blank line.
fn quoted_text(lines: &[&str], quoted: usize) -> String {
    lines[quoted.min(lines.len())..]
        .iter()
        .take_while(|l| !l.trim().is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `number` stands in `text` as a whole number, not inside a longer one.
fn stands_in(text: &str, number: &str) -> bool {
    standing(text, number).next().is_some()
}

/// Where `number` stands in `text` as a whole number, not inside a longer one.
fn standing<'a>(text: &'a str, number: &'a str) -> impl Iterator<Item = usize> + 'a {
    text.match_indices(number)
        .map(|(at, _)| at)
        .filter(move |&at| {
            let mut before = text[..at].chars().rev();
            let mut after = text[at + number.len()..].chars();
            // A digit, or a `.` or `,` joining a digit on the far side, continues a number:
            // `228` stands in `costs 228.` but not in `2280`, `228.5`, `1,228` or `0.228`.
            let continues = |next: Option<char>, beyond: Option<char>| match next {
                Some(c) if c.is_ascii_digit() => true,
                Some('.' | ',') => beyond.is_some_and(|c| c.is_ascii_digit()),
                _ => false,
            };
            !continues(before.next(), before.next()) && !continues(after.next(), after.next())
        })
}

/// Whether `needle` occurs in `hay` with no number running on at either end.
fn contains_bounded(hay: &str, needle: &str) -> bool {
    stands_in(hay, needle)
}

/// What is wrong with `figure` given its command's `printed` output, if anything.
fn judge(lines: &[&str], figure: &Figure, printed: &str) -> Option<String> {
    let at = figure.line + 1;
    match &figure.kind {
        Kind::Block { start, end } => {
            let want: Vec<String> = lines[*start..*end].iter().map(|l| mask(l)).collect();
            let got = masked(printed);
            (want != got).then(|| {
                let first = want
                    .iter()
                    .zip(&got)
                    .position(|(w, g)| w != g)
                    .unwrap_or(want.len().min(got.len()));
                format!(
                    "line {at}: `leasehold {}` prints another block; first difference at its \
                     line {}:\n  README: {}\n  prints: {}",
                    figure.args,
                    first + 1,
                    want.get(first).map_or("(nothing)", String::as_str),
                    got.get(first).map_or("(nothing)", String::as_str),
                )
            })
        }
        Kind::Piece { text, quoted } => {
            let piece = squash(&mask(text));
            if !masked(printed)
                .iter()
                .any(|l| contains_bounded(&squash(l), &piece))
            {
                return Some(format!(
                    "line {at}: `leasehold {}` no longer prints `{text}`",
                    figure.args
                ));
            }
            let prose = quoted_text(lines, *quoted);
            let missing: Vec<String> = numbers(text)
                .iter()
                .filter(|quote| !quote.stands_in(&prose))
                .map(Quote::text)
                .collect();
            (!missing.is_empty()).then(|| {
                format!(
                    "line {at}: the text after the figure does not quote {} from `{text}`",
                    missing.join(", ")
                )
            })
        }
    }
}

/// The length of the number `text` starts with: digits, and a `.` or `,` only
/// between digits.
fn number_len(text: &str) -> usize {
    let chars: Vec<char> = text.chars().collect();
    let mut len = 0;
    while len < chars.len() {
        let c = chars[len];
        let joins = (c == '.' || c == ',')
            && len > 0
            && chars.get(len + 1).is_some_and(|d| d.is_ascii_digit());
        if !(c.is_ascii_digit() || joins) {
            break;
        }
        len += 1;
    }
    len
}

/// The piece of `printed` that `text` stands for once its numbers may differ: the
/// same words, other numbers.
fn find_again(text: &str, printed: &str) -> Option<String> {
    // The text as words and number slots.
    let mut parts: Vec<(bool, String)> = Vec::new();
    let squashed: Vec<char> = squash(text).chars().collect();
    for (i, &c) in squashed.iter().enumerate() {
        let joins =
            (c == ',' || c == '.') && squashed.get(i + 1).is_some_and(|d| d.is_ascii_digit());
        let number = c.is_ascii_digit();
        match parts.last_mut() {
            Some((n, s)) if *n == number || (*n && joins) => s.push(c),
            _ => parts.push((number, c.to_string())),
        }
    }
    for line in printed.lines().map(squash) {
        for start in 0..line.len() {
            if !line.is_char_boundary(start) {
                continue;
            }
            let mut at = start;
            let mut ok = true;
            for (number, s) in &parts {
                let rest = &line[at..];
                if *number {
                    let len = number_len(rest);
                    if len == 0 {
                        ok = false;
                        break;
                    }
                    at += len;
                } else if let Some(r) = rest.strip_prefix(s.as_str()) {
                    at = line.len() - r.len();
                } else {
                    ok = false;
                    break;
                }
            }
            if ok {
                return Some(line[start..at].to_string());
            }
        }
    }
    None
}

/// `line` with each whole number that is an old figure of `pairs`, going on as it
/// does ([`Quote::goes_on_as`]), replaced by the new one, all in one pass (so that `225.2 → 102.3` and
/// `102.3 → 99.9` do not chain). Another number that happens to be equal is left.
fn renumber(line: &str, pairs: &[(Quote, Quote)]) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let before = rest[..start].chars().next_back();
        out.push_str(&rest[..start]);
        let len = number_len(&rest[start..]);
        let number = &rest[start..start + len];
        let after = &rest[start + len..];
        // A number right after a `.` or `,` is the tail of a longer one.
        let whole = !matches!(before, Some('.' | ','))
            || !out[..out.len() - 1].ends_with(|c: char| c.is_ascii_digit());
        let old = |quote: &Quote| quote.number == number && quote.goes_on_as(after);
        match pairs.iter().find(|(quote, _)| old(quote)) {
            Some((_, new)) if whole => out.push_str(&new.number),
            _ => out.push_str(number),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `readme` with `figure` rewritten from `printed`.
fn rewrite(readme: &str, figure: &Figure, printed: &str) -> String {
    let mut lines: Vec<String> = readme.lines().map(str::to_string).collect();
    match &figure.kind {
        Kind::Block { start, end } => {
            // Only a block that differs beyond its elapsed times: no churn.
            let old: Vec<String> = lines[*start..*end].iter().map(|l| mask(l)).collect();
            if old != masked(printed) {
                lines.splice(*start..*end, printed.lines().map(str::to_string));
            }
        }
        Kind::Piece { text, quoted } => {
            let Some(new) = find_again(text, printed) else {
                return readme.to_string();
            };
            lines[figure.line] = lines[figure.line].replace(text.as_str(), &new);
            // A number the paragraph quotes more than once (a table's rows) is left for
            // a person: which one is this figure's cannot be told.
            let prose = quoted_text(
                &lines.iter().map(String::as_str).collect::<Vec<_>>(),
                *quoted,
            );
            let pairs: Vec<(Quote, Quote)> = numbers(text)
                .into_iter()
                .zip(numbers(&new))
                .filter(|(old, new)| old != new && old.times_in(&prose) == 1)
                .collect();
            for line in lines[*quoted..]
                .iter_mut()
                .take_while(|l| !l.trim().is_empty())
            {
                *line = renumber(line, &pairs);
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// The pages whose figures are checked: the README and its chapters under `docs/`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    pages.extend(chapters);
    pages
}

/// Checks (or, with `LEASEHOLD_README_WRITE=1`, rewrites) the figures whose slowness
/// is `slow`, on every page.
fn check_figures(slow: bool) {
    let write = std::env::var_os("LEASEHOLD_README_WRITE").is_some();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for path in pages() {
        let name = path
            .strip_prefix(root())
            .unwrap_or(&path)
            .display()
            .to_string();
        let mut page = std::fs::read_to_string(&path).expect("a page");
        let count = figures(&page).expect("the markers parse").len();
        // Figure by figure, parsing again after each rewrite: a block's length may change.
        for index in 0..count {
            let all = figures(&page).expect("the markers parse");
            let figure = &all[index];
            if figure.slow != slow {
                continue;
            }
            checked += 1;
            let printed = output(&figure.args);
            if write {
                let new = rewrite(&page, figure, &printed);
                if new != page {
                    page = new;
                    std::fs::write(&path, &page).expect("the page is writable");
                }
                continue;
            }
            let lines: Vec<&str> = page.lines().collect();
            wrong.extend(
                judge(&lines, figure, &printed)
                    .into_iter()
                    .map(|w| format!("{name}: {w}")),
            );
        }
    }
    assert!(checked > 0, "no figure is marked");
    assert!(
        wrong.is_empty(),
        "figures that no longer match (scripts/readme-figures rewrites them):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_readmes_quick_figures_are_what_their_commands_print() {
    check_figures(false);
}

/// The figures of checks that take tens of seconds (`check items` at its defaults).
#[test]
#[ignore]
fn the_readmes_slow_figures_are_what_their_commands_print() {
    check_figures(true);
}

const SAMPLE: &str = "\
Intro.

<!-- figure: sim queue-poison => RU / consumer / min (est.) -->
Costs 461 RU.

<!-- figure: balance --strategy cfp --host host-c --leases samples/cfp-leases.json --now 2026-11-21T12:00:00Z -->
```text
{}
```
";

#[test]
fn a_figure_that_drifted_from_its_command_is_caught() {
    let lines: Vec<&str> = SAMPLE.lines().collect();
    let found = figures(SAMPLE).unwrap();
    assert_eq!(found.len(), 2);
    // The prose quotes 461; the command prints another figure.
    let printed = "RU / consumer / min (est.)                  228\n";
    let drifted = Figure {
        kind: Kind::Piece {
            text: "RU / consumer / min (est.)                  461".into(),
            quoted: 3,
        },
        ..figures(SAMPLE).unwrap().remove(0)
    };
    let why = judge(&lines, &drifted, printed).expect("caught");
    assert!(why.contains("no longer prints"), "{why}");
    // The command agrees with the marker, but the prose quotes another number.
    let stale_prose = Figure {
        kind: Kind::Piece {
            text: "RU / consumer / min (est.)                  228".into(),
            quoted: 3,
        },
        ..figures(SAMPLE).unwrap().remove(0)
    };
    let why = judge(&lines, &stale_prose, printed).expect("caught");
    assert!(why.contains("does not quote 228"), "{why}");
    // A block that is not what the command prints.
    let why = judge(&lines, &found[1], "{\"take\":[]}\n").expect("caught");
    assert!(why.contains("another block"), "{why}");
    // And the rewrite makes each agree.
    let fixed = rewrite(SAMPLE, &drifted, printed);
    assert!(fixed.contains("Costs 228 RU."), "{fixed}");
    let fixed = rewrite(SAMPLE, &found[1], "{\"take\":[]}\n");
    let again = figures(&fixed).unwrap();
    let lines: Vec<&str> = fixed.lines().collect();
    assert_eq!(judge(&lines, &again[1], "{\"take\":[]}\n"), None);
}

#[test]
fn elapsed_times_are_masked_and_nothing_else() {
    assert_eq!(
        mask("142,736 states, 112,888 unique, depth 32, 1.1 s: complete"),
        "142,736 states, 112,888 unique, depth 32, … s: complete"
    );
    assert_eq!(mask("wall time (s)   0.28   0.26"), "wall time …");
    assert_eq!(mask("max latency (s)   8.8"), "max latency (s)   8.8");
}

#[test]
fn a_marker_without_its_block_is_refused() {
    let err = figures("<!-- figure: check queue -->\nprose\n").unwrap_err();
    assert!(err.contains("fenced block"), "{err}");
    assert!(figures("<!-- figure check queue -->\n").is_err());
}

#[test]
fn a_number_inside_a_longer_one_does_not_count_as_quoted() {
    assert!(stands_in("costs 228 RU", "228"));
    assert!(!stands_in("costs 2280 RU", "228"));
    assert!(!stands_in("costs 228.5 RU", "228"));
    assert!(!stands_in("costs 1,228 RU", "228"));
    assert!(!stands_in("costs 0.228 RU", "228"));
    assert!(stands_in("costs 228.", "228"));
    // The output side too: `30` is not printed where `300` is.
    assert!(!contains_bounded(
        "dead-lettered (poison) 300",
        "dead-lettered (poison) 30"
    ));
}

#[test]
fn a_rewrite_finds_its_piece_again_and_renumbers_only_whole_figures() {
    let text = r#"{"skipped":0,"take":[{"lease":"4"}]}"#;
    let printed = r#"{"skipped":2,"take":[{"lease":"7"}]}"#;
    assert_eq!(find_again(text, printed).as_deref(), Some(printed));
    let pairs = |text: &str, new: &str| {
        numbers(text)
            .into_iter()
            .zip(numbers(new))
            .collect::<Vec<_>>()
    };
    let bare = pairs("225.2, 102.3", "102.3, 99.9");
    assert_eq!(
        renumber("102.3 against 225.2, not 1225.2 or 3.102.3", &bare),
        "99.9 against 102.3, not 1225.2 or 3.102.3"
    );
    // A figure's number with its word: a like number with another word is not it.
    let steps = pairs("(17 steps)", "(9 steps)");
    assert_eq!(
        renumber(
            "17 steps, while a message waited 17 s over 17 stepsons",
            &steps
        ),
        "9 steps, while a message waited 17 s over 17 stepsons"
    );
}

#[test]
fn the_prose_quotes_a_figures_number_with_its_word() {
    let quotes = numbers(r#"never partial or mixed" (5 steps), 1,687 states in 0.1 s"#);
    let texts: Vec<String> = quotes.iter().map(Quote::text).collect();
    assert_eq!(texts, ["5 steps", "1,687 states", "0.1 s"]);
    assert!(!quotes[0].stands_in("found after 5 messages"));
    assert!(quotes[0].stands_in("found in 5 steps"));
    assert!(quotes[1].stands_in("| 1,687 (1,552) |"));
    assert!(!quotes[1].stands_in("21,687 states"));
    assert_eq!(texts[0], "5 steps");
}

#[test]
fn a_marker_almost_right_is_refused_not_skipped() {
    for marker in [
        "<!--figure: check queue -->",
        "<!-- Figure: check queue -->",
    ] {
        assert!(figures(marker).is_err(), "{marker}");
    }
}
