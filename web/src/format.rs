//! How the dashboard writes numbers, sizes, times and escaped text.

/// Escapes text for HTML and SVG (element content and quoted attributes).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Days since 1970-01-01 as (year, month, day) in the proleptic Gregorian calendar.
fn civil(days: i64) -> (i64, i64, i64) {
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `HH:MM` (UTC) of a time in milliseconds since the Unix epoch.
pub fn clock(ms: i64) -> String {
    let minutes = ms.div_euclid(60_000);
    let m = minutes.rem_euclid(60);
    let h = minutes.div_euclid(60).rem_euclid(24);
    format!("{h:02}:{m:02}")
}

/// `M:SS` (or `H:MM:SS` from an hour) of a duration in milliseconds.
pub fn elapsed(ms: i64) -> String {
    let secs = ms.max(0) / 1000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// `YYYY-MM-DD HH:MM:SS UTC` of a time in milliseconds since the Unix epoch.
pub fn datetime(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Milliseconds with a precision that suits their size.
pub fn millis(ms: f64) -> String {
    if !ms.is_finite() {
        "–".into()
    } else if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

/// A fraction in [0, 1] as a percentage.
pub fn percent(f: f64) -> String {
    if !f.is_finite() {
        return "–".into();
    }
    let p = f * 100.0;
    if p == 100.0 || p == 0.0 {
        format!("{p:.0} %")
    } else {
        format!("{p:.1} %")
    }
}

/// An accuracy in [0, 1] with four decimals (as the zoo documents them).
pub fn accuracy(a: f64) -> String {
    format!("{a:.4}")
}

/// Bytes in binary units.
pub fn bytes(n: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v.abs() >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A cost in dollars; small amounts keep their significant digits.
pub fn dollars(c: f64) -> String {
    if !c.is_finite() {
        "–".into()
    } else if c == 0.0 {
        "$0".into()
    } else if c.abs() >= 1.0 {
        format!("${c:.2}")
    } else if c.abs() >= 1e-4 {
        // Four significant digits.
        let digits = (3 - c.abs().log10().floor() as i32).clamp(0, 8) as usize;
        format!("${c:.digits$}")
    } else {
        // A single query costs a tiny fraction of a cent.
        format!("${c:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn times_are_utc() {
        assert_eq!(clock(0), "00:00");
        assert_eq!(clock((13 * 60 + 7) * 60_000 + 59_999), "13:07");
        assert_eq!(datetime(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(elapsed(0), "0:00");
        assert_eq!(elapsed(291_999), "4:51");
        assert_eq!(elapsed((3600 + 61) * 1000), "1:01:01");
        // 2024-02-29 12:34:56 UTC (a leap day).
        assert_eq!(datetime(1_709_210_096_000), "2024-02-29 12:34:56 UTC");
    }

    #[test]
    fn numbers() {
        assert_eq!(millis(0.0123), "0.012 ms");
        assert_eq!(millis(4.5678), "4.57 ms");
        assert_eq!(millis(250.4), "250 ms");
        assert_eq!(percent(1.0), "100 %");
        assert_eq!(percent(0.9704), "97.0 %");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
        assert_eq!(dollars(0.0), "$0");
        assert_eq!(dollars(12.345), "$12.35");
        assert_eq!(dollars(0.0123), "$0.01230");
        assert_eq!(dollars(0.0000123), "$1.230e-5");
    }
}
