//! `--svg`: the ownership timeline, partitions against time, coloured by owner, with
//! faults and membership changes marked.

use super::timeline::Timeline;
use plotters::prelude::*;
use std::path::Path;

/// Pixels beside the plot for the owners' legend.
const LEGEND_WIDTH: u32 = 160;

/// Draws `timeline` (of a run that ended at `end_ms`) to an SVG file at `path`.
pub fn draw(
    timeline: &Timeline,
    partitions: u32,
    end_ms: u64,
    title: &str,
    path: &Path,
) -> Result<(), String> {
    let rows = f64::from(partitions.max(1));
    let end = (end_ms as f64 / 1_000.0).max(1.0);
    let height = (200 + partitions.min(600) * 2).max(400);
    let root = SVGBackend::new(path, (1400, height)).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    // The legend gets a column of its own, so that it never covers the data.
    let (plot, legend) = root.split_horizontally(1400 - LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..end, 0f64..rows)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("true time (s)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("partition")
        .y_labels(partitions.clamp(1, 20) as usize + 1)
        // Partitions are whole numbers: a tick between two rows is left unlabelled.
        .y_label_formatter(&|y| {
            if y.fract() == 0.0 {
                format!("{}", *y as u64)
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(|e| fail(&e))?;
    let colour = |host: usize| Palette99::pick(host).mix(0.9);
    chart
        .draw_series(timeline.segments.iter().map(|s| {
            let p = f64::from(s.partition);
            Rectangle::new(
                [
                    (s.from as f64 / 1_000.0, p),
                    (s.to as f64 / 1_000.0, p + 0.9),
                ],
                colour(s.host).filled(),
            )
        }))
        .map_err(|e| fail(&e))?;
    chart
        .draw_series(timeline.marks.iter().map(|m| {
            let t = m.at as f64 / 1_000.0;
            PathElement::new(vec![(t, 0.0), (t, rows)], RED.mix(0.5).stroke_width(1))
        }))
        .map_err(|e| fail(&e))?;
    chart
        .draw_series(timeline.marks.iter().enumerate().map(|(i, m)| {
            let t = m.at as f64 / 1_000.0;
            // Stagger the labels so that marks close together stay readable.
            let y = rows * (0.98 - 0.04 * (i % 8) as f64);
            Text::new(
                m.label.clone(),
                (t, y),
                ("sans-serif", 11).into_font().color(&RED),
            )
        }))
        .map_err(|e| fail(&e))?;
    if timeline.names.len() <= 24 {
        for (host, name) in timeline.names.iter().enumerate() {
            let y = 48 + 20 * host as i32;
            legend
                .draw(&Rectangle::new(
                    [(8, y - 6), (20, y + 6)],
                    colour(host).filled(),
                ))
                .map_err(|e| fail(&e))?;
            legend
                .draw(&Text::new(name.clone(), (26, y - 7), ("sans-serif", 13)))
                .map_err(|e| fail(&e))?;
        }
    }
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}
