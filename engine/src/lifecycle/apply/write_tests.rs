//! Apply's write and undo on real repositories, with the user acting between Apply's checks
//! and its writes (the races a single command cannot stage): the user's repository ends byte
//! for byte as the user left it, and a retry applies exactly once.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use git2::{FileMode, Oid, Repository};

use super::decide::{self, Decided};
use super::journal::{self, BranchUndo, UndoEntry};
use crate::lifecycle::RunError;
use crate::store::lifecycle_run::{BaseKind, PlanBase};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@t.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Files, modes, links, `.git/index`, HEAD, packed-refs, every ref file and `.git`'s entries.
fn state(repo: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (u32, Vec<u8>)>) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = fs::symlink_metadata(&p).unwrap();
            if rel == ".git" {
                continue;
            }
            if m.file_type().is_symlink() {
                let t = fs::read_link(&p).unwrap();
                out.insert(rel, (0o120000, t.into_os_string().into_encoded_bytes()));
            } else if m.is_dir() {
                out.insert(rel, (m.mode(), Vec::new()));
                walk(root, &p, out);
            } else {
                out.insert(rel, (m.mode(), fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(repo, repo, &mut out);
    let g = repo.join(".git");
    for name in ["index", "HEAD", "packed-refs"] {
        if let Ok(b) = fs::read(g.join(name)) {
            out.insert(format!(".git/{name}"), (0, b));
        }
    }
    let mut refs = BTreeMap::new();
    walk(&g, &g.join("refs"), &mut refs);
    for (k, v) in refs {
        out.insert(format!(".git/{k}"), v);
    }
    let mut top: Vec<String> = fs::read_dir(&g)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().display().to_string())
        .collect();
    top.sort();
    out.insert(".git/*".into(), (0, top.join("\n").into_bytes()));
    out
}

/// A repository with `n` files `f/<i>.txt` on `main`.
fn repo(dir: &Path, n: usize) -> (PathBuf, Oid) {
    let root = dir.join("repo");
    fs::create_dir_all(root.join("f")).unwrap();
    git(&root, &["init", "-q"]);
    for i in 0..n {
        fs::write(root.join(format!("f/{i}.txt")), format!("{i}\n")).unwrap();
    }
    fs::write(root.join("other.txt"), "other\n").unwrap();
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    let head = Repository::open(&root)
        .unwrap()
        .head()
        .unwrap()
        .target()
        .unwrap();
    (root, head)
}

/// The plan's target: every file rewritten (in the repository's own object database, which
/// here stands in for the sandbox's).
fn target(root: &Path, base: Oid, n: usize) -> Oid {
    let r = Repository::open(root).unwrap();
    let tree = r.find_commit(base).unwrap().tree().unwrap();
    let mut b = git2::build::TreeUpdateBuilder::new();
    for i in 0..n {
        let blob = r.blob(format!("{i} changed\n").as_bytes()).unwrap();
        b.upsert(format!("f/{i}.txt"), blob, FileMode::Blob);
    }
    b.create_updated(&r, &tree).unwrap()
}

fn base(root: &Path, commit: Oid) -> PlanBase {
    PlanBase {
        resource_name: "local/repo".into(),
        project_name: "app".into(),
        alias: None,
        kind: BaseKind::GitCheckout,
        path: root.display().to_string(),
        base_commit: Some(commit.to_string()),
        branch: Some("main".into()),
        read_only: false,
    }
}

fn undo_entries(d: &Decided) -> Vec<UndoEntry> {
    let entry = |path: &String, op, writes| UndoEntry {
        path: path.clone(),
        op,
        writes,
    };
    let mut out: Vec<UndoEntry> = d
        .changes
        .iter()
        .filter(|c| c.new.is_none())
        .map(|c| entry(&c.path, journal::EntryOp::File, false))
        .collect();
    out.extend(
        d.rmdirs
            .iter()
            .map(|p| entry(p, journal::EntryOp::RemoveDir, false)),
    );
    out.extend(
        d.mkdirs
            .iter()
            .map(|p| entry(p, journal::EntryOp::MakeDir, false)),
    );
    out.extend(
        d.changes
            .iter()
            .filter(|c| c.new.is_some())
            .map(|c| entry(&c.path, journal::EntryOp::File, true)),
    );
    out
}

/// Stage, then `between` (the user acts), then commit; on an error the undo runs.
fn write(d: &Decided, between: impl FnOnce()) -> Result<Oid, RunError> {
    let g = d.git.as_ref().unwrap();
    let id = crate::domain::Id::generate().to_string();
    let jdir = journal::jdir(Some(&g.git_dir), Path::new("/nonexistent"), &id);
    let commit = journal::stage(d, &jdir, &id, "plan\n", false)?.unwrap();
    between();
    match journal::commit(d, &jdir, &id, Some(commit)) {
        Ok(()) => {
            journal::remove_jdir(&jdir);
            Ok(commit)
        }
        Err(e) => {
            let undo = BranchUndo {
                git_dir: g.git_dir.clone(),
                branch: g.branch.clone(),
                old_tip: g.tip,
                new_commit: Some(commit),
            };
            let root = Path::new(&d.base.path);
            let kept = journal::rollback(root, &jdir, &id, &undo_entries(d), Some(&undo))?;
            assert!(kept.is_empty(), "{kept:?}");
            Err(e)
        }
    }
}

/// The state as the user sees it while Apply's staging exists (Apply removes it): its
/// directory in `.git` and the files staged beside their targets left out.
fn users_view(repo: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut st = state(repo);
    st.retain(|path, _| {
        let name = path.rsplit('/').next().unwrap_or_default();
        !(name.starts_with('.') && name.contains(".cleveragents-"))
    });
    let top = String::from_utf8(st[".git/*"].1.clone()).unwrap();
    let rest: Vec<&str> = top.lines().filter(|l| *l != "cleveragents-apply").collect();
    st.insert(".git/*".into(), (0, rest.join("\n").into_bytes()));
    st
}

/// Asserts two states are equal, naming the entries that differ.
fn assert_same(a: &BTreeMap<String, (u32, Vec<u8>)>, b: &BTreeMap<String, (u32, Vec<u8>)>) {
    let differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    let show = |m: &BTreeMap<String, (u32, Vec<u8>)>, k: &String| {
        m.get(k).map(|v| String::from_utf8_lossy(&v.1).into_owned())
    };
    if let Some(k) = differ.first() {
        panic!("{k} differs: {:?} vs {:?}", show(a, k), show(b, k));
    }
}

#[test]
fn a_commit_made_while_apply_writes_fails_the_branch_swap_and_everything_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3_500;
    let (root, head) = repo(dir.path(), n);
    let tree = target(&root, head, n);
    let b = base(&root, head);
    let sr = Repository::open(&root).unwrap();
    let d = decide::git(&b, &sr, tree).unwrap();
    assert_eq!(d.changes.len(), n);
    let mut after_user = BTreeMap::new();
    let err = write(&d, || {
        // The user commits another file on the branch.
        fs::write(root.join("other.txt"), "mine\n").unwrap();
        git(&root, &["commit", "-q", "-am", "mine"]);
        after_user = users_view(&root);
    })
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("branch main moved while Apply was writing"),
        "{message}"
    );
    assert!(
        message.contains("Run `agents plan apply` again"),
        "{message}"
    );
    assert_same(&state(&root), &after_user);
    // The retry merges with the new tip and commits once.
    let user_tip = sr.head().unwrap().target().unwrap();
    let d = decide::git(&b, &sr, tree).unwrap();
    let commit = write(&d, || {}).unwrap();
    let c = sr.find_commit(commit).unwrap();
    assert_eq!(c.parent_id(0).unwrap(), user_tip);
    assert_eq!(sr.head().unwrap().target().unwrap(), commit);
    assert_eq!(git(&root, &["status", "--porcelain"]), "");
    assert_eq!(
        fs::read_to_string(root.join("other.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("f/7.txt")).unwrap(),
        "7 changed\n"
    );
}

#[test]
fn an_edit_made_after_the_checks_is_never_overwritten_and_the_write_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let n = 50;
    let (root, head) = repo(dir.path(), n);
    let tree = target(&root, head, n);
    let b = base(&root, head);
    let sr = Repository::open(&root).unwrap();
    let d = decide::git(&b, &sr, tree).unwrap();
    let mut after_user = BTreeMap::new();
    let err = write(&d, || {
        // In place, as an editor that does not rename would save it.
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(root.join("f/30.txt"))
            .unwrap();
        std::io::Write::write_all(&mut f, b"my line\n").unwrap();
        after_user = users_view(&root);
    })
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("f/30.txt changed while Apply was writing"),
        "{message}"
    );
    assert_same(&state(&root), &after_user);
    assert_eq!(
        fs::read_to_string(root.join("f/30.txt")).unwrap(),
        "30\nmy line\n"
    );
    // Once the edit is put away, the retry applies once.
    git(&root, &["checkout", "--", "f/30.txt"]);
    let d = decide::git(&b, &sr, tree).unwrap();
    let commit = write(&d, || {}).unwrap();
    assert_eq!(sr.find_commit(commit).unwrap().parent_id(0).unwrap(), head);
    assert_eq!(git(&root, &["status", "--porcelain"]), "");
}

