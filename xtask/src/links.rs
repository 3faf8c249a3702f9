//! The link step of `cargo xtask check`: every relative link in `README.md`, `ARCHITECTURE.md`
//! and `docs/**/*.md` must name a file or folder that exists and, with a `#fragment` into a
//! markdown file, one of that file's headings (slugged as GitHub does). Links inside fenced code
//! blocks and inline code are not links; `http(s)://`, `mailto:` and other schemes are not
//! checked (the step stays offline).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Fails naming every dead link (`path:line: dead link `target`: why`).
pub fn check(root: &Path) -> anyhow::Result<()> {
    let dead = dead_links(root)?;
    for d in &dead {
        println!("{d}");
    }
    if !dead.is_empty() {
        bail!(
            "links: {} dead link(s) — point them at an existing file or heading",
            dead.len()
        );
    }
    eprintln!("links: ok");
    Ok(())
}

/// The documents whose links are checked, relative to `root`: the README, ARCHITECTURE.md and
/// every markdown file under `docs/`.
fn documents(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut docs = Vec::new();
    for name in ["README.md", "ARCHITECTURE.md"] {
        if root.join(name).is_file() {
            docs.push(PathBuf::from(name));
        }
    }
    let mut pending = vec![PathBuf::from("docs")];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
            continue;
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            let rel = dir.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                pending.push(rel);
            } else if rel.extension().is_some_and(|e| e == "md") {
                docs.push(rel);
            }
        }
    }
    docs.sort();
    Ok(docs)
}

/// Every dead relative link of the documents under `root`, as `path:line: dead link …`.
pub fn dead_links(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut dead = Vec::new();
    for doc in documents(root)? {
        let text = std::fs::read_to_string(root.join(&doc))
            .with_context(|| format!("cannot read {}", doc.display()))?;
        let dir = doc.parent().unwrap_or(Path::new(""));
        for (line, target) in links(&text) {
            if let Err(why) = resolve(root, dir, &doc, &text, &target) {
                dead.push(format!(
                    "{}:{line}: dead link `{target}`: {why}",
                    doc.display()
                ));
            }
        }
    }
    Ok(dead)
}

/// Checks one link target of the document `doc` (whose folder is `dir` and text `text`).
fn resolve(root: &Path, dir: &Path, doc: &Path, text: &str, target: &str) -> Result<(), String> {
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let (file, body) = if path.is_empty() {
        (doc.to_path_buf(), Some(text.to_owned()))
    } else {
        let file = dir.join(path);
        let full = root.join(&file);
        if !full.exists() {
            return Err(format!("{} does not exist", file.display()));
        }
        let body = match fragment {
            Some(_) if full.is_file() => Some(
                std::fs::read_to_string(&full)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))?,
            ),
            _ => None,
        };
        (file, body)
    };
    let Some(fragment) = fragment else {
        return Ok(());
    };
    if file.extension().is_none_or(|e| e != "md") {
        return Ok(());
    }
    let body = body.unwrap_or_default();
    if anchors(&body).contains(fragment) {
        Ok(())
    } else {
        Err(format!("{} has no heading `#{fragment}`", file.display()))
    }
}

/// The local link targets of a markdown text with their 1-based line numbers: `[text](target)`
/// and `![alt](target)` outside fenced code and inline code, without a scheme.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        let prose = without_code_spans(line);
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            // `(target "title")`: the target is the first word.
            let target = after[..end].split_whitespace().next().unwrap_or("");
            let target = target.trim_start_matches('<').trim_end_matches('>');
            if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
                out.push((i + 1, target.to_owned()));
            }
            rest = &after[end..];
        }
    }
    out
}

/// `line` with every inline code span (text between matching backtick runs) removed.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        match after.find(&"`".repeat(ticks)) {
            Some(close) => rest = &after[close + ticks..],
            None => {
                // An unmatched backtick is literal text.
                out.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The anchors GitHub gives the headings of a markdown text: the heading's text lower-cased,
/// everything but letters, digits, `_`, `-` and spaces dropped, spaces turned into `-`; a
/// repeated anchor gets `-1`, `-2`, … appended.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut in_fence = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// GitHub's anchor of one heading text.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_github() {
        assert_eq!(slug("4. Identity and the gate"), "4-identity-and-the-gate");
        assert_eq!(
            slug("Configuration: `<root>/kanban.toml`"),
            "configuration-rootkanbantoml"
        );
        assert_eq!(
            slug("Owner admission: `mode = \"owner\"`, `kanban owner`, `kanban submit`"),
            "owner-admission-mode--owner-kanban-owner-kanban-submit"
        );
        assert_eq!(slug("The owner's launch"), "the-owners-launch");
        let a = anchors("# Top\n## Tests\n```\n## not a heading\n```\n## Tests\n#nospace\n");
        let mut a: Vec<_> = a.into_iter().collect();
        a.sort();
        assert_eq!(a, ["tests", "tests-1", "top"]);
    }

    #[test]
    fn links_skip_code_and_external_targets() {
        let text = "see [a](a.md) and `[b](b.md)` and [c](https://x.org/c)\n\
                    ```\n[d](d.md)\n```\n![img](docs/p.png \"title\") [e](#local)\n";
        assert_eq!(
            links(text),
            [
                (1, "a.md".to_owned()),
                (5, "docs/p.png".to_owned()),
                (5, "#local".to_owned())
            ]
        );
    }

    #[test]
    fn dead_files_and_headings_are_reported_and_live_ones_are_not() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir(r.join("docs")).unwrap();
        std::fs::write(
            r.join("README.md"),
            "# Top\n\n[ok](docs/a.md#part-one) [ok](#top) [ok](docs/) [ok](docs/a.md)\n\
             [gone](docs/missing.md) [bad anchor](docs/a.md#part-two)\n",
        )
        .unwrap();
        std::fs::write(
            r.join("docs/a.md"),
            "# A\n\n## Part one\n\n[back](../README.md#top) [bad](#nowhere)\n",
        )
        .unwrap();
        let dead = dead_links(r).unwrap();
        assert_eq!(
            dead,
            [
                "README.md:4: dead link `docs/missing.md`: docs/missing.md does not exist",
                "README.md:4: dead link `docs/a.md#part-two`: docs/a.md has no heading `#part-two`",
                "docs/a.md:5: dead link `#nowhere`: docs/a.md has no heading `#nowhere`",
            ]
        );
        assert!(check(r).is_err());
        std::fs::write(r.join("README.md"), "# Top\n\n[ok](docs/a.md#part-one)\n").unwrap();
        std::fs::write(r.join("docs/a.md"), "# A\n\n## Part one\n").unwrap();
        assert!(check(r).is_ok());
    }

    /// The repository's own documents have no dead link (so `cargo test` catches one too).
    #[test]
    fn the_repository_documents_have_no_dead_link() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let dead = dead_links(root).unwrap();
        assert!(dead.is_empty(), "{}", dead.join("\n"));
    }
}
