//! How durations are written: in prose one value at a time
//! ([`cpushield_cpuset::fmt_ns`]),
//! and in a table one unit per column ([`TimeColumn`]), so that the cells of a
//! column can be compared at a glance.

/// A ratio for humans with one decimal (`84.3`), `n/a` when unknown.
pub fn fmt_ratio(r: Option<f64>) -> String {
    r.map(|x| format!("{x:.1}")).unwrap_or_else(|| "n/a".into())
}

/// A unit of time a column is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl TimeUnit {
    /// Its symbol (`ns`, `us`, `ms`, `s`).
    pub fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }

    fn ns(self) -> u64 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }
}

/// Significant digits the smallest non-zero value of a column keeps.
const SMALLEST_DIGITS: i32 = 2;
/// Significant digits the largest value of a column keeps.
const LARGEST_DIGITS: i32 = 3;
/// Decimals a column never exceeds.
const MAX_DECIMALS: i32 = 3;

/// One column of durations: every cell in the same unit, with the same
/// decimals, so the decimal points line up and no cell reads "4177 ns"
/// beside "16 us".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeColumn {
    /// None for a column with no value: it names no unit.
    unit: Option<TimeUnit>,
    decimals: usize,
}

impl TimeColumn {
    /// The column for `values` (ns): the largest unit in which the largest
    /// value is at least 1, and the decimals that give the smallest non-zero
    /// value two significant digits and the largest three (at most three
    /// decimals; none in ns).
    pub fn fit(values: impl IntoIterator<Item = u64>) -> Self {
        let values: Vec<u64> = values.into_iter().collect();
        let Some(largest) = values.iter().copied().max() else {
            return TimeColumn {
                unit: None,
                decimals: 0,
            };
        };
        let unit = [TimeUnit::S, TimeUnit::Ms, TimeUnit::Us]
            .into_iter()
            .find(|u| largest >= u.ns())
            .unwrap_or(TimeUnit::Ns);
        // Decimals for `digits` significant digits of `v` in the unit.
        let needed = |v: u64, digits: i32| {
            let in_unit = v as f64 / unit.ns() as f64;
            digits - 1 - in_unit.log10().floor() as i32
        };
        let smallest = values.iter().copied().filter(|v| *v > 0).min();
        let decimals = match (unit, smallest) {
            (TimeUnit::Ns, _) | (_, None) => 0,
            (_, Some(smallest)) => needed(smallest, SMALLEST_DIGITS)
                .max(needed(largest, LARGEST_DIGITS))
                .clamp(0, MAX_DECIMALS) as usize,
        };
        TimeColumn {
            unit: Some(unit),
            decimals,
        }
    }

    /// The column for durations given in seconds (determinism runs).
    pub fn fit_secs(values: impl IntoIterator<Item = f64>) -> Self {
        Self::fit(values.into_iter().map(secs_to_ns))
    }

    /// The unit's symbol, for the column's header; `""` when the column
    /// has no value.
    pub fn unit(&self) -> &'static str {
        self.unit.map(TimeUnit::symbol).unwrap_or("")
    }

    /// `ns` as a number in the column's unit (`34.7`), for a header that names the unit.
    pub fn number(&self, ns: u64) -> String {
        let decimals = self.decimals;
        match self.unit.unwrap_or(TimeUnit::Ns) {
            TimeUnit::Ns => ns.to_string(),
            unit => format!("{:.decimals$}", ns as f64 / unit.ns() as f64),
        }
    }

    /// Seconds as a number in the column's unit.
    pub fn number_secs(&self, s: f64) -> String {
        self.number(secs_to_ns(s))
    }

    /// `ns` with the unit (`34.7 ms`), for a cell that names its unit.
    pub fn cell(&self, ns: u64) -> String {
        let unit = self.unit.unwrap_or(TimeUnit::Ns).symbol();
        format!("{} {unit}", self.number(ns))
    }
}

fn secs_to_ns(s: f64) -> u64 {
    (s.max(0.0) * 1e9).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(values: &[u64]) -> Vec<String> {
        let column = TimeColumn::fit(values.iter().copied());
        values.iter().map(|v| column.cell(*v)).collect()
    }

    #[test]
    fn a_column_of_maxima_is_written_in_the_unit_of_its_largest_value() {
        // A demo's maxima: 194 us, 34.7 ms, 786 us, 1051 us.
        assert_eq!(
            cells(&[194_000, 34_732_000, 786_000, 1_051_000]),
            ["0.19 ms", "34.73 ms", "0.79 ms", "1.05 ms"]
        );
    }

    #[test]
    fn nanoseconds_and_microseconds_never_share_a_column() {
        assert_eq!(
            cells(&[3_304, 3_513, 3_896, 0]),
            ["3.30 us", "3.51 us", "3.90 us", "0.00 us"]
        );
        assert_eq!(
            cells(&[18_400, 262_000, 50_100, 5_323]),
            ["18.4 us", "262.0 us", "50.1 us", "5.3 us"]
        );
        assert_eq!(cells(&[850, 12]), ["850 ns", "12 ns"]);
        // The largest keeps three digits: 11.8 ms, not 12 ms.
        assert_eq!(
            cells(&[11_830_000, 34_732_000, 33_510_000]),
            ["11.8 ms", "34.7 ms", "33.5 ms"]
        );
    }

    #[test]
    fn determinism_seconds_read_in_milliseconds() {
        let column = TimeColumn::fit_secs([0.2014, 0.2621, 0.4102]);
        assert_eq!(column.unit(), "ms");
        assert_eq!(column.number_secs(0.2014), "201");
        assert_eq!(column.number_secs(0.4102), "410");
    }

    #[test]
    fn a_column_spanning_many_decades_keeps_at_most_three_decimals() {
        assert_eq!(cells(&[30_000_000, 5_000]), ["30.000 ms", "0.005 ms"]);
        assert_eq!(cells(&[]), Vec::<String>::new());
        assert_eq!(
            TimeColumn::fit([]).unit(),
            "",
            "a column of no value names no unit"
        );
        assert_eq!(TimeColumn::fit([0, 0]).cell(0), "0 ns");
    }
}
