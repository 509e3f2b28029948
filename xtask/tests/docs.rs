//! The house rules for the repository's docs, checked on every test run: each README is
//! under 250 lines and says what is built now (no session numbers such as "stop 23"),
//! the top README names every architecture the engine runs, and every relative link in
//! the READMEs, `ARCHITECTURE.md` and `docs/` names a file that exists.

use std::path::{Path, PathBuf};

/// The workspace root (xtask's parent).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// The top README, `ARCHITECTURE.md`, every crate's README and the pages under `docs/`.
fn doc_files() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for dir in ["crates", "docs"] {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let readme = path.join("README.md");
            if readme.is_file() {
                files.push(readme);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files
}

fn is_readme(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "README.md")
}

#[test]
fn readmes_are_under_250_lines() {
    let long: Vec<String> = doc_files()
        .iter()
        .filter(|p| is_readme(p))
        .filter_map(|p| {
            let lines = std::fs::read_to_string(p)
                .expect("readable")
                .lines()
                .count();
            (lines >= 250).then(|| format!("{}: {lines} lines", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "READMEs of 250 lines or more: {long:?}");
}

#[test]
fn readmes_name_no_sessions() {
    let mut found = Vec::new();
    for path in doc_files()
        .iter()
        .filter(|p| is_readme(p) || p.ends_with("ARCHITECTURE.md"))
    {
        let text = std::fs::read_to_string(path).expect("readable");
        for (i, line) in text.lines().enumerate() {
            let lower = line.to_ascii_lowercase();
            let session = lower
                .match_indices("stop ")
                .any(|(at, _)| lower[at + 5..].starts_with(|c: char| c.is_ascii_digit()));
            if session {
                found.push(format!("{}:{}: {line}", path.display(), i + 1));
            }
        }
    }
    assert!(found.is_empty(), "docs name sessions: {found:#?}");
}

#[test]
fn the_top_readme_names_every_architecture() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("readable");
    let missing: Vec<&str> = tempra_llm::model_config::Arch::ALL
        .iter()
        .map(|arch| arch.name())
        .filter(|name| !readme.contains(&format!(" {name}")))
        .collect();
    assert!(missing.is_empty(), "README.md does not name {missing:?}");
}

#[test]
fn relative_links_name_files_that_exist() {
    let mut broken = Vec::new();
    for path in doc_files() {
        let text = std::fs::read_to_string(&path).expect("readable");
        for target in text
            .split("](")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
        {
            let file = target.split('#').next().unwrap_or_default();
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            let dir = path.parent().expect("a file has a folder");
            if !dir.join(file).exists() {
                broken.push(format!("{}: {target}", path.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to missing files: {broken:#?}");
}
