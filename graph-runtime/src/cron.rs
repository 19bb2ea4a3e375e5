//! Schedule specs: when a schedule fires, in UTC.
//!
//! - Five cron fields, `minute hour day-of-month month day-of-week`: each `*`, a number, a range `a-b`,
//!   a step `*/n` or `a-b/n`, or a comma-separated list of those; minutes 0–59, hours 0–23, days 1–31,
//!   months 1–12, weekdays 0–7 (0 and 7 are Sunday). As in cron, when both day fields are restricted a
//!   day matching either fires. `0 2 * * *` is every night at 02:00 UTC; `*/15 9-17 * * 1-5` every
//!   quarter hour of office hours on weekdays.
//! - `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly`, `@yearly` (`@annually`).
//! - `@every <n><unit>`, unit `s`, `m`, `h` or `d`: every multiple of the period since the Unix epoch
//!   (`@every 15m` fires at :00, :15, :30 and :45).
//!
//! ```
//! use graph_runtime::cron::Spec;
//! let nightly = Spec::parse("0 2 * * *").unwrap();
//! // 2026-12-01T12:00:00Z → 2026-12-02T02:00:00Z
//! assert_eq!(nightly.next_after(1_796_126_400_000), Some(1_796_176_800_000));
//! assert!(Spec::parse("61 * * * *").is_err());
//! ```

/// A parsed schedule spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec(Kind);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Every(u64),
    Cron(Box<Cron>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Cron {
    minutes: [bool; 60],
    hours: [bool; 24],
    days: [bool; 32],
    months: [bool; 13],
    weekdays: [bool; 7],
    days_restricted: bool,
    weekdays_restricted: bool,
}

/// A spec that does not parse: what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid schedule spec `{spec}`: {detail}")]
pub struct SpecError {
    /// The spec as given.
    pub spec: String,
    /// What is wrong.
    pub detail: String,
}

const MINUTE_MS: u64 = 60_000;
const DAY_MS: u64 = 86_400_000;

impl Spec {
    /// Parses `spec` (see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// [`SpecError`] naming the field and what is wrong with it.
    pub fn parse(spec: &str) -> Result<Spec, SpecError> {
        let err = |detail: String| SpecError { spec: spec.to_owned(), detail };
        let text = spec.trim();
        let cron = match text {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            _ => text,
        };
        if let Some(period) = cron.strip_prefix("@every") {
            let period = period.trim();
            let (n, unit) =
                period.split_at(period.find(|c: char| !c.is_ascii_digit()).unwrap_or(period.len()));
            let n: u64 = n
                .parse()
                .map_err(|_| err(format!("`@every` takes a count and a unit (`15m`), not `{period}`")))?;
            let unit_ms = match unit {
                "s" => 1_000,
                "m" => MINUTE_MS,
                "h" => 60 * MINUTE_MS,
                "d" => DAY_MS,
                other => return Err(err(format!("unknown unit `{other}` (s, m, h or d)"))),
            };
            if n == 0 {
                return Err(err("a period of zero".into()));
            }
            return Ok(Spec(Kind::Every(n.saturating_mul(unit_ms))));
        }
        if cron.starts_with('@') {
            return Err(err(format!("unknown shorthand `{cron}`")));
        }
        let fields: Vec<&str> = cron.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(err(format!(
                "{} fields; a cron spec has five (minute hour day month weekday)",
                fields.len()
            )));
        };
        let mut c = Cron {
            minutes: [false; 60],
            hours: [false; 24],
            days: [false; 32],
            months: [false; 13],
            weekdays: [false; 7],
            days_restricted: day != "*",
            weekdays_restricted: weekday != "*",
        };
        field(minute, "minute", 0, 59, &mut c.minutes).map_err(&err)?;
        field(hour, "hour", 0, 23, &mut c.hours).map_err(&err)?;
        field(day, "day of month", 1, 31, &mut c.days).map_err(&err)?;
        field(month, "month", 1, 12, &mut c.months).map_err(&err)?;
        let mut weekdays = [false; 8];
        field(weekday, "day of week", 0, 7, &mut weekdays).map_err(&err)?;
        for (d, on) in weekdays.iter().enumerate() {
            c.weekdays[d % 7] |= on;
        }
        // A spec no date matches (`0 0 31 2 *`) would never fire.
        if !(1..=12).any(|m| c.months[m] && (1..=days_in_month(2000, m as u32)).any(|d| c.days[d as usize]))
            && c.days_restricted
            && !c.weekdays_restricted
        {
            return Err(err("no date matches its day and month".into()));
        }
        Ok(Spec(Kind::Cron(Box::new(c))))
    }

    /// The first fire time strictly after `after_ms` (ms since the Unix epoch), or `None` when there
    /// is none in the next eight years.
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        match &self.0 {
            Kind::Every(p) => (after_ms / p).checked_add(1)?.checked_mul(*p),
            Kind::Cron(c) => {
                let start = (after_ms / MINUTE_MS + 1) * MINUTE_MS;
                let first_day = start / DAY_MS;
                for day in first_day..first_day + 8 * 366 {
                    let (y, m, d) = civil_from_days(day);
                    if !c.months[m as usize] || !c.day_matches(d, weekday(day), y, m) {
                        continue;
                    }
                    let from = if day == first_day { (start % DAY_MS) / MINUTE_MS } else { 0 };
                    for minute_of_day in from..1440 {
                        let (h, mi) = ((minute_of_day / 60) as usize, (minute_of_day % 60) as usize);
                        if c.hours[h] && c.minutes[mi] {
                            return Some(day * DAY_MS + minute_of_day * MINUTE_MS);
                        }
                    }
                }
                None
            }
        }
    }
}

