//! The host's memory, as the spawn budget sees it (issue 28 item 3): the derived default of
//! `max_in_progress` (the original's `derive_default_max_in_progress`: clamp(MemTotal / 512 MiB,
//! 2, 8)) and the pressure guard (the original's `_memory_pressure_level`: `critical` spawns
//! nothing, `elevated` at most one worker per tick). Readings come from files whose paths the
//! settings carry (`/proc/meminfo`, `/proc/pressure/memory` by default), so a test hands the
//! guard a reading by writing a file; an unreadable reading imposes nothing.

use std::path::{Path, PathBuf};

/// The footprint one worker is assumed to need when the cap is derived.
pub const MIB_PER_WORKER: u64 = 512;
/// The derived cap's bounds.
pub const DERIVED_FLOOR: u32 = 2;
pub const DERIVED_CEILING: u32 = 8;

/// `MemAvailable` thresholds (the original's): below 64 MiB or 5 % of `MemTotal` is critical,
/// below 128 MiB or 15 % elevated.
const CRITICAL_KIB: u64 = 64 * 1024;
const CRITICAL_FRACTION: f64 = 0.05;
const ELEVATED_KIB: u64 = 128 * 1024;
const ELEVATED_FRACTION: f64 = 0.15;
/// Pressure stall thresholds (kanban's; the original reads only `MemAvailable`): the share of
/// the last 10 s in which every task (`full`) / some task (`some`) waited for memory.
const PSI_CRITICAL_FULL_AVG10: f64 = 10.0;
const PSI_ELEVATED_SOME_AVG10: f64 = 10.0;

/// Where the readings come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemorySource {
    pub meminfo: PathBuf,
    pub pressure: PathBuf,
}

impl Default for MemorySource {
    fn default() -> Self {
        Self {
            meminfo: PathBuf::from("/proc/meminfo"),
            pressure: PathBuf::from("/proc/pressure/memory"),
        }
    }
}

/// One reading of the host's memory; `None` where a file or a field could not be read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemoryReading {
    pub total_kib: Option<u64>,
    pub available_kib: Option<u64>,
    /// `some avg10` and `full avg10` of the pressure file.
    pub psi_some_avg10: Option<f64>,
    pub psi_full_avg10: Option<f64>,
}

/// How pressed the host's memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pressure {
    Unknown,
    Ok,
    Elevated,
    Critical,
}

impl Pressure {
    pub fn as_str(self) -> &'static str {
        match self {
            Pressure::Unknown => "unknown",
            Pressure::Ok => "ok",
            Pressure::Elevated => "elevated",
            Pressure::Critical => "critical",
        }
    }
}

impl MemorySource {
    /// Reads both files; whatever cannot be read stays `None`.
    pub fn read(&self) -> MemoryReading {
        let mut r = MemoryReading::default();
        if let Ok(text) = std::fs::read_to_string(&self.meminfo) {
            r.total_kib = meminfo_field(&text, "MemTotal:");
            r.available_kib = meminfo_field(&text, "MemAvailable:");
        }
        if let Ok(text) = std::fs::read_to_string(&self.pressure) {
            r.psi_some_avg10 = psi_avg10(&text, "some");
            r.psi_full_avg10 = psi_avg10(&text, "full");
        }
        r
    }

    /// The source with `meminfo` / `pressure` replaced where given (relative to `root`).
    pub fn with_paths(root: &Path, meminfo: Option<&Path>, pressure: Option<&Path>) -> Self {
        let d = Self::default();
        Self {
            meminfo: meminfo.map_or(d.meminfo, |p| root.join(p)),
            pressure: pressure.map_or(d.pressure, |p| root.join(p)),
        }
    }
}

fn meminfo_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

fn psi_avg10(text: &str, line: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(line))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))
        .and_then(|v| v.parse().ok())
}

