//! The units of the attribute's values: durations (`"10s"`) and rates (`"20/min"`).

/// A duration in whole milliseconds, as `timeout` and the retry delays give it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct Millis(pub(crate) u64);

/// A number of calls per period, as `rate_limit` gives it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Rate {
    pub(crate) calls: u32,
    pub(crate) per: Millis,
}

/// The units of a duration, with the words people write for them.
const UNITS: &[(&str, u64, &[&str])] = &[
    (
        "ms",
        1,
        &["msec", "msecs", "millis", "millisecond", "milliseconds"],
    ),
    ("s", 1_000, &["sec", "secs", "second", "seconds"]),
    ("min", 60_000, &["m", "mins", "minute", "minutes"]),
    ("h", 3_600_000, &["hr", "hrs", "hour", "hours"]),
];

/// A bare number in place of a duration gets the unit most likely meant.
pub(crate) fn with_seconds(text: &str) -> String {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        format!("{text}s")
    } else {
        text.to_owned()
    }
}

/// A bare number in place of an approval's wait gets hours, the unit most likely meant.
pub(crate) fn with_hours(text: &str) -> String {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        format!("{text}h")
    } else {
        text.to_owned()
    }
}

/// How long an approval may wait for a decision: a duration as [`parse_duration`] reads it,
/// with the advice for a missing unit or a zero given in the hours and minutes an approval waits.
pub(crate) fn parse_approval_ttl(text: &str) -> Result<Millis, String> {
    let help = "give a person time to decide, such as `\"24h\"` or `\"30min\"`";
    if let Ok(count) = text.parse::<u64>()
        && count > 0
    {
        return Err(format!(
            "`{text}` has no unit: write `\"{count}h\"` or `\"{count}min\"`; the units are ms, s, min and h"
        ));
    }
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let zero = digits.parse::<u64>() == Ok(0)
        && (unit.is_empty() || UNITS.iter().any(|(name, ..)| *name == unit));
    if zero {
        return Err(format!(
            "an approval that expires at once could never be decided: {help}"
        ));
    }
    parse_duration(text)
}

/// The duration `"500ms"`, `"10s"`, `"2min"` or `"1h"`.
pub(crate) fn parse_duration(text: &str) -> Result<Millis, String> {
    let help = "write a whole number and a unit: `\"500ms\"`, `\"10s\"`, `\"2min\"` or `\"1h\"`";
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let Ok(count) = digits.parse::<u64>() else {
        return Err(format!("`{text}` is not a duration; {help}"));
    };
    if unit.is_empty() {
        return Err(format!(
            "`{text}` has no unit: write `\"{count}s\"` or `\"{count}ms\"`"
        ));
    }
    let Some(&(_, factor, _)) = UNITS.iter().find(|(name, ..)| *name == unit) else {
        let meant = UNITS
            .iter()
            .find(|(name, _, words)| {
                *name == unit.trim() || words.contains(&unit.trim().to_lowercase().as_str())
            })
            .map(|(name, ..)| *name);
        return Err(match meant {
            Some(name) => format!(
                "`{}` is not a unit of time here: write `\"{count}{name}\"`; the units are ms, s, min and h",
                unit.trim()
            ),
            None => format!("`{unit}` is not a unit of time; {help}"),
        });
    };
    match count.checked_mul(factor) {
        Some(0) => Err(format!(
            "a duration of zero never lets the call run; {help}"
        )),
        Some(ms) => Ok(Millis(ms)),
        None => Err(format!("`{text}` is too long a duration; {help}")),
    }
}

/// The rate `"5/s"`, `"20/min"` or `"1000/h"`.
pub(crate) fn parse_rate(text: &str) -> Result<Rate, String> {
    let help = "write calls per period: `\"5/s\"`, `\"20/min\"` or `\"1000/h\"`";
    let Some((count, unit)) = text.split_once('/') else {
        return Err(format!("`{text}` is not a rate; {help}"));
    };
    let Ok(calls) = count.trim().parse::<u32>() else {
        return Err(format!(
            "`{text}` is not a rate: the number of calls is a whole number; {help}"
        ));
    };
    if calls == 0 {
        return Err(format!(
            "a rate of zero calls never lets a call through; {help}"
        ));
    }
    let unit = unit.trim();
    let per = match unit {
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        _ => {
            let meant = UNITS
                .iter()
                .filter(|(name, ..)| *name != "ms")
                .find(|(_, _, words)| words.contains(&unit.to_lowercase().as_str()))
                .map(|(name, ..)| *name);
            return Err(match meant {
                Some(name) => format!(
                    "`{unit}` is not a period here: write `\"{calls}/{name}\"`; the periods are s, min and h"
                ),
                None => format!("`{unit}` is not a period; {help}"),
            });
        }
    };
    Ok(Rate {
        calls,
        per: Millis(per),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Millis(10_000)));
        assert_eq!(parse_duration("2min"), Ok(Millis(120_000)));
        assert_eq!(parse_duration("1h"), Ok(Millis(3_600_000)));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10 s").unwrap_err().contains("not a unit"));
        assert!(parse_duration("10sec").unwrap_err().contains("\"10s\""));
        assert!(
            parse_duration("10parsecs")
                .unwrap_err()
                .contains("not a unit")
        );
        assert!(parse_duration("0s").unwrap_err().contains("zero"));
        assert!(parse_duration("s").unwrap_err().contains("not a duration"));
    }

    #[test]
    fn approval_ttls() {
        assert_eq!(parse_approval_ttl("24h"), Ok(Millis(86_400_000)));
        assert_eq!(parse_approval_ttl("30min"), Ok(Millis(1_800_000)));
        let no_unit = parse_approval_ttl("24").unwrap_err();
        assert!(
            no_unit.contains("no unit") && no_unit.contains("\"24h\""),
            "{no_unit}"
        );
        let zero = parse_approval_ttl("0h").unwrap_err();
        assert!(zero.contains("expires at once"), "{zero}");
        assert!(parse_approval_ttl("0").unwrap_err().contains("at once"));
        assert!(
            parse_approval_ttl("2days")
                .unwrap_err()
                .contains("not a unit")
        );
        assert!(
            parse_approval_ttl("10hours")
                .unwrap_err()
                .contains("\"10h\"")
        );
        assert_eq!(with_hours("24"), "24h");
        assert_eq!(with_hours("24h"), "24h");
    }

    #[test]
    fn rates() {
        let rate = |calls, per| {
            Ok(Rate {
                calls,
                per: Millis(per),
            })
        };
        assert_eq!(parse_rate("5/s"), rate(5, 1_000));
        assert_eq!(parse_rate("20 / min"), rate(20, 60_000));
        assert!(parse_rate("20/minute").unwrap_err().contains("\"20/min\""));
        assert!(parse_rate("0/s").unwrap_err().contains("zero"));
        assert!(parse_rate("20").unwrap_err().contains("not a rate"));
        assert!(
            parse_rate("20/fortnight")
                .unwrap_err()
                .contains("not a period")
        );
    }

    #[test]
    fn a_bare_number_is_read_as_seconds() {
        assert_eq!(with_seconds("10"), "10s");
        assert_eq!(with_seconds("10ms"), "10ms");
    }
}
