//! CubeCL's per-kernel profiler, switched on for a whole process and read back.
//!
//! CubeCL 0.10 times every kernel launch when its profiling log level is set: each launch then
//! blocks until the kernel has run and its device time is measured (CUDA events; timestamp
//! queries or host time on wgpu). At the `full` level the log gets each launch as `| <duration> |
//! <kernel>: <settings> CubeCount (x, y, z)` (the settings are the kernel's comptime arguments,
//! often over many lines), and a summary table at each `sync`. The level is
//! part of CubeCL's global configuration, which is fixed the first time any runtime reads it, so
//! [`enable`] must run before the process touches a CubeCL device, and every later launch of the
//! process is timed (a profiled step is slower in wall time than an unprofiled one; the device
//! times are what it is for).
//!
//! [`launches`] reads the launches back (the summary tables are skipped); [`ends_in_summary`]
//! tells a log that holds everything launched before its last sync.

use cubecl::config::profiling::ProfilingLogLevel;
use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
use std::path::Path;
use std::time::Duration;

/// Why the profiler could not be switched on.
#[derive(Debug, thiserror::Error)]
#[error(
    "CubeCL's configuration was already read in this process, so its kernel profiler can no \
     longer be switched on (it must be, before the first use of a CubeCL device)"
)]
pub struct AlreadyConfigured;

/// Switches CubeCL's kernel profiler on for this process, logging every launch to `log`
/// (truncated first). Everything else in CubeCL's configuration keeps its defaults (a
/// `cubecl.toml` and the `CUBECL_*` variables are not read).
pub fn enable(log: &Path) -> Result<(), AlreadyConfigured> {
    let mut state = CubeClRuntimeConfig::storage().lock();
    if state.is_some() {
        return Err(AlreadyConfigured);
    }
    let mut config = CubeClRuntimeConfig::default();
    config.profiling.logger.level = ProfilingLogLevel::Full;
    config.profiling.logger.file = Some(log.to_path_buf());
    config.profiling.logger.append = false;
    *state = Some(std::sync::Arc::new(config));
    Ok(())
}

/// One timed kernel launch of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    /// The kernel's name as CubeCL gives it (its Rust path and generic arguments).
    pub kernel: String,
    /// The launch's grid as the log writes it (`(x, y, z)`; a grid sized on the device differs), where the
    /// line has it.
    pub cubes: Option<String>,
    /// Device time.
    pub time: Duration,
}

/// The launches of a profiler log (or of a piece of one cut at line ends), in launch order.
///
/// A launch is a line `| <duration> | <kernel>: <settings>`, the settings (Rust's pretty
/// `Debug`, often many lines) ending in `CubeCount (x, y, z)`. Other lines (the settings, the
/// summary tables of the syncs) are skipped.
pub fn launches(log: &str) -> Vec<Launch> {
    let mut out: Vec<Launch> = Vec::new();
    for line in log.lines() {
        let launch = line
            .strip_prefix("| ")
            .and_then(|rest| rest.split_once(" | "))
            .and_then(|(time, name)| Some((parse_duration(time.trim())?, name)));
        if let Some((time, name)) = launch {
            // `<kernel>: <settings>`; a kernel's name has no `: ` (its paths use `::`)
            let kernel = name.split_once(": ").map_or(name, |(k, _)| k);
            let (kernel, cubes) = match kernel.split_once(" CubeCount ") {
                Some((k, c)) => (k, Some(c.trim().to_string())),
                None => (kernel, cube_count(name)),
            };
            out.push(Launch {
                kernel: kernel.trim().to_string(),
                cubes,
                time,
            });
        } else if let Some(last) = out.last_mut().filter(|l| l.cubes.is_none()) {
            last.cubes = cube_count(line);
        }
    }
    out
}

/// Whether `tail` (the end of a log) ends with a sync's summary table: everything launched
/// before that sync is then in the log.
pub fn ends_in_summary(tail: &str) -> bool {
    tail.trim_end()
        .lines()
        .last()
        .is_some_and(|l| l.contains('⎯'))
}

/// The grid at the end of a launch's settings (`... CubeCount (x, y, z)`), if `line` has it.
fn cube_count(line: &str) -> Option<String> {
    line.rsplit_once("CubeCount ")
        .map(|(_, c)| c.trim().to_string())
}

