//! Progress lines: `backend::progress` (`parse`, `timestamped`, `unix_ns`, `Lines`).

use proptest::prelude::*;

use wasmsched::backend::progress::{self, Line, Lines, MAX_LINE};
use wasmsched::bindings::wit;

use super::{Checked, cases, close, finite, list};

const METRICS: [&str; 4] = ["accuracy", "loss", "time", "f1"];

fn specs(names: &[&str]) -> Vec<wit::MetricSpec> {
    names.iter().map(|&name| wit::MetricSpec { name: name.into(), direction: wit::Direction::LowerIsBetter }).collect()
}

/// A number as a job prints it, and its value.
pub(super) fn number() -> impl Strategy<Value = (String, f64)> {
    prop_oneof![(any::<i32>(), 0..7i32).prop_map(|(m, d)| f64::from(m) / 10f64.powi(d)), finite(),]
        .prop_map(|v| (v.to_string(), v))
}

/// What a near-miss of a progress line should give: these values, or a refusal.
type Expected = Option<(Option<u32>, Vec<f64>)>;

fn check_progress(line: &str, metrics: &[&str], expected: Expected) -> Checked {
    match (expected, progress::parse(line, &specs(metrics))) {
        (Some((epoch, values)), Line::Progress { epoch: e, values: v }) => {
            prop_assert_eq!(e, epoch, "{}", line);
            prop_assert!(v.len() == values.len() && v.iter().zip(&values).all(|(a, b)| close(*a, *b)), "{line}: {v:?}");
        }
        (Some(_), other) => prop_assert!(false, "{line} is valid for {metrics:?}, read as {other:?}"),
        (None, Line::Progress { epoch, values }) => {
            prop_assert!(false, "{line} is not a valid record, yet read as epoch {epoch:?}, {values:?}")
        }
        (None, Line::Garbage(why)) => prop_assert!(!why.is_empty()),
        (None, Line::Other) => {}
    }
    Ok(())
}

