//! The state file on disk: written twice (a verified copy first), recovered from the copy when damaged, and never replaced by
//! advice that loses the original state. One test: CPUSHIELD_STATE_DIR is
//! process-wide.

use cpushield_shield::fake_machine::one_task_state;
use cpushield_shield::state::{self, SavedState};

/// The saved state these tests write: task 7 is `sleep`.
fn sample() -> SavedState {
    one_task_state("sleep")
}

/// The state in the state directory, and how it was recovered.
fn load_checked() -> std::io::Result<Option<state::Loaded>> {
    state::load_from(&state::FileStore::from_env())
}

fn leftovers(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_damaged_state_file_is_recovered_from_its_verified_copy_and_never_lost() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("CPUSHIELD_STATE_DIR", dir.path());
    let main = state::state_path();
    let bak = state::state_dir().join(state::BACKUP_FILE);

    // Written twice, nothing else left behind.
    state::store_in(&state::FileStore::from_env(), &sample()).unwrap();
    assert_eq!(leftovers(dir.path()), ["state.json", "state.json.bak"]);
    let good = std::fs::read(&main).unwrap();
    assert_eq!(good, std::fs::read(&bak).unwrap());
    let loaded = load_checked().unwrap().unwrap();
    assert!(loaded.recovered.is_none());
    assert_eq!(loaded.state.tasks, sample().tasks);

    // Each damage to the state file: recovered from the copy, with a note.
    let text = String::from_utf8(good.clone()).unwrap();
    let mut non_utf8 = good.clone();
    non_utf8[text.find("sleep").unwrap()] = 0xff;
    let damages: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("invalid JSON", b"{]".to_vec()),
        (
            "missing key",
            text.replacen("\"masks\"", "\"m\"", 1).into_bytes(),
        ),
        ("non-UTF-8", non_utf8),
    ];
    for (what, bytes) in &damages {
        std::fs::write(&main, bytes).unwrap();
        let loaded = load_checked()
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .unwrap();
        assert_eq!(loaded.state.tasks, sample().tasks, "{what}");
        let note = loaded.recovered.expect(what);
        assert!(note.contains("state.json is damaged"), "{what}: {note}");
    }
    // A directory where the state file should be.
    std::fs::remove_file(&main).unwrap();
    std::fs::create_dir(&main).unwrap();
    assert!(load_checked().unwrap().unwrap().recovered.is_some());
    // The next store replaces it with a good file.
    state::store_in(&state::FileStore::from_env(), &sample()).unwrap();
    assert!(load_checked().unwrap().unwrap().recovered.is_none());

    // Both damaged: an error naming both, no advice to remove, files untouched.
    std::fs::write(&main, b"{").unwrap();
    std::fs::write(&bak, &good[..10]).unwrap();
    let e = load_checked().unwrap_err().to_string();
    assert!(
        e.contains("state.json:") && e.contains("state.json.bak:"),
        "{e}"
    );
    assert!(!e.contains("remove"), "advice that loses data: {e}");
    assert_eq!(std::fs::read(&main).unwrap(), b"{");
    assert_eq!(std::fs::read(&bak).unwrap(), &good[..10]);

    // A missing state file with a good copy: recovered (a store killed
    // between the two writes, or a removed file).
    std::fs::remove_file(&main).unwrap();
    std::fs::write(&bak, &good).unwrap();
    assert!(load_checked().unwrap().unwrap().recovered.is_some());

    // Remove takes both, a directory state file too.
    state::store_in(&state::FileStore::from_env(), &sample()).unwrap();
    state::remove_from(&state::FileStore::from_env()).unwrap();
    assert!(load_checked().unwrap().is_none());
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    std::fs::create_dir(&main).unwrap();
    state::remove_from(&state::FileStore::from_env()).unwrap();
    assert!(!main.exists());

    // A state directory that cannot be written: the error names the path
    // and the remedy, and leaves no temp file.
    let blocked = dir.path().join("blocked");
    std::fs::write(&blocked, b"a file, not a directory").unwrap();
    std::env::set_var("CPUSHIELD_STATE_DIR", blocked.join("sub"));
    let e = state::store_in(&state::FileStore::from_env(), &sample())
        .unwrap_err()
        .to_string();
    assert!(e.contains(&blocked.display().to_string()), "{e}");
    assert!(e.contains("CPUSHIELD_STATE_DIR"), "{e}");
    std::env::set_var("CPUSHIELD_STATE_DIR", dir.path());
    assert_eq!(leftovers(dir.path()), ["blocked"]);
}
