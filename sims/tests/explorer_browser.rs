//! `leasehold explore` in a real browser: the Explorer is served on a free loopback
//! port and loaded in headless Chromium, and the rendered page must show the state
//! list, the domain view and the sequence diagram.
//!
//! Without a Chromium on the machine the test says so and is skipped; `.ci/run`
//! installs one and sets `LEASEHOLD_REQUIRE_BROWSER=1`, so that in CI a missing
//! browser fails instead.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the Explorer when the test ends, however it ends.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chromium() -> Option<String> {
    if let Ok(path) = std::env::var("LEASEHOLD_CHROMIUM") {
        return Some(path);
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(str::to_string)
}

/// The browser, or `None` after saying why the test is skipped.
fn browser_or_skip(test: &str) -> Option<String> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var_os("LEASEHOLD_REQUIRE_BROWSER").is_none(),
            "LEASEHOLD_REQUIRE_BROWSER is set but no chromium was found"
        );
        // Straight to stderr: the harness would capture `eprintln!` from a passing
        // test, and a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: no chromium on this machine (install Debian's `chromium`)"
        );
    }
    found
}

fn serve(target: &str) -> (Served, SocketAddr) {
    // Ask the system for a free port; the Explorer binds it again at once.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(["explore", target, "--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("leasehold starts");
    let mut served = Served(child);
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let start = Instant::now();
    while TcpStream::connect(address).is_err() {
        if let Ok(Some(status)) = served.0.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = served.0.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("the Explorer exited with {status}: {err}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the Explorer did not listen on {address}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (served, address)
}

/// The DOM of `url` once the page's scripts have run.
fn rendered(browser: &str, url: &str) -> String {
    // One profile per page: tests run in parallel, and two browsers cannot share one.
    let page: String = url.chars().filter(char::is_ascii_digit).collect();
    let profile =
        std::env::temp_dir().join(format!("leasehold-chromium-{}-{page}", std::process::id()));
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=15000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut out = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        let _ = out.read_to_string(&mut dom);
        dom
    });
    let start = Instant::now();
    while child.try_wait().expect("chromium runs").is_none() {
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish loading {url} in 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(&profile);
    reader.join().expect("the reader ends")
}

/// The text between `start` and the next `end`, after `from`.
fn section<'a>(dom: &'a str, from: &str, end: &str) -> &'a str {
    let at = dom
        .find(from)
        .unwrap_or_else(|| panic!("no {from:?} in the page"));
    let rest = &dom[at..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

/// What the Explorer page shows once the first initial state's first step is
/// selected: the state list, the sequence diagram and the current state.
struct Page {
    choices: String,
    svg: String,
    state: String,
}

/// `leasehold explore TARGET` at `/#/steps/0/0`, or `None` when the test is skipped.
fn first_step(target: &str, test: &str) -> Option<Page> {
    let browser = browser_or_skip(test)?;
    let (_served, address) = serve(target);
    let dom = rendered(&browser, &format!("http://{address}/#/steps/0/0"));
    Some(Page {
        choices: section(&dom, "Next Action Choices", "</ul>").to_string(),
        svg: section(&dom, "<svg", "</svg>").to_string(),
        state: section(&dom, "main-flex-right", "</section>").to_string(),
    })
}

/// The value of attribute `name` in `tag`, quoted either way (the browser's DOM
/// writes double quotes where the model wrote single ones).
fn attr(tag: &str, name: &str) -> Option<String> {
    ['"', '\''].into_iter().find_map(|q| {
        let at = tag.find(&format!(" {name}={q}"))? + name.len() + 3;
        Some(tag[at..at + tag[at..].find(q)?].to_string())
    })
}

/// The diagram as the browser shows it fits its longest label (at a monospace
/// advance of 0.6 em of its 11 px font) and carries its own white background, so its
/// black ink reads on the dark theme too (black on `#142b46` was about 1.5:1).
fn assert_legible(svg: &str) {
    let head = &svg[..svg.find('>').expect("an svg tag")];
    let width: f64 = attr(head, "width")
        .and_then(|w| w.parse().ok())
        .expect("a width");
    assert!(
        svg.contains("fill=\"white\"") || svg.contains("fill='white'"),
        "no background of its own: {svg}"
    );
    for piece in svg.split("<text").skip(1) {
        let (tag, rest) = piece.split_once('>').expect("a text tag");
        let text = rest.split("</text>").next().unwrap_or_default();
        let chars = text
            .replace("&gt;", ">")
            .replace("&lt;", "<")
            .replace("&amp;", "&");
        let x: f64 = attr(tag, "x").and_then(|x| x.parse().ok()).expect("an x");
        let advance = chars.chars().count() as f64 * 6.6;
        let right = if tag.contains("middle") {
            x + advance / 2.0
        } else {
            x + advance
        };
        assert!(right <= width, "{text:?} reaches {right} px of {width}");
    }
}

#[test]
fn the_partition_explorer_renders_states_view_and_sequence_diagram() {
    // The first initial state, then its first step: h0's timers fire.
    let Some(Page {
        choices,
        svg,
        state,
    }) = first_step("partitions", "the_partition_explorer_renders")
    else {
        return;
    };
    assert!(choices.contains("timers fire"), "state list: {choices}");
    for lane in [">h0<", ">h1<", ">store<", "timers fire"] {
        assert!(
            svg.contains(lane),
            "no {lane} in the sequence diagram: {svg}"
        );
    }
    assert!(
        state.contains("lease 0: owner h0, e1"),
        "the domain view: {state}"
    );
    assert!(
        !state.contains("LeaseHost {"),
        "the engine dump shows: {state}"
    );
    assert_legible(&svg);
}

#[test]
fn the_queue_explorer_renders_in_the_domains_words() {
    let Some(Page {
        choices,
        svg,
        state,
    }) = first_step("queue", "the_queue_explorer_renders")
    else {
        return;
    };
    assert!(choices.contains("polls: dequeue"), "state list: {choices}");
    assert!(svg.contains(">c0<") && svg.contains(">store<"), "{svg}");
    assert!(state.contains("message q:m0: locked by c0"), "{state}");
    assert_legible(&svg);
}