/// A change to a valid JSON progress line, and whether the line stays valid.
#[derive(Clone, Debug)]
enum JsonEdit {
    None,
    Spaces(String),
    Extra(String, String),
    Duplicate(usize),
    Huge(usize, &'static str),
    Drop(usize),
    Wrong(usize, &'static str),
    Epoch(&'static str),
    Truncate(usize),
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    let wrong = list("\"0.5\"|null|true|[0.5]|{}|NaN|nan|Infinity|-Infinity|inf|1e999|-1e999|0x10|01|.5|5.|+1|1_000|");
    let huge = list("1e308|-1e308|1.7976931348623157e308|123456789012345678901234567890|4.9e-324|-0");
    let epoch = list("-1|1.5|4294967296|1e3|\"3\"|null|18446744073709551616|true|[]|");
    let i = || any::<usize>();
    prop_oneof![
        Just(JsonEdit::None),
        "[ \t]{1,3}".prop_map(JsonEdit::Spaces),
        ("[a-z_]{1,8}", prop::sample::select(vec!["1", "\"x\"", "null", "[1,2]", "{\"a\":1}", "1e308", "-0"]))
            .prop_map(|(k, v)| JsonEdit::Extra(k, v.into())),
        i().prop_map(JsonEdit::Duplicate),
        (i(), prop::sample::select(huge)).prop_map(|(i, v)| JsonEdit::Huge(i, v)),
        i().prop_map(JsonEdit::Drop),
        (i(), prop::sample::select(wrong)).prop_map(|(i, v)| JsonEdit::Wrong(i, v)),
        prop::sample::select(epoch).prop_map(JsonEdit::Epoch),
        i().prop_map(JsonEdit::Truncate),
    ]
}

/// A JSON progress line with `edit` made, and what it should give.
fn json_line(epoch: Option<u32>, metrics: &[&str], values: &[(String, f64)], edit: &JsonEdit) -> (String, Expected) {
    let mut fields: Vec<(String, String)> = epoch.map(|e| ("epoch".to_string(), e.to_string())).into_iter().collect();
    fields.extend(metrics.iter().zip(values).map(|(m, (text, _))| (m.to_string(), text.clone())));
    let mut good: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
    let offset = usize::from(epoch.is_some());
    let mut valid = true;
    let mut space = "";
    match edit {
        JsonEdit::None => {}
        JsonEdit::Spaces(s) => space = s,
        JsonEdit::Extra(k, v) if !metrics.contains(&k.as_str()) && k != "epoch" => fields.push((k.clone(), v.clone())),
        JsonEdit::Extra(..) => {}
        JsonEdit::Duplicate(i) => fields.push(fields[offset + i % metrics.len()].clone()),
        JsonEdit::Huge(i, v) => {
            fields[offset + i % metrics.len()].1 = v.to_string();
            good[i % metrics.len()] = v.parse().expect("a number");
        }
        JsonEdit::Drop(i) => {
            fields.remove(offset + i % metrics.len());
            valid = false;
        }
        JsonEdit::Wrong(i, v) => {
            fields[offset + i % metrics.len()].1 = v.to_string();
            valid = false;
        }
        JsonEdit::Epoch(v) => {
            valid = false;
            fields.retain(|(k, _)| k != "epoch");
            fields.push(("epoch".into(), v.to_string()));
        }
        JsonEdit::Truncate(_) => valid = false,
    }
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{space}\"{k}\"{space}:{space}{v}{space}")).collect();
    let mut line = format!("{space}{{{}}}{space}", body.join(","));
    if let JsonEdit::Truncate(at) = edit {
        line.truncate(at % line.len());
    }
    (line, valid.then_some((epoch, good)))
}

/// A change to a valid FlowCon line (`Loss: L Time: T`).
#[derive(Clone, Debug)]
enum FlowconEdit {
    None,
    Spaces(String),
    NoTime,
    Trailing(&'static str),
    BadLoss(&'static str),
    BadTime(&'static str),
    HugeLoss(&'static str),
}

fn flowcon_edit() -> impl Strategy<Value = FlowconEdit> {
    let bad = list("nan|NaN|inf|-inf|infinity|1e999|-1e999|x||0.5.5|1,5|0x10|--1|1 2");
    let huge = list("1e308|-1e308|1.7976931348623157e308|4.9e-324|123456789012345678901234567890");
    prop_oneof![
        Just(FlowconEdit::None),
        "[ \t]{1,3}".prop_map(FlowconEdit::Spaces),
        Just(FlowconEdit::NoTime),
        prop::sample::select(vec!["s", "lr: 0.1", "Time: 3", "#"]).prop_map(FlowconEdit::Trailing),
        prop::sample::select(bad.clone()).prop_map(FlowconEdit::BadLoss),
        prop::sample::select(bad).prop_map(FlowconEdit::BadTime),
        prop::sample::select(huge).prop_map(FlowconEdit::HugeLoss),
    ]
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn a_log_line_of_any_text_never_panics_and_only_a_progress_prefix_makes_it_progress(
        line in prop_oneof![any::<String>(), "([{}\":,]|Loss:|Time:| |epoch|accuracy|loss|[0-9.eE+-]{1,4}|nan|inf){0,16}"],
        metrics in prop::sample::subsequence(METRICS.to_vec(), 1..=3).prop_shuffle(),
    ) {
        let out = progress::parse(&line, &specs(&metrics));
        let text = line.trim();
        if !text.starts_with('{') && !text.starts_with("Loss:") {
            prop_assert_eq!(&out, &Line::Other, "{}", line);
        }
        if let Line::Progress { values, .. } = &out {
            prop_assert!(values.len() == metrics.len() && values.iter().all(|v| v.is_finite()), "{line}: {out:?}");
        }
        if let Some((ns, rest)) = progress::timestamped(&line) {
            let (stamp, after) = line.split_once(' ').expect("a stamp is followed by a space");
            prop_assert_eq!((progress::unix_ns(stamp), rest), (Some(ns), after));
        }
    }

    #[test]
    fn a_json_progress_line_near_a_valid_one_is_read_exactly_or_refused(
        epoch in prop::option::of(any::<u32>()),
        metrics in prop::sample::subsequence(METRICS.to_vec(), 1..=3).prop_shuffle(),
        values in prop::collection::vec(number(), 3),
        edit in json_edit(),
    ) {
        let (line, expected) = json_line(epoch, &metrics, &values[..metrics.len()], &edit);
        check_progress(&line, &metrics, expected)?;
    }

    #[test]
    fn a_flowcon_line_near_a_valid_one_is_read_exactly_or_refused(
        metrics in prop::sample::select(vec![vec!["loss"], vec!["loss", "time"], vec!["time", "loss"], vec!["loss", "accuracy"]]),
        (loss, time) in (number(), number()),
        edit in flowcon_edit(),
    ) {
        let (mut l, mut t, mut good_loss) = (loss.0.clone(), Some(time.0.clone()), Some(loss.1));
        let (mut space, mut trailing) = (" ".to_string(), "");
        match &edit {
            FlowconEdit::None => {}
            FlowconEdit::Spaces(s) => space.clone_from(s),
            FlowconEdit::NoTime => t = None,
            FlowconEdit::Trailing(x) => trailing = x,
            FlowconEdit::BadLoss(x) => (l, good_loss) = (x.to_string(), None),
            FlowconEdit::BadTime(x) => t = Some(x.to_string()),
            FlowconEdit::HugeLoss(x) => (l, good_loss) = (x.to_string(), x.parse().ok()),
        }
        let time_part = t.as_ref().map_or(String::new(), |t| format!("{space}Time:{space}{t}"));
        let line = format!("Loss:{space}{l}{time_part}{space}{trailing}");
        let good_time = match (&t, trailing) {
            (Some(t), "") => t.parse::<f64>().ok().filter(|v| v.is_finite()),
            _ => None,
        };
        let expected = metrics
            .iter()
            .map(|&m| match m {
                "loss" => good_loss.filter(|_| t.is_some() || trailing.is_empty()),
                "time" => good_time,
                _ => None,
            })
            .collect::<Option<Vec<f64>>>()
            .map(|values| (None, values));
        check_progress(&line, &metrics, expected)?;
    }

    #[test]
    fn a_docker_time_stamp_reads_back_to_the_nanosecond_and_a_broken_one_never_panics(
        ns in 0u64..4_000_000_000_000_000_000,
        cut in any::<usize>(),
    ) {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns);
        let stamp = humantime::format_rfc3339_nanos(at).to_string();
        let line = format!("{stamp} Loss: 1");
        prop_assert_eq!(progress::timestamped(&line), Some((ns, "Loss: 1")));
        let _ = progress::unix_ns(&stamp[..cut % stamp.len()]);
    }

    #[test]
    fn a_log_stream_gives_the_same_lines_however_it_is_cut_into_chunks(
        stream in prop::collection::vec(prop_oneof![4 => any::<u8>(), 1 => Just(b'\n'), 1 => Just(b'\r')], 0..300),
        overlong in prop::option::of(MAX_LINE - 2..MAX_LINE + 3),
        cuts in prop::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut stream = stream;
        if let Some(n) = overlong {
            stream.splice(0..0, std::iter::repeat_n(b'x', n).chain([b'\n']));
        }
        let mut whole = Vec::new();
        Lines::default().feed(&stream, |l, cut| whole.push((l.to_string(), cut)));
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        cuts.sort_unstable();
        let (mut lines, mut pieces, mut from) = (Lines::default(), Vec::new(), 0);
        for to in cuts.into_iter().chain([stream.len()]) {
            lines.feed(&stream[from..to], |l, cut| pieces.push((l.to_string(), cut)));
            from = to;
        }
        prop_assert_eq!(&pieces, &whole);
        let complete: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
        prop_assert_eq!(whole.len(), complete.len() - 1);
        for ((line, cut), raw) in whole.iter().zip(complete) {
            let kept = &raw[..raw.len().min(MAX_LINE)];
            prop_assert_eq!(*cut, raw.len() > MAX_LINE);
            let text = String::from_utf8_lossy(kept);
            prop_assert_eq!(line, text.trim_end_matches('\r'));
        }
    }
}
