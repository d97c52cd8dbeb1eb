//! Figures in prose (`$3.1M`, `124%`, `$5,500`, `5.5 months`), read as values so a memo's
//! `$3.1 million` matches a source's `$3.1M`.

/// What a figure measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Written with `$`.
    Money,
    /// Written with `%`.
    Percent,
    /// Anything else.
    Count,
}

/// One figure as written and as a value.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// As written, e.g. `$3.1M`.
    pub text: String,
    /// Its kind.
    pub kind: Kind,
    /// Its value, multipliers applied (`$3.1M` is 3,100,000).
    pub value: f64,
}

impl Figure {
    /// True when both are the same kind and within half a percent of each other.
    pub fn same(&self, other: &Figure) -> bool {
        self.kind == other.kind
            && (self.value - other.value).abs() <= 0.005 * self.value.abs().max(other.value.abs())
    }

    /// A plain integer from 1900 to 2100: a year, not a figure to check.
    fn is_year(&self) -> bool {
        self.kind == Kind::Count
            && self.value.fract() == 0.0
            && (1900.0..=2100.0).contains(&self.value)
            && !self.text.contains(',')
    }
}

/// Every figure in `text`, years left out. Numbers glued to letters (`Q3`, `E12`, `v2`) are
/// labels, not figures; web addresses are skipped.
pub fn figures(text: &str) -> Vec<Figure> {
    let text = without_urls(text);
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let dollar = chars[i] == '$' && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit());
        let starts_number = chars[i].is_ascii_digit()
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || matches!(chars[i - 1], '.' | '^')));
        if !dollar && !starts_number {
            i += 1;
            continue;
        }
        let start = i;
        if dollar {
            i += 1;
        }
        let mut digits = String::new();
        while i < chars.len() {
            let c = chars[i];
            let next_digit = chars.get(i + 1).is_some_and(|c| c.is_ascii_digit());
            if c.is_ascii_digit() || ((c == ',' || c == '.') && next_digit) {
                if c != ',' {
                    digits.push(c);
                }
                i += 1;
            } else {
                break;
            }
        }
        let Ok(mut value) = digits.parse::<f64>() else {
            continue;
        };
        let rest: String = chars[i..].iter().take(10).collect();
        let (multiplier, used, percent) = suffix(&rest);
        value *= multiplier;
        i += used;
        // A number glued to letters that are not a known suffix is a label.
        if used == 0 && chars.get(i).is_some_and(|c| c.is_alphabetic()) {
            continue;
        }
        let kind = if percent {
            Kind::Percent
        } else if dollar {
            Kind::Money
        } else {
            Kind::Count
        };
        let figure = Figure {
            text: chars[start..i]
                .iter()
                .collect::<String>()
                .trim()
                .to_string(),
            kind,
            value,
        };
        if !figure.is_year() {
            out.push(figure);
        }
    }
    out
}

/// The multiplier a suffix means, the characters it takes, and whether it is `%`.
fn suffix(rest: &str) -> (f64, usize, bool) {
    let word_end = |s: &str, n: usize| {
        s.chars()
            .nth(n)
            .is_none_or(|c| !c.is_alphanumeric() || c == '.')
    };
    if rest.starts_with('%') {
        return (1.0, 1, true);
    }
    for (word, multiplier) in [
        (" million", 1e6),
        (" billion", 1e9),
        (" thousand", 1e3),
        ("bn", 1e9),
        ("M", 1e6),
        ("B", 1e9),
        ("K", 1e3),
        ("k", 1e3),
        ("m", 1e6),
    ] {
        let n = word.chars().count();
        if rest.starts_with(word) && word_end(rest, n) {
            return (multiplier, n, false);
        }
    }
    (1.0, 0, false)
}

/// `text` with every word holding a `/` (web addresses, file paths, dates like 9/30)
/// blanked out: their digits are not figures.
fn without_urls(text: &str) -> String {
    text.split_inclusive(char::is_whitespace)
        .map(|w| if w.contains('/') { " " } else { w })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<String> {
        figures(s).into_iter().map(|f| f.text).collect()
    }

    #[test]
    fn reads_money_percent_and_counts() {
        assert_eq!(
            texts("ARR at September 30, 2026: $3.1M, up 124% with 17 customers in Q3."),
            ["30", "$3.1M", "124%", "17"]
        );
        let a = &figures("$3.1 million")[0];
        let b = &figures("$3.1M.")[0];
        assert!(a.same(b), "{a:?} {b:?}");
        assert!(!figures("$410K")[0].same(&figures("410")[0]));
        assert_eq!(figures("$5,500 per site")[0].value, 5500.0);
        assert_eq!(
            texts("see https://x.example/2024/99 and [^12]"),
            Vec::<String>::new()
        );
        assert_eq!(texts("5.5 months, 2.1 GWh, 1x"), ["5.5", "2.1"]);
    }
}