impl MemoryReading {
    /// The derived default of `max_in_progress`: clamp(MemTotal / 512 MiB, 2, 8); `None` (no
    /// cap) when the total is unknown.
    pub fn derived_max_in_progress(&self) -> Option<u32> {
        let total = self.total_kib.filter(|t| *t > 0)?;
        let workers = (total / 1024) / MIB_PER_WORKER;
        let workers = u32::try_from(workers).unwrap_or(u32::MAX);
        Some(workers.clamp(DERIVED_FLOOR, DERIVED_CEILING))
    }

    /// The pressure level: from the pressure stall file where it was read, else from
    /// `MemAvailable` against `MemTotal` (the original's thresholds); `Unknown` when neither.
    pub fn pressure(&self) -> Pressure {
        if let (Some(some), full) = (self.psi_some_avg10, self.psi_full_avg10) {
            if full.is_some_and(|f| f >= PSI_CRITICAL_FULL_AVG10) {
                return Pressure::Critical;
            }
            if some >= PSI_ELEVATED_SOME_AVG10 {
                return Pressure::Elevated;
            }
            return Pressure::Ok;
        }
        let Some(available) = self.available_kib else {
            return Pressure::Unknown;
        };
        // Counts of KiB are far below 2^52, so the conversion is exact.
        #[allow(clippy::cast_precision_loss)]
        let fraction = self
            .total_kib
            .filter(|t| *t > 0)
            .map(|t| available as f64 / t as f64);
        let below = |kib: u64, frac: f64| available < kib || fraction.is_some_and(|f| f < frac);
        if below(CRITICAL_KIB, CRITICAL_FRACTION) {
            Pressure::Critical
        } else if below(ELEVATED_KIB, ELEVATED_FRACTION) {
            Pressure::Elevated
        } else {
            Pressure::Ok
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kib(total_mib: u64, available_mib: u64) -> MemoryReading {
        MemoryReading {
            total_kib: Some(total_mib * 1024),
            available_kib: Some(available_mib * 1024),
            ..MemoryReading::default()
        }
    }

    #[test]
    fn derived_cap_is_clamped_memory_over_512_mib() {
        assert_eq!(kib(1024, 0).derived_max_in_progress(), Some(2));
        assert_eq!(kib(512, 0).derived_max_in_progress(), Some(2));
        assert_eq!(kib(3 * 1024, 0).derived_max_in_progress(), Some(6));
        assert_eq!(kib(4 * 1024, 0).derived_max_in_progress(), Some(8));
        assert_eq!(kib(64 * 1024, 0).derived_max_in_progress(), Some(8));
        assert_eq!(MemoryReading::default().derived_max_in_progress(), None);
    }

    #[test]
    fn available_memory_thresholds_are_the_original_s() {
        assert_eq!(kib(8192, 4096).pressure(), Pressure::Ok);
        assert_eq!(kib(8192, 1000).pressure(), Pressure::Elevated);
        assert_eq!(kib(8192, 300).pressure(), Pressure::Critical);
        assert_eq!(kib(1000, 100).pressure(), Pressure::Elevated);
        assert_eq!(kib(1000, 60).pressure(), Pressure::Critical);
        assert_eq!(MemoryReading::default().pressure(), Pressure::Unknown);
    }

    #[test]
    fn pressure_stall_file_wins_when_present() {
        let dir = tempfile::tempdir().unwrap();
        let meminfo = dir.path().join("meminfo");
        let psi = dir.path().join("psi");
        std::fs::write(&meminfo, "MemTotal: 8388608 kB\nMemAvailable: 100 kB\n").unwrap();
        std::fs::write(
            &psi,
            "some avg10=12.50 avg60=1.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        let source = MemorySource {
            meminfo: meminfo.clone(),
            pressure: psi.clone(),
        };
        assert_eq!(source.read().pressure(), Pressure::Elevated);
        std::fs::remove_file(&psi).unwrap();
        assert_eq!(source.read().pressure(), Pressure::Critical);
        assert_eq!(source.read().derived_max_in_progress(), Some(8));
    }
}