/// The cubes of a grid as the log writes it (`(x, y, z)`, or `Static(x, y, z)`); `None` for a
/// grid sized on the device.
pub fn cube_total(grid: &str) -> Option<u64> {
    let inner = grid
        .strip_prefix("Static")
        .unwrap_or(grid)
        .strip_prefix('(')?
        .strip_suffix(')')?;
    inner
        .split(',')
        .map(|d| d.trim().parse::<u64>().ok())
        .try_fold(1u64, |acc, d| Some(acc.saturating_mul(d?)))
}

/// A duration as Rust's `Debug` writes it (`12ns`, `3.5µs`, `1.25ms`, `2.000001s`).
fn parse_duration(text: &str) -> Option<Duration> {
    let units: [(&str, f64); 5] = [
        ("ns", 1e-9),
        ("µs", 1e-6),
        ("us", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
    ];
    units.iter().find_map(|(unit, scale)| {
        let value: f64 = text.strip_suffix(unit)?.parse().ok()?;
        (value.is_finite() && value >= 0.0).then(|| Duration::from_secs_f64(value * scale))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a real `full`-level log (lavapipe): launches whose settings span lines or
    /// not, and a sync's summary table.
    const LOG: &str = "\
| 1.234ms    | cubecl_kernels::approx::im2col::kernel::Im2colKernel<R>: Im2colKernelInfo {
    w: Window {
        channels: 1,
    },
    grid_x: (),
} CubeCount (12, 3, 1)
| 850ns      | burn_cubecl::kernel::unary_float<f32, Relu>: Info { n: 1 } CubeCount (1, 1, 1)
|⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺⎺| 
| Name                  | Duration | Num Computed | Ratio |
|⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼⎼| 
| im2col                | 1.234ms  | 1            | 99 %  |
| Total                 | 1.235ms  | 2            | 100 % |
|⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯| 

| 2.5µs      | matmul_entry
";

    #[test]
    fn launches_are_read_across_lines_and_summary_tables_skipped() {
        let got = launches(LOG);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(
            got[0].kernel,
            "cubecl_kernels::approx::im2col::kernel::Im2colKernel<R>"
        );
        assert_eq!(got[0].cubes.as_deref(), Some("(12, 3, 1)"));
        assert_eq!(got[0].time, Duration::from_micros(1234));
        assert_eq!(got[1].kernel, "burn_cubecl::kernel::unary_float<f32, Relu>");
        assert_eq!(got[1].cubes.as_deref(), Some("(1, 1, 1)"));
        assert_eq!(got[1].time, Duration::from_nanos(850));
        assert_eq!(got[2].kernel, "matmul_entry");
        assert_eq!(got[2].cubes, None);
        assert_eq!(got[2].time, Duration::from_nanos(2500));
    }

    #[test]
    fn a_log_is_complete_when_it_ends_in_a_summary_table() {
        // a sync's summary ends with its rule, then an empty line
        assert!(ends_in_summary(LOG.split("\n| 2.5µs").next().unwrap()));
        assert!(ends_in_summary("| 1ms | k\n|⎯⎯⎯⎯| \n\n"));
        assert!(!ends_in_summary(LOG));
        assert!(!ends_in_summary("|⎯⎯⎯⎯| \n| 1ms | k: Info {\n"));
    }

    #[test]
    fn grids_count_their_cubes() {
        assert_eq!(cube_total("(12, 3, 1)"), Some(36));
        assert_eq!(cube_total("Static(4, 2, 2)"), Some(16));
        assert_eq!(cube_total("Dynamic(handle)"), None);
    }

    #[test]
    fn durations_in_every_unit_of_rusts_debug() {
        assert_eq!(parse_duration("12ns"), Some(Duration::from_nanos(12)));
        assert_eq!(parse_duration("3.5µs"), Some(Duration::from_nanos(3500)));
        assert_eq!(parse_duration("1.25ms"), Some(Duration::from_micros(1250)));
        assert_eq!(parse_duration("2.5s"), Some(Duration::from_millis(2500)));
        assert_eq!(parse_duration("Name"), None);
        assert_eq!(parse_duration("-1ms"), None);
    }
}
