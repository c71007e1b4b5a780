//! Header validation end to end: cryptsetup's 85 LUKS2 validation cases
//! (`support/luks2_cases.rs`) reach cryptsetup's verdict with `sectorcrypt dump` (0 for a
//! header cryptsetup loads, 2 naming the broken rule for one it refuses, the image never
//! written), checked against `cryptsetup luksDump` on the same images where it is
//! installed.

#[path = "support/luks2_cases.rs"]
mod luks2_cases;
mod support;

use luks2_cases::{Verdict, CASES};
use sectorcrypt_testkit::have;
use std::process::Command;
use support::{code, s, sc};

/// `cryptsetup luksDump` of a copy of `img` (it may repair the header it reads): whether
/// it loads.
fn cryptsetup_loads(img: &std::path::Path) -> bool {
    let copy = img.with_extension("cryptsetup");
    std::fs::copy(img, &copy).unwrap();
    let out = Command::new("cryptsetup")
        .args(["luksDump", "--disable-locks"])
        .arg(&copy)
        .output()
        .expect("run cryptsetup");
    std::fs::remove_file(&copy).unwrap();
    out.status.success()
}

#[test]
fn cryptsetup_validation_suite_reaches_cryptsetups_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let cryptsetup = have("cryptsetup");
    if !cryptsetup {
        eprintln!("cryptsetup is not installed: its verdicts are not cross-checked");
    }
    let (mut right, mut wrong) = (0, Vec::new());
    let mut table = String::from("case  cryptsetup's verdict  sectorcrypt dump  luksDump\n");
    for case in &CASES {
        let img = dir.path().join(format!("{}.img", case.name));
        case.write(&img);
        let before = std::fs::read(&img).unwrap();
        let o = sc(&["dump", s(&img)], b"");
        let got = code(&o);
        let stderr = String::from_utf8_lossy(&o.stderr);
        let want = match case.verdict {
            Verdict::Load => 0,
            Verdict::Refuse => 2,
        };
        let tool = if cryptsetup {
            let loads = cryptsetup_loads(&img);
            if loads != (case.verdict == Verdict::Load) {
                wrong.push(format!(
                    "{}: cryptsetup disagrees with the suite",
                    case.name
                ));
            }
            if loads {
                "loads"
            } else {
                "refuses"
            }
        } else {
            "-"
        };
        table += &format!("{}  {:?}  {got}  {tool}\n", case.name, case.verdict);
        if got == want {
            right += 1;
        } else {
            wrong.push(format!("{}: exit {got}, want {want}: {stderr}", case.name));
        }
        if want == 2 && !stderr.contains(case.rule) {
            wrong.push(format!(
                "{}: the message names no {}: {stderr}",
                case.name, case.rule
            ));
        }
        assert!(
            std::fs::read(&img).unwrap() == before,
            "{}: dump wrote",
            case.name
        );
        std::fs::remove_file(&img).unwrap();
    }
    eprintln!(
        "{table}sectorcrypt dump reaches cryptsetup's verdict on {right} of {}",
        CASES.len()
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}
