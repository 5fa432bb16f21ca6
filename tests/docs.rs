//! The docs cannot rot (#64 point 5): every `outboxctl` command line a page
//! shows parses with outboxctl's own command-line definition (its
//! subcommands, flags and values), so a renamed flag or a removed
//! subcommand fails here. The pages are those `infra/checks/deploy_docs.py`
//! reads (README.md, docs/, the crates' READMEs), which checks the rest of
//! their shell: known commands, `make` targets that exist, scripts that
//! exist. Placeholders (`<table>`, `$TABLE`) parse as the values they stand
//! for.

use clap::Parser;
use testkit::root;

/// The pages a user reads.
fn pages() -> Vec<std::path::PathBuf> {
    let root = root();
    let mut pages = vec![root.join("README.md"), root.join("infra/README.md")];
    let mut walk = vec![root.join("docs")];
    while let Some(dir) = walk.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    for folder in ["crates", "clients"] {
        for entry in std::fs::read_dir(root.join(folder))
            .expect("a folder")
            .flatten()
        {
            let readme = entry.path().join("README.md");
            if readme.exists() {
                pages.push(readme);
            }
        }
    }
    pages
}

/// The `outboxctl …` command lines of a page, with their line numbers and
/// whether they are a shell block's (`true`: a command to run) or inline
/// code's (`false`: prose naming a command, perhaps without its required
/// arguments, perhaps a synopsis with `[optional]` parts): in shell blocks
/// continuations are joined and comments dropped; each is cut at a pipe,
/// `&&`, `;` or a redirection.
fn command_lines(text: &str) -> Vec<(usize, String, bool)> {
    let mut found = Vec::new();
    let mut in_shell = None::<bool>;
    let mut pending = String::new();
    let mut pending_at = 0;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let trimmed = line.trim();
        if let Some(language) = trimmed.strip_prefix("```") {
            in_shell = match in_shell {
                None => Some(matches!(
                    language.trim(),
                    "" | "sh" | "bash" | "shell" | "console"
                )),
                Some(_) => None,
            };
            continue;
        }
        match in_shell {
            Some(true) => {
                let code = trimmed.split(" #").next().unwrap_or("");
                if code.starts_with('#') {
                    continue;
                }
                if pending.is_empty() {
                    pending_at = number;
                }
                if let Some(head) = code.strip_suffix('\\') {
                    pending.push_str(head);
                    pending.push(' ');
                    continue;
                }
                pending.push_str(code);
                found.push((pending_at, std::mem::take(&mut pending), true));
            }
            Some(false) => {}
            None => {
                for span in trimmed.split('`').skip(1).step_by(2) {
                    // A table cell's escaped pipe separates alternatives.
                    let span = span.split("\\|").next().unwrap_or("");
                    found.push((number, span.replace(['[', ']'], ""), false));
                }
            }
        }
    }
    let placeholder = |line: &str| {
        let mut out = String::new();
        let mut rest = line;
        while let Some(at) = rest.find('<') {
            match rest[at..].find('>') {
                Some(end) if !rest[at + 1..at + end].contains('<') => {
                    out.push_str(&rest[..at]);
                    out.push_str("PLACEHOLDER");
                    rest = &rest[at + end + 1..];
                }
                _ => break,
            }
        }
        out.push_str(rest);
        out
    };
    found
        .into_iter()
        .map(|(number, line, strict)| (number, placeholder(&line), strict))
        .flat_map(|(number, line, strict)| {
            line.split(['|', ';'])
                .flat_map(|part| part.split("&&").map(str::to_owned).collect::<Vec<_>>())
                .map(|part| (number, part, strict))
                .collect::<Vec<_>>()
        })
        .filter_map(|(number, part, strict)| {
            let part = part.split(['>', '<']).next().unwrap_or("").trim();
            // Leading `NAME=value` assignments, then `outboxctl <args>` or
            // `cargo run -p outboxctl -- <args>`.
            let mut rest = part;
            while let Some((word, after)) = rest.split_once(' ') {
                if word.contains('=') && !word.starts_with('-') {
                    rest = after.trim_start();
                } else {
                    break;
                }
            }
            let command = match rest.split_once("-p outboxctl -- ") {
                Some((_, args)) => format!("outboxctl {args}"),
                None if rest.starts_with("outboxctl ") => rest.to_owned(),
                None => return None,
            };
            Some((number, command, strict))
        })
        .collect()
}

/// What is wrong with one command line: a subcommand or a flag outboxctl
/// does not have (every line), or, for a shell block's line, anything clap
/// refuses (a placeholder `<…>` may stand for a value clap would check).
fn problem(line: &str, strict: bool) -> Option<String> {
    use clap::error::ErrorKind;
    use clap::CommandFactory;
    let words = shlex::split(line)?;
    let mut command = outboxctl::Cli::command();
    command.build();
    let mut arguments: Vec<clap::Arg> = command.get_arguments().cloned().collect();
    let mut flags = Vec::new();
    for word in words.iter().skip(1) {
        if let Some(flag) = word.strip_prefix("--") {
            flags.push(flag.split('=').next().unwrap_or("").to_owned());
        } else if let Some(sub) = command.find_subcommand(word.as_str()).cloned() {
            command = sub;
            arguments.extend(command.get_arguments().cloned());
        }
    }
    for flag in flags.iter().filter(|f| !f.is_empty()) {
        if !arguments
            .iter()
            .any(|a| a.get_long() == Some(flag.as_str()))
        {
            return Some(format!("`{}` has no flag --{flag}", command.get_name()));
        }
    }
    if !strict {
        return None;
    }
    let e = outboxctl::Cli::try_parse_from(&words).err()?;
    let placeholder_value = line.contains("PLACEHOLDER")
        && matches!(
            e.kind(),
            ErrorKind::InvalidValue | ErrorKind::ValueValidation
        );
    if placeholder_value || matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return None;
    }
    Some(e.to_string().lines().next().unwrap_or("").to_owned())
}

#[test]
fn every_outboxctl_command_in_the_docs_parses() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        for (number, line, strict) in command_lines(&text) {
            if shlex::split(&line).is_none_or(|w| w.len() < 2) {
                continue; // `outboxctl` alone, in prose
            }
            checked += 1;
            if let Some(problem) = problem(&line, strict) {
                problems.push(format!("{}:{number}: `{line}`: {problem}", page.display()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 30, "only {checked} outboxctl command lines found");
}

#[test]
fn a_broken_command_line_is_caught() {
    let page = "Run `outboxctl dead-letters redrive --table t --nw` and\n```sh\noutboxctl stauts --table t\noutboxctl replay --bus b --archive a --from <a time> --to 1h\n```\n";
    let lines = command_lines(page);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(problem(&lines[0].1, lines[0].2).is_some_and(|p| p.contains("--nw")));
    assert!(problem(&lines[1].1, lines[1].2).is_some());
    assert_eq!(
        problem(&lines[2].1, lines[2].2),
        None,
        "a placeholder value"
    );
}
