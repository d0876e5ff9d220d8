//! A sequence diagram of a path for stateright's Explorer: one lifeline per host (or
//! client) and one for the store; requests and replies are arrows, time ticks are
//! rules. Every model draws through the same function, from what [`Explain`] tells.

use crate::trace::{Explain, Lane};
use std::fmt::Write;

const COLUMN: usize = 150;
const ROW: usize = 22;
/// The advance of one character of the diagram's 11 px monospace font, rounded up
/// (common monospace faces advance 0.6 em, 6.6 px): labels are measured by it, so
/// that the diagram is as wide as its longest label (a fixed width cut 4 of 14 off).
pub const CHAR_WIDTH: usize = 7;
/// Space kept right of the longest label.
const MARGIN: usize = 20;

/// An SVG sequence diagram of `path`.
pub fn sequence_diagram<M: Explain>(
    model: &M,
    path: stateright::Path<M::State, M::Action>,
) -> String {
    let steps: Vec<(M::State, Option<M::Action>)> = path.into_vec();
    let lanes = model.lanes();
    let store_x = 40 + lanes.len() * COLUMN;
    let host_x = |h: u8| 40 + usize::from(h) * COLUMN;
    let labels: Vec<String> = steps
        .windows(2)
        .filter_map(|w| {
            let action = w[0].1.as_ref()?;
            let mut texts = vec![model.format_action(action)];
            texts.extend(model.explain(&w[0].0, action).1);
            Some(texts)
        })
        .flatten()
        .collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let width = store_x + 10 + longest * CHAR_WIDTH + MARGIN;
    let height = 60 + labels.len() * ROW;
    let mut svg = String::new();
    // The diagram brings its own light background and black ink: on the Explorer's
    // dark theme (#142b46) black text and arrows had a contrast of about 1.5:1.
    let _ = write!(
        svg,
        "<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' \
         font-family='monospace' font-size='11' fill='black'>\
         <rect width='100%' height='100%' fill='white'/>\
         <defs><marker id='arrow' markerWidth='8' markerHeight='8' refX='8' refY='4' \
         orient='auto'><path d='M0,0 L8,4 L0,8 z'/></marker></defs>"
    );
    for (h, name) in lanes.iter().enumerate() {
        let x = 40 + h * COLUMN;
        let _ = write!(
            svg,
            "<text x='{x}' y='20' text-anchor='middle'>{}</text>\
             <line x1='{x}' y1='28' x2='{x}' y2='{height}' stroke='#767676'/>",
            xml_escape(name)
        );
    }
    let _ = write!(
        svg,
        "<text x='{store_x}' y='20' text-anchor='middle'>store</text>\
         <line x1='{store_x}' y1='28' x2='{store_x}' y2='{height}' stroke='#767676'/>"
    );
    let mut y = 45;
    for window in steps.windows(2) {
        let (before, Some(action)) = &window[0] else {
            continue;
        };
        let (_, journal) = model.explain(before, action);
        let lane = model.lane(action);
        let actor = match lane {
            Lane::Actor(h) | Lane::Crash(h) => Some(host_x(h)),
            Lane::Time => None,
        };
        match (lane, actor) {
            (Lane::Crash(_), Some(x)) => {
                let _ = write!(
                    svg,
                    "<text x='{x}' y='{}' text-anchor='middle' fill='red' font-size='16'>✕</text>",
                    y + 5
                );
            }
            (_, Some(x)) => {
                let _ = write!(svg, "<circle cx='{x}' cy='{y}' r='4' fill='steelblue'/>");
            }
            (_, None) => {
                let _ = write!(
                    svg,
                    "<line x1='20' y1='{y}' x2='{store_x}' y2='{y}' stroke='#767676' \
                     stroke-dasharray='4'/>"
                );
            }
        }
        let _ = write!(
            svg,
            "<text x='{}' y='{}' font-weight='bold'>{}</text>",
            store_x + 10,
            y + 4,
            xml_escape(&model.format_action(action))
        );
        for line in &journal {
            y += ROW;
            if let Some(x) = actor {
                let _ = write!(
                    svg,
                    "<line x1='{x}' y1='{y}' x2='{store_x}' y2='{y}' stroke='black' \
                     marker-end='url(#arrow)'/>"
                );
            }
            let _ = write!(
                svg,
                "<text x='{}' y='{}'>{}</text>",
                store_x + 10,
                y + 4,
                xml_escape(line)
            );
        }
        y += ROW;
    }
    svg.push_str("</svg>");
    svg
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
}
