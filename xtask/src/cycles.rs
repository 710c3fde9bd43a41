//! `cargo xtask test`'s module-cycle check: within every crate of the workspace, no top-level
//! module may use another that uses it back (directly or through others).
//!
//! A module is a file `src/NAME.rs` or a folder `src/NAME/` directly under a crate's `src/`; it
//! uses module `OTHER` when a line of its code (comments aside) names `crate::OTHER`. The crate
//! root (`lib.rs`, `main.rs`) declares every module and is left out.

use anyhow::{Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `crate::X` modules each top-level module of the crate at `src` uses.
pub fn module_graph(src: &Path) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(src)? {
        let path = entry?.path();
        let name = match (path.is_dir(), path.extension().and_then(|e| e.to_str())) {
            (true, _) => path.file_name(),
            (false, Some("rs")) => path.file_stem(),
            _ => continue,
        };
        let name = name
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if matches!(name.as_str(), "lib" | "main" | "bin") {
            continue;
        }
        let uses = graph.entry(name.clone()).or_default();
        for file in rust_files(&path)? {
            for line in std::fs::read_to_string(&file)?.lines() {
                let code = line.split("//").next().unwrap_or_default();
                let mut rest = code;
                while let Some(at) = rest.find("crate::") {
                    rest = &rest[at + "crate::".len()..];
                    let other: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !other.is_empty() && other != name {
                        uses.insert(other);
                    }
                }
            }
        }
    }
    Ok(graph)
}

/// The `.rs` files at or below `path` (a module's folder may also hold test fixtures: data,
/// not code, and not necessarily text).
fn rust_files(path: &Path) -> Result<Vec<std::path::PathBuf>> {
    if path.is_file() {
        let rust = path.extension().is_some_and(|e| e == "rs");
        return Ok(if rust {
            vec![path.to_path_buf()]
        } else {
            vec![]
        });
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path)? {
        files.extend(rust_files(&entry?.path())?);
    }
    Ok(files)
}

/// A cycle of `graph` as the modules along it (`a → b → … → a`), if there is one.
pub fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if graph.contains_key(next)
                && let Some(cycle) = visit(next, graph, path, done)
            {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// Fails naming the first cycle found in any crate of the workspace at `root`.
pub fn check(root: &Path) -> Result<()> {
    let mut crates = 0;
    let dirs: BTreeSet<_> = ["models/train", "models/cli"]
        .iter()
        .map(|p| root.join(p))
        .chain(std::fs::read_dir(root)?.flatten().map(|e| e.path()))
        .collect();
    for manifest in dirs {
        let src = manifest.join("src");
        if !manifest.join("Cargo.toml").is_file() || !src.is_dir() {
            continue;
        }
        crates += 1;
        if let Some(cycle) = find_cycle(&module_graph(&src)?) {
            bail!(
                "import cycle between modules of {}: {}",
                manifest.display(),
                cycle.join(" → ")
            );
        }
    }
    println!("no import cycle between the modules of {crates} crates");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        edges
            .iter()
            .map(|(n, to)| (n.to_string(), to.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    #[test]
    fn finds_a_cycle_through_several_modules_and_none_in_a_tree() {
        let tree = graph(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[])]);
        assert_eq!(find_cycle(&tree), None);
        let cyclic = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &["a"])]);
        assert_eq!(find_cycle(&cyclic).unwrap(), ["a", "b", "c", "a"]);
    }

    #[test]
    fn reads_crate_paths_outside_comments() {
        let dir = std::env::temp_dir().join(format!("xtask-cycles-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src/data")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "pub mod data; pub mod model;").unwrap();
        std::fs::write(dir.join("src/model.rs"), "use crate::data::Batch;\n").unwrap();
        std::fs::write(
            dir.join("src/data/mod.rs"),
            "// see crate::model\nfn f() -> crate::model::X { x() }\n",
        )
        .unwrap();
        // a binary fixture beside the code is not read
        std::fs::create_dir_all(dir.join("src/data/fixtures")).unwrap();
        std::fs::write(
            dir.join("src/data/fixtures/a.wav"),
            [0xffu8, 0xfe, 0x00, 0x80],
        )
        .unwrap();
        let g = module_graph(&dir.join("src")).unwrap();
        assert_eq!(g["model"], ["data".to_string()].into());
        assert_eq!(g["data"], ["model".to_string()].into());
        assert!(find_cycle(&g).is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
