//! What the tests comparing two ways of running a program (`tests/inline.rs`,
//! `tests/jit.rs`) show of a run.

use vlad::toplevel::Session;

/// What running `src` shows: each value or the error (rendered, with its
/// trace) and the steps counted after it, then the counts `--metered` prints
/// where `configure` turned metering on.
pub fn outcome(
    src: &str,
    configure: &dyn Fn(&mut vlad::eval::Machine),
    limit: Option<(&str, u64)>,
) -> String {
    let mut s = Session::new();
    s.m.out = Box::new(std::io::sink());
    configure(&mut s.m);
    match limit {
        Some(("depth", n)) => s.m.set_max_depth(n as usize),
        Some((_, n)) => s.m.set_max_steps(n),
        None => {}
    }
    let mut out = String::new();
    for (i, expr) in expressions(src).iter().enumerate() {
        match s.run_text(&format!("p{i}.vlad"), expr) {
            Ok(vs) => vs.iter().for_each(|v| out.push_str(&format!("{}\n", vlad::print::to_string(v)))),
            Err(e) => out.push_str(&e.render(&s.sources)),
        }
        out.push_str(&format!("{} steps\n", s.m.steps()));
    }
    if let Some(meter) = s.m.meter.take() {
        out.push_str(&format!("{:?} {} steps {} AD\n", meter, s.m.steps(), s.m.ad_work));
    }
    out
}

/// The program as the definitions followed by each expression alone (so
/// that one failing does not hide the rest).
pub fn expressions(src: &str) -> Vec<String> {
    let Ok(forms) = vlad::reader::read_all(src, 0) else { panic!("the program does not read:\n{src}") };
    let text = |d: &vlad::datum::Datum| src[d.span.start as usize..d.span.end as usize].to_string();
    let (defs, exprs): (Vec<_>, Vec<_>) = forms.iter().partition(|d| text(d).starts_with("(define"));
    let defs: Vec<String> = defs.iter().map(|d| text(d)).collect();
    exprs.iter().map(|e| format!("{}\n{}\n", defs.join("\n"), text(e))).collect()
}