impl Cron {
    fn day_matches(&self, day: u32, weekday: usize, _year: i64, _month: u32) -> bool {
        let by_day = self.days[day as usize];
        let by_weekday = self.weekdays[weekday];
        match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => by_day || by_weekday,
            (true, false) => by_day,
            (false, true) => by_weekday,
            (false, false) => true,
        }
    }
}

/// Sets `set[i]` for every value field `text` names, within `lo..=hi`.
fn field(text: &str, name: &str, lo: u32, hi: u32, set: &mut [bool]) -> Result<(), String> {
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 =
                    s.parse().map_err(|_| format!("the {name} field's step `{s}` is not a number"))?;
                if step == 0 {
                    return Err(format!("the {name} field has a step of zero"));
                }
                (r, step)
            }
            None => (part, 1),
        };
        let num = |s: &str| -> Result<u32, String> {
            let n: u32 = s.parse().map_err(|_| format!("the {name} field's `{s}` is not a number"))?;
            if n < lo || n > hi {
                return Err(format!("the {name} field's {n} is outside {lo}-{hi}"));
            }
            Ok(n)
        };
        let (a, b) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None if step > 1 => (num(r)?, hi),
                None => {
                    let n = num(r)?;
                    (n, n)
                }
            },
        };
        if a > b {
            return Err(format!("the {name} field's range {a}-{b} is backwards"));
        }
        for v in (a..=b).step_by(step as usize) {
            set[v as usize] = true;
        }
    }
    Ok(())
}

/// The day of the week of `days` since 1970-01-01 (a Thursday): 0 is Sunday.
fn weekday(days: u64) -> usize {
    ((days + 4) % 7) as usize
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// (year, month, day) of `days` since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (i64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `ms` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (what a fired run's id ends with).
pub fn utc(ms: u64) -> String {
    let (y, m, d) = civil_from_days(ms / DAY_MS);
    let s = (ms % DAY_MS) / 1000;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The times below were computed with `date -u -d @SECONDS`.
    #[test]
    fn cron_fields_fire_at_their_times() {
        // 2026-12-01T12:00:00Z is a Tuesday.
        let t = 1_796_126_400_000;
        assert_eq!(utc(t), "2026-12-01T12:00:00Z");
        let next = |spec: &str, after| utc(Spec::parse(spec).unwrap().next_after(after).unwrap());
        assert_eq!(next("0 2 * * *", t), "2026-12-02T02:00:00Z");
        assert_eq!(next("*/15 9-17 * * 1-5", t), "2026-12-01T12:15:00Z");
        assert_eq!(next("0 9 * * 0", t), "2026-12-06T09:00:00Z"); // the next Sunday
        assert_eq!(next("0 9 * * 7", t), "2026-12-06T09:00:00Z");
        assert_eq!(next("30 8 1 * *", t), "2027-01-01T08:30:00Z");
        assert_eq!(next("0 0 29 2 *", t), "2028-02-29T00:00:00Z"); // a leap day
        assert_eq!(next("0 12 13 * 5", t), "2026-12-04T12:00:00Z"); // the 13th or a Friday
        assert_eq!(next("@hourly", t), "2026-12-01T13:00:00Z");
        assert_eq!(next("@every 15m", t + 1), "2026-12-01T12:15:00Z");
        assert_eq!(next("@every 1d", t), "2026-12-02T00:00:00Z");
        // Strictly after: a fire time is not its own successor.
        assert_eq!(next("0 12 * * *", t), "2026-12-02T12:00:00Z");
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let err = |spec: &str| Spec::parse(spec).unwrap_err().detail;
        assert_eq!(err("0 2 * *"), "4 fields; a cron spec has five (minute hour day month weekday)");
        assert_eq!(err("60 * * * *"), "the minute field's 60 is outside 0-59");
        assert_eq!(err("* 5-2 * * *"), "the hour field's range 5-2 is backwards");
        assert_eq!(err("*/0 * * * *"), "the minute field has a step of zero");
        assert_eq!(err("0 0 31 2 *"), "no date matches its day and month");
        assert_eq!(err("@every 0m"), "a period of zero");
        assert_eq!(err("@every 5y"), "unknown unit `y` (s, m, h or d)");
        assert_eq!(err("@sometimes"), "unknown shorthand `@sometimes`");
        assert!(
            Spec::parse("x * * * *")
                .unwrap_err()
                .to_string()
                .starts_with("invalid schedule spec `x * * * *`")
        );
    }
}