/// Every directory under `dir`, relative to it.
fn directories_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_change_over_many_directories_is_staged_in_one_flat_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (root, head) = repo(dir.path(), 0);
    let r = Repository::open(&root).unwrap();
    let mut b = git2::build::TreeUpdateBuilder::new();
    for k in 0..20 {
        let blob = r.blob(format!("{k}\n").as_bytes()).unwrap();
        b.upsert(format!("d{k}/sub/new.txt"), blob, FileMode::Blob);
    }
    let tree = b
        .create_updated(&r, &r.find_commit(head).unwrap().tree().unwrap())
        .unwrap();
    let d = decide::git(&base(&root, head), &r, tree).unwrap();
    let mut staged = (Vec::new(), 0);
    write(&d, || {
        let journals = root.join(".git/cleveragents-apply");
        let jdir = fs::read_dir(&journals).unwrap().next().unwrap().unwrap().path();
        staged = (
            directories_under(&jdir),
            fs::read_dir(jdir.join("new")).unwrap().count(),
        );
    })
    .unwrap();
    assert_eq!(staged, (vec!["new".to_string()], 20));
    assert_eq!(fs::read_to_string(root.join("d7/sub/new.txt")).unwrap(), "7\n");
    assert!(!root.join(".git/cleveragents-apply").exists());
}

