//! Re-renders a compare report from its report.json:
//! `cargo run -p cpushield-report --example rerender -- DIR/report.json OUTDIR [WIDTH]`.
//! Prints what `compare` prints (the answer, at most `table::ANSWER_LINES`
//! lines), then what `--verbose` adds, wrapped at WIDTH columns when given.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(input), Some(out)) = (args.get(1), args.get(2)) else {
        return Err("usage: rerender REPORT.json OUTDIR [WIDTH]".into());
    };
    let width = args.get(3).map(|w| w.parse()).transpose()?;
    let report: cpushield_report::CompareReport =
        serde_json::from_str(&std::fs::read_to_string(input)?)?;
    use cpushield_report::table;
    print!(
        "{}",
        table::answer(&report, width, Some(table::ANSWER_LINES))
    );
    println!("report: {out}/report.html");
    println!("\n--verbose:\n");
    print!("{}", table::render(&report, width));
    cpushield_report::write_all(&report, std::path::Path::new(out))?;
    Ok(())
}
