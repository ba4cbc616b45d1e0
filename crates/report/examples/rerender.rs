//! Re-renders a compare report from its report.json:
//! `cargo run -p cpushield-report --example rerender -- DIR/report.json OUTDIR`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(input), Some(out)) = (args.get(1), args.get(2)) else {
        return Err("usage: rerender REPORT.json OUTDIR".into());
    };
    let report: cpushield_report::CompareReport =
        serde_json::from_str(&std::fs::read_to_string(input)?)?;
    print!("{}", cpushield_report::table::render(&report));
    cpushield_report::write_all(&report, std::path::Path::new(out))?;
    Ok(())
}