/// Applies a five-file change, lets the user `edit` the work tree, then runs the undo of an
/// interrupted Apply: the temporary directory, the work tree, the journal directory and what
/// the undo had to keep.
fn undo_after_the_user_edits(
    edit: impl FnOnce(&Path),
) -> (tempfile::TempDir, PathBuf, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let n = 5;
    let (root, head) = repo(dir.path(), n);
    let tree = target(&root, head, n);
    let r = Repository::open(&root).unwrap();
    let d = decide::git(&base(&root, head), &r, tree).unwrap();
    let id = crate::domain::Id::generate().to_string();
    let jdir = journal::jdir(Some(&root.join(".git")), Path::new("/nonexistent"), &id);
    let commit = journal::stage(&d, &jdir, &id, "plan\n", false).unwrap().unwrap();
    journal::commit(&d, &jdir, &id, Some(commit)).unwrap();
    edit(&root);
    let undo = BranchUndo {
        git_dir: root.join(".git"),
        branch: "main".into(),
        old_tip: head,
        new_commit: Some(commit),
    };
    let kept = journal::rollback(&root, &jdir, &id, &undo_entries(&d), Some(&undo)).unwrap();
    (dir, root, jdir, kept)
}

#[test]
fn a_file_edited_in_place_after_apply_wrote_it_is_kept_by_the_undo() {
    // The user rewrites the file Apply wrote in place (the same inode, as some editors do),
    // before the undo of an interrupted Apply runs.
    let (_dir, root, jdir, kept) = undo_after_the_user_edits(|root| {
        fs::write(root.join("f/3.txt"), "mine, written in place\n").unwrap();
    });
    assert_eq!(kept, ["f/3.txt"]);
    assert_eq!(
        fs::read_to_string(root.join("f/3.txt")).unwrap(),
        "mine, written in place\n"
    );
    assert_eq!(fs::read_to_string(jdir.join("kept/f/3.txt")).unwrap(), "3\n");
    assert_eq!(fs::read_to_string(root.join("f/2.txt")).unwrap(), "2\n");
}

#[test]
fn an_original_the_undo_cannot_put_back_is_kept_under_its_path() {
    // After Apply wrote it, the user saves one file as most editors do (a new file renamed
    // over it) before the undo runs.
    let (_dir, root, jdir, kept) = undo_after_the_user_edits(|root| {
        fs::write(root.join("f/3.txt.swp"), "mine\n").unwrap();
        fs::rename(root.join("f/3.txt.swp"), root.join("f/3.txt")).unwrap();
    });
    assert_eq!(kept, ["f/3.txt"]);
    assert_eq!(fs::read_to_string(root.join("f/3.txt")).unwrap(), "mine\n");
    assert_eq!(fs::read_to_string(jdir.join("kept/f/3.txt")).unwrap(), "3\n");
    assert_eq!(fs::read_to_string(root.join("f/2.txt")).unwrap(), "2\n");
}
